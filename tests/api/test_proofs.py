"""Isolation proofs over the API: issue, store, list, keys and rotation (issue 5)."""

from __future__ import annotations

import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from policies.errors import InvalidValueError
from policies.evidence.audit_log import load_public_key
from policies.evidence.proofs import PREDICATE_TYPE, verify_envelope
from policies.verdict import Verdict
from tenancy.record import audit_log
from tenancy.schemas import TokenCreate
from tenancy.usecases import signing_keys, tokens
from tests.builders import FABRIC, assert_problem, created, ok

ADMIN = "bootstrap-admin-token"
PATH = "/v1/tenants/{}/isolation-proofs"


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def world(make_client, onboarded):
    client = make_client(admin_token=ADMIN)

    def token(role: str, tenant: str | None = None) -> dict[str, str]:
        spec = TokenCreate(name=f"p-{role}-{tenant or 'all'}", role=role, tenant=tenant)
        return bearer(tokens.create_token(client.app.state.uow, spec=spec).token)

    return client, token


def issue(client, tenant: str, headers: dict[str, str]):
    return client.post(PATH.format(tenant), json={"fabric": FABRIC}, headers=headers)


def published_keys(client, headers) -> list[Ed25519PublicKey]:
    return [load_public_key(k["pem"]) for k in ok(client.get("/v1/keys", headers=headers))["keys"]]


@pytest.mark.parametrize(
    ("role", "tenant"), [("operator", None), ("auditor", None), ("tenant-admin", "acme")]
)
def test_operators_auditors_and_the_tenants_admins_issue_verifiable_proofs(world, role, tenant):
    client, token = world
    headers = token(role, tenant)

    body = created(issue(client, "acme", headers))

    statement = verify_envelope(body["envelope"], published_keys(client, headers))
    assert statement["predicateType"] == PREDICATE_TYPE
    assert [s["name"] for s in statement["subject"]] == ["opensm/partitions.conf"]
    predicate = statement["predicate"]
    assert predicate["tenant"] == "acme" and predicate["fabric"] == FABRIC
    assert predicate["verdict"] == {"holds": True}
    assert {r["owner"] for r in predicate["reachable"]} == {"tenant:acme", "service:storage"}
    assert predicate["time"] == "2026-03-01T12:00:00Z"
    stored = ok(client.get(f"/v1/proofs/{body['id']}", headers=headers))
    assert stored["envelope"] == body["envelope"]


def test_viewers_billing_and_other_tenants_cannot_issue(world):
    client, token = world

    assert_problem(issue(client, "acme", token("tenant-viewer", "acme")), 403, "forbidden")
    assert_problem(issue(client, "acme", token("billing")), 403, "forbidden")
    assert_problem(issue(client, "globex", token("tenant-admin", "acme")), 404)


def test_no_proof_when_the_verdict_does_not_hold(world, monkeypatch):
    client, token = world
    broken = Verdict(holds=False, snapshot_digest="sha256:00", counterexamples=(), reachability=())
    monkeypatch.setattr("tenancy.usecases.proofs.verify_snapshot", lambda snapshot: broken)

    assert_problem(issue(client, "acme", token("operator")), 409, "isolation-violation")
    assert ok(client.get("/v1/proofs", headers=token("operator")))["count"] == 0


def test_lists_filter_and_tenants_see_only_their_own(world, clock):
    client, token = world
    operator = token("operator")
    # acme's own admin issues it: a tenant reads only the tenant views (issue 10, item 6)
    acme = created(issue(client, "acme", token("tenant-admin", "acme")))["id"]
    clock.advance(3600)
    globex = created(issue(client, "globex", operator))["id"]

    def ids(headers, query: str = "") -> list[str]:
        return [p["id"] for p in ok(client.get(f"/v1/proofs{query}", headers=headers))["data"]]

    assert sorted(ids(operator)) == sorted([acme, globex])
    assert ids(operator, "?tenant=globex") == [globex]
    assert ids(operator, "?fabric=nope") == []
    assert ids(operator, "?since=2026-03-01T12:30:00Z") == [globex]
    viewer = token("tenant-viewer", "acme")
    assert ids(viewer) == [acme]
    assert ids(viewer, "?tenant=globex") == []
    assert_problem(client.get(f"/v1/proofs/{globex}", headers=viewer), 404)
    page = ok(client.get("/v1/proofs?limit=1", headers=operator))
    assert page["count"] == 2 and page["next"] is not None
    rest = ok(client.get(f"/v1/proofs?limit=1&cursor={page['next']}", headers=operator))
    assert {page["data"][0]["id"], rest["data"][0]["id"]} == {acme, globex}


def test_keys_are_published_to_every_role_with_keyid_and_jwk(world):
    client, token = world

    for role, tenant in [("billing", None), ("tenant-viewer", "acme"), ("auditor", None)]:
        keys = ok(client.get("/v1/keys", headers=token(role, tenant)))["keys"]
        assert [k["status"] for k in keys] == ["active"]
        assert keys[0]["jwk"]["kty"] == "OKP" and keys[0]["jwk"]["crv"] == "Ed25519"
        assert len(keys[0]["keyid"]) == 64
        assert "PRIVATE" not in keys[0]["pem"]


def test_rotation_keeps_old_proofs_verifiable(world):
    client, token = world
    headers = token("operator")
    old = created(issue(client, "acme", headers))
    old_keyid = old["envelope"]["signatures"][0]["keyid"]
    ok(client.get("/v1/audit/checkpoint", headers=headers))  # signed with the old key

    rotated = signing_keys.rotate(client.app.state.uow)
    new = created(issue(client, "acme", headers))

    keys = ok(client.get("/v1/keys", headers=headers))["keys"]
    assert {k["keyid"]: k["status"] for k in keys} == {
        old_keyid: "retired",
        rotated.keyid: "active",
    }
    assert new["envelope"]["signatures"][0]["keyid"] == rotated.keyid
    published = published_keys(client, headers)
    for proof in (old, new):
        assert verify_envelope(proof["envelope"], published)
    with pytest.raises(InvalidValueError):
        verify_envelope(old["envelope"], [load_public_key(rotated.pem)])
    # the audit log's checkpoints stay verifiable across the rotation
    ok(client.get("/v1/audit/checkpoint", headers=headers))
    assert audit_log.verify(client.app.state.uow).ok


def test_a_proofs_subjects_download_by_digest_after_the_fabric_moves_on(world):
    client, token = world
    auditor, operator = token("auditor"), token("operator")
    statement = verify_envelope(
        created(issue(client, "acme", auditor))["envelope"], published_keys(client, auditor)
    )
    digest = statement["predicate"]["snapshot_digest"]
    body = {"fabric": FABRIC, "nodes": ["gpu0007"]}  # a free node: the fabric moves on
    created(client.post("/v1/tenants/globex/allocations", json=body, headers=operator))

    (subject,) = statement["subject"]
    url = f"/v1/fabrics/{FABRIC}/snapshots/{digest}/artifacts/{subject['name']}"
    answer = client.get(url, headers=auditor)

    assert answer.status_code == 200, answer.text
    assert hashlib.sha256(answer.content).hexdigest() == subject["digest"]["sha256"]
    history = ok(client.get(f"/v1/fabrics/{FABRIC}/snapshots", headers=auditor))["data"]
    assert [(s["current"], s["retained"]) for s in history if s["digest"] == digest] == [
        (False, True)
    ]
