"""The audit log page: entries, the signed checkpoint, an inclusion proof checked in chromium.

The browser (api/ui/static/audit-log.js, verify.js) verifies the checkpoint's C2SP signature,
recomputes the entry's leaf hash from the entry shown and walks the RFC 9162 path to the
checkpoint's root, without WebCrypto (crypto.subtle is trapped, tests/ui/evidence_site.py); a
tampered path or leaf fails at its step. verify.js's Merkle and canonical JSON code is also
checked against the server's (policies/evidence/merkle.py, rfc8785) on every leaf of small trees.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest
import rfc8785
from fastapi.testclient import TestClient
from playwright.sync_api import Page, Route, expect

from policies.evidence.merkle import inclusion_proof, leaf_hash, root_hash
from tenancy.record import audit_log
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


def check_inclusion(page: Page, index: int) -> None:
    expect(page.locator("body")).to_have_attribute("data-audit-ready", "true")
    page.click(f"button[data-check-index='{index}']")
    expect(page.locator(OUTCOME)).to_have_attribute("data-outcome", re.compile("passed|failed"))


def test_an_inclusion_proof_verifies_in_the_browser(page: Page, sign_in, evidence: EvidenceSite):
    sign_in(page, "auditor")
    page.goto("/ui/audit-log")
    expect(page.locator(".checkpoint .size")).to_have_text(re.compile(r"^\d+$"))
    size = int(page.locator(".checkpoint .size").inner_text())
    assert size >= 5  # the demo's changes and the proofs issued
    expect(page.locator("table.entries tbody tr")).to_have_count(min(size, 25))
    check_inclusion(page, 3)
    expect(page.locator(OUTCOME)).to_have_text("entry 3 is in the signed log")
    assert steps_of(page) == {"checkpoint": "pass", "leaf": "pass", "inclusion": "pass"}
    assert subtle_touches(page) == []
    if not evidence.loopback:
        assert page.evaluate("window.isSecureContext") is False
    screenshot(page, "audit-log")


@pytest.mark.parametrize(
    ("field", "failed_step"),
    [("path", "inclusion"), ("leaf_hash", "leaf")],
)
def test_a_tampered_inclusion_proof_fails(page: Page, sign_in, field: str, failed_step: str):
    def tampered(route: Route) -> None:
        proof = route.fetch().json()
        if field == "path":
            first = bytearray(base64.b64decode(proof["path"][0]))
            first[0] ^= 1
            proof["path"][0] = base64.b64encode(bytes(first)).decode()
        else:
            proof["leaf_hash"] = base64.b64encode(
                hashlib.sha256(b"another entry").digest()
            ).decode()
        route.fulfill(json=proof)

    page.route("**/ui/audit-log/inclusion?*", tampered)
    sign_in(page, "auditor")
    page.goto("/ui/audit-log")
    check_inclusion(page, 2)
    expect(page.locator(OUTCOME)).to_have_text(f"FAILED at step: {failed_step}")
    assert steps_of(page)["checkpoint"] == "pass"
    assert steps_of(page)[failed_step] == "fail"


def test_the_browsers_merkle_code_agrees_with_the_servers(page: Page, sign_in):
    sign_in(page, "auditor")
    page.goto("/ui/audit-log")
    documents = [
        {"index": i, "time": "2026-12-03T10:00:00Z", "principal": f"token:é{i}\u2014",
         "role": "operator", "action": "grant.create", "target": f"tenants/t{i}",
         "request_id": None, "fabric": "ib-east" if i % 2 else None,
         "digest_before": None, "digest_after": "v2:" + "a" * 64}
        for i in range(13)
    ]  # fmt: skip
    leaves = [leaf_hash(rfc8785.dumps(d)) for d in documents]
    cases = [
        {
            "index": index,
            "size": size,
            "path": [p.hex() for p in inclusion_proof(leaves[:size], index)],
            "root": root_hash(leaves[:size]).hex(),
        }
        for size in range(1, len(leaves) + 1)
        for index in range(size)
    ]
    result = page.evaluate(
        """async ([documents, cases]) => {
          const v = await import("/ui/static/verify.js");
          const unhex = (h) => Uint8Array.from(h.match(/../g) ?? [], (b) => parseInt(b, 16));
          const leaves = documents.map((d) => v.leafHash(v.utf8(v.canonicalJson(d))));
          const roots = cases.map((c) => {
            const root = v.rootFromInclusion(c.index, c.size, leaves[c.index], c.path.map(unhex));
            return root !== null && v.hex(root) === c.root;
          });
          const wrong = cases.filter((c) => c.size > 1).map((c) => {  // another leaf's proof
            const other = (c.index + 1) % c.size;
            const root = v.rootFromInclusion(other, c.size, leaves[other], c.path.map(unhex));
            return root !== null && v.hex(root) === c.root;
          });
          return { leaves: leaves.map(v.hex), roots, wrong };
        }""",
        [documents, cases],
    )
    assert result["leaves"] == [leaf.hex() for leaf in leaves]
    assert all(result["roots"]) and len(result["roots"]) == len(cases)
    assert not any(result["wrong"])
    assert subtle_touches(page) == []


# --- server side (TestClient) --------------------------------------------------------------------


def test_entries_are_paged_and_the_inclusion_proof_is_the_apis(site: ConsoleSite):
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        first = client.get("/ui/audit-log").text
        count = len(audit_log.list_entries(site.uow(), limit=1000, cursor=None).data)
        assert first.count("<tr data-index=") == min(count, 25)
        proof = client.get(f"/ui/audit-log/inclusion?index=1&size={count}")
        assert proof.status_code == 200
        expected = audit_log.inclusion(site.uow(), index=1, size=count)
        assert proof.json() == expected.model_dump(mode="json")
        assert client.get(f"/ui/audit-log/inclusion?index=0&size={count + 1}").status_code == 404
        data = json.loads(first.split('id="audit-data">', 1)[1].split("</script>", 1)[0])
        assert data["checkpoint"]["size"] == count
        assert data["entries"][0] == audit_log.list_entries(site.uow(), limit=1, cursor=None).data[
            0
        ].model_dump(mode="json")
        client_sign_in(client, site.tokens["acme-viewer"])
        assert client.get("/ui/audit-log").status_code == 403
        assert client.get("/ui/audit-log/inclusion?index=0&size=1").status_code == 403


def test_the_newest_page_ends_with_the_newest_entry(site: ConsoleSite):
    from tenancy.usecases import proofs

    for _ in range(30):  # each proof issued is an audit entry
        proofs.issue(site.uow(), tenant_name="acme", fabric_name="ib-east")
    count = len(audit_log.list_entries(site.uow(), limit=1000, cursor=None).data)
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens["operator"])
        first = client.get("/ui/audit-log").text
        newest = re.search(r'class="newest" href="\?cursor=([^"]+)"', first)
        assert newest is not None
        last = client.get(f"/ui/audit-log?cursor={newest.group(1)}").text
        indexes = [int(i) for i in re.findall(r'<tr data-index="(\d+)"', last)]
        assert indexes == list(range(count - 25, count))
        jumped = client.get("/ui/audit-log?start=7").text
        indexes = [int(i) for i in re.findall(r'<tr data-index="(\d+)"', jumped)]
        assert indexes == list(range(7, 32))
        assert client.get("/ui/audit-log?start=-1").status_code == 400


def test_without_the_signing_key_the_entries_still_show(site: ConsoleSite):
    from tenancy.store.settings import Settings

    key_file = Settings(database_url=site.url).signing_key_path
    assert key_file is not None and key_file.exists()
    key_file.unlink()  # a new checkpoint is due (the tokens were minted after the last one)
    with TestClient(site.app(), follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        answer = client.get("/ui/audit-log")
    assert answer.status_code == 200
    assert "No checkpoint can be signed: the signing key is missing" in answer.text
    assert "<tr data-index=" in answer.text and "data-check-index" not in answer.text
