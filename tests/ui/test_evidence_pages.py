"""Evidence pages: proofs listed and read, and verified in chromium without WebCrypto.

The browser check (api/ui/static/evidence.js) must pass for a real proof, also once the fabric
moved on, and fail at the right step for a tampered one: an altered payload at the signature, an
altered artifact at its digest. A file the service cannot give (410, no answer) is no tampering:
the check says to verify offline, never FAILED. It runs on a page served from a non-loopback
address when the host has one (an insecure context, as `serve` on a management network) and with
crypto.subtle trapped, which nothing may touch (tests/ui/evidence_site.py).
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from playwright.sync_api import Page, Route, expect

from api.ui.pages.proof_claims import readable_claims, statement_of
from policies.evidence.dsse import sign_envelope
from tenancy.gate import verification
from tenancy.schemas import ProofCreated
from tenancy.usecases import proofs, signing_keys
from tests.ui import evidence_site
from tests.ui.browser import screenshot
from tests.ui.console_site import ConsoleSite
from tests.ui.evidence_site import EvidenceSite, steps_of, subtle_touches
from tests.ui.test_console_session import sign_in as client_sign_in

# The served site with proofs and its guarded pages (tests/ui/evidence_site.py), not `console`.
evidence = evidence_site.evidence
guard = evidence_site.guard
page = evidence_site.page
sign_in = evidence_site.sign_in

OUTCOME = "#verify-outcome"


def statement(proof: ProofCreated) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(base64.b64decode(proof.envelope.payload))
    return document


def verify(page: Page) -> None:
    button = page.locator("#verify-button")
    expect(button).to_have_attribute("data-ready", "true")  # the module has loaded
    button.click()
    outcomes = re.compile("passed|failed|unavailable")
    expect(page.locator(OUTCOME)).to_have_attribute("data-outcome", outcomes)


def active_keyid(site: ConsoleSite) -> str:
    (key,) = signing_keys.list_keys(site.uow()).keys
    return key.keyid


@pytest.mark.parametrize("name", ["acme-ib", "acme-roce"])
def test_a_real_proof_verifies_in_the_browser_without_webcrypto(
    page: Page, sign_in, evidence: EvidenceSite, name: str
):
    proof = evidence.proofs[name]
    subjects = [s["name"] for s in statement(proof)["subject"]]
    fabric = statement(proof)["predicate"]["fabric"]
    current = verification.verify_fabric(evidence.site.uow(), fabric_name=fabric).snapshot_digest
    assert statement(proof)["predicate"]["snapshot_digest"] != current  # the fabric moved on
    sign_in(page, "auditor")
    page.goto(f"/ui/evidence/proofs/{proof.id}")
    expect(page.locator(".summary h2")).to_have_text(
        f"Tenant acme on fabric {statement(proof)['predicate']['fabric']}"
    )
    expect(page.locator(".summary .keyid")).to_have_text(active_keyid(evidence.site))
    expect(page.locator("table.reachable tr[data-owner='service:storage']")).to_have_count(1)
    verify(page)
    expect(page.locator(OUTCOME)).to_have_attribute("data-outcome", "passed")
    expected = ["envelope", "key", "signature", "statement"] + [f"artifact:{s}" for s in subjects]
    assert steps_of(page) == dict.fromkeys(expected, "pass")
    assert subtle_touches(page) == []
    if not evidence.loopback:  # served as on a management network: no WebCrypto exists there
        assert page.evaluate("window.isSecureContext") is False
    if name == "acme-ib":
        digest = statement(proof)["subject"][0]["digest"]["sha256"]
        expect(
            page.locator("#verify-steps li[data-step='artifact:opensm/partitions.conf']")
        ).to_contain_text(digest)
        screenshot(page, "proof")


def test_a_tampered_payload_fails_at_the_signature_step(page: Page, sign_in, evidence):
    proof = evidence.proofs["acme-ib"]
    sign_in(page, "auditor")
    page.goto("/ui/evidence/verify")
    expect(page.locator("ul.keys .keyid")).to_have_text(active_keyid(evidence.site))
    document = proof.model_dump(mode="json", by_alias=True)
    page.fill("#envelope-text", json.dumps(document))  # as the API answered it: verifies
    verify(page)
    expect(page.locator(OUTCOME)).to_have_attribute("data-outcome", "passed")

    tampered = statement(proof)
    tampered["predicate"]["reachable"] = [{"owner": "tenant:acme", "segment": "0x0101"}]
    envelope = document["envelope"]
    envelope["payload"] = base64.b64encode(json.dumps(tampered).encode()).decode()
    page.fill("#envelope-text", json.dumps(envelope))  # a bare envelope is accepted too
    verify(page)
    expect(page.locator(OUTCOME)).to_have_attribute("data-outcome", "failed")
    expect(page.locator(OUTCOME)).to_have_text("FAILED at step: signature")
    assert steps_of(page) == {"envelope": "pass", "key": "pass", "signature": "fail"}
    assert subtle_touches(page) == []
    screenshot(page, "proof-tampered")

    resigned = sign_envelope(tampered, Ed25519PrivateKey.generate())  # a key nobody published
    page.fill("#envelope-text", json.dumps(resigned))
    verify(page)
    expect(page.locator(OUTCOME)).to_have_text("FAILED at step: key")
    assert steps_of(page) == {"envelope": "pass", "key": "fail"}


def test_a_tampered_artifact_fails_at_the_digest_step(page: Page, sign_in, evidence):
    proof = evidence.proofs["acme-ib"]

    def altered(route: Route) -> None:  # the file as a compromised path would serve it
        answer = route.fetch()
        route.fulfill(response=answer, body=answer.body() + b"\n# 0x0102 acme=full\n")

    page.route("**/artifacts/opensm/partitions.conf", altered)
    sign_in(page, "operator")
    page.goto(f"/ui/evidence/proofs/{proof.id}")
    verify(page)
    expect(page.locator(OUTCOME)).to_have_text("FAILED at step: artifact:opensm/partitions.conf")
    assert steps_of(page) == {
        "envelope": "pass",
        "key": "pass",
        "signature": "pass",
        "statement": "pass",
        "artifact:opensm/partitions.conf": "fail",
    }
    expected = statement(proof)["subject"][0]["digest"]["sha256"]
    failed = page.locator("#verify-steps li[data-state=fail]")
    expect(failed).to_contain_text(f"is not the proof's {expected}")


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (410, "evidence no longer retained: verify offline"),
        (0, "evidence not available: verify offline"),
    ],
    ids=["not-retained", "unreachable"],
)
def test_evidence_the_service_cannot_give_is_unavailable_not_a_tamper_alarm(
    page: Page, sign_in, evidence, guard, answer: int, outcome: str
):
    guard.tolerate(r"/artifacts/")  # the failed fetches it stages: console errors, failed requests
    proof = evidence.proofs["acme-roce"]
    subjects = [s["name"] for s in statement(proof)["subject"]]

    def gone(route: Route) -> None:  # as the service answers once the snapshot was pruned
        if answer == 0:
            route.abort("connectionrefused")
            return
        problem = {"type": "/problems/not-retained", "status": 410, "title": "No longer retained"}
        route.fulfill(status=410, content_type="application/problem+json", json=problem)

    page.route("**/artifacts/**", gone)
    sign_in(page, "auditor")
    page.goto(f"/ui/evidence/proofs/{proof.id}")
    verify(page)

    expect(page.locator(OUTCOME)).to_have_attribute("data-outcome", "unavailable")
    expect(page.locator(OUTCOME)).to_have_text(outcome)
    expected = dict.fromkeys(["envelope", "key", "signature", "statement"], "pass")
    assert steps_of(page) == expected | dict.fromkeys(
        [f"artifact:{s}" for s in subjects], "unavailable"
    )
    unchecked = page.locator("#verify-steps li[data-state=unavailable]").first
    expect(unchecked).to_contain_text("verify offline (isofabric proof verify --artifacts")
    if answer == 410:
        expect(unchecked).to_contain_text("no longer retains this snapshot's files (410)")
        screenshot(page, "proof-evidence-not-retained")


def test_the_auditor_lists_and_filters_every_proof(page: Page, sign_in, evidence):
    sign_in(page, "auditor")
    page.goto("/ui/evidence")
    rows = page.locator("table.proofs tbody tr")
    expect(rows).to_have_count(4)
    screenshot(page, "evidence")
    page.fill("#fabric", "roce-west")
    page.click("form.filters button[type=submit]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-proof", evidence.proofs["acme-roce"].id)
    rows.first.locator("a").click()
    expect(page.locator(".summary h2")).to_have_text("Tenant acme on fabric roce-west")


def test_a_tenant_viewer_sees_only_its_tenants_proofs(page: Page, sign_in, evidence, guard):
    guard.tolerate(r"status of 404")
    sign_in(page, "acme-viewer")
    page.goto("/ui/evidence")
    rows = page.locator("table.proofs tbody tr")
    tenant_view = evidence.proofs["acme-ib-tenant"]
    expect(rows).to_have_count(1)  # its tenant's tenant view; no full proof, no globex
    expect(rows.first).to_have_attribute("data-proof", tenant_view.id)
    expect(page.locator("#tenant")).to_be_disabled()
    page.goto("/ui/evidence?tenant=globex")
    expect(rows).to_have_count(0)
    for other in ("globex-ib", "acme-ib"):
        answer = page.goto(f"/ui/evidence/proofs/{evidence.proofs[other].id}")
        assert answer is not None and answer.status == 404

    page.goto(f"/ui/evidence/proofs/{tenant_view.id}")
    expect(page.locator(".summary .view")).to_have_text("tenant view")
    verify(page)  # the signature verifies; the fabric's files are not the tenant's to read
    expect(page.locator(OUTCOME)).to_have_text("verified: signature")
    assert steps_of(page)["artifact:opensm/partitions.conf"] == "skip"
    assert steps_of(page)["signature"] == "pass"


# --- server side (TestClient) --------------------------------------------------------------------


@pytest.fixture
def client_and_proofs(site: ConsoleSite):
    from tests.ui.evidence_site import issue_proofs

    issued = issue_proofs(site)
    with TestClient(site.app(), follow_redirects=False) as client:
        yield client, issued


def artifact_url(proof, path: str) -> str:
    predicate = statement(proof)["predicate"]
    return (
        f"/ui/evidence/fabrics/{predicate['fabric']}/snapshots/{predicate['snapshot_digest']}"
        f"/artifacts/{path}"
    )


def test_snapshot_files_follow_the_apis_rule(client_and_proofs, site: ConsoleSite):
    client, issued = client_and_proofs
    proof = issued["acme-ib"]
    client_sign_in(client, site.tokens["auditor"])
    answer = client.get(artifact_url(proof, "opensm/partitions.conf"))
    assert answer.status_code == 200
    assert answer.headers["etag"] == f'"{statement(proof)["subject"][0]["digest"]["sha256"]}"'
    assert client.get(artifact_url(proof, "opensm/opensm.conf")).status_code == 403  # secret
    bad = client.get("/ui/evidence/fabrics/ib-east/snapshots/v2:nothex/artifacts/x")
    assert bad.status_code == 400 and "text/html" in bad.headers["content-type"]
    client_sign_in(client, site.tokens["operator"])
    assert client.get(artifact_url(proof, "opensm/opensm.conf")).status_code == 200
    client_sign_in(client, site.tokens["acme-viewer"])
    assert client.get(artifact_url(proof, "opensm/partitions.conf")).status_code == 403


def test_the_list_filters_by_tenant_and_fabric(client_and_proofs, site: ConsoleSite):
    client, issued = client_and_proofs
    client_sign_in(client, site.tokens["operator"])
    assert client.get("/ui/evidence").text.count("data-proof=") == 4
    acme_ib = client.get("/ui/evidence?tenant=acme&fabric=ib-east").text
    expected = {issued["acme-ib"].id, issued["acme-ib-tenant"].id}
    assert set(re.findall(r'data-proof="([^"]+)"', acme_ib)) == expected
    assert client.get("/ui/evidence?fabric=roce-west").text.count("data-proof=") == 1
    missing = client.get("/ui/evidence/proofs/00000000-0000-4000-8000-000000000000")
    assert missing.status_code == 404 and "proof" in missing.text


def test_the_claims_read_as_the_predicate_says(site: ConsoleSite):
    proof = proofs.issue(site.uow(), tenant_name="acme", fabric_name="ib-east", view="tenant")
    claims = readable_claims(statement_of(proof.envelope) or {})
    assert claims["tenant"] == "acme" and claims["kind"] == "InfiniBand"
    assert claims["view"] == "tenant" and claims["holds"] is True
    assert claims["subjects"] == [
        {
            "name": "opensm/partitions.conf",
            "sha256": statement(proof)["subject"][0]["digest"]["sha256"],
        }
    ]
    assert {(r["owner"], r["segment"]) for r in claims["reachable"]} == {
        ("service:storage", "0x0100"),
        ("tenant:acme", "0x0101"),
    }
    storage = next(s for s in claims["segments"] if s["owner"] == "service:storage")
    assert (storage["full"], storage["limited"], storage["others"]["count"]) == (2, 4, 0)
    assert claims["peerings"] == [] and claims["policy"]["isolation"] == "segment"
    (signer,) = proof.envelope.signatures
    assert signer.keyid == active_keyid(site)


# Last in this module: it rotates the evidence site's key (its own key files, tests/ui/
# evidence_site.py), which the tests above expect to be the only one.
def test_a_proof_the_retired_key_signs_after_its_retirement_fails(page: Page, sign_in, evidence):
    uow = evidence.site.uow()
    path = uow.settings.signing_key_path
    assert path is not None
    retired = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(retired, Ed25519PrivateKey)
    signing_keys.rotate(uow)
    proof = evidence.proofs["acme-ib"]
    forged = statement(proof)
    forged["predicate"]["time"] = "2099-01-01T00:00:00Z"  # whoever kept the old key signs later
    sign_in(page, "auditor")
    page.goto("/ui/evidence/verify")

    page.fill("#envelope-text", json.dumps(proof.model_dump(mode="json", by_alias=True)))
    verify(page)
    expect(page.locator(OUTCOME)).to_have_attribute("data-outcome", "passed")
    assert steps_of(page)["retired"] == "pass"
    page.fill("#envelope-text", json.dumps(sign_envelope(forged, retired)))
    verify(page)
    expect(page.locator(OUTCOME)).to_have_text("FAILED at step: retired")
