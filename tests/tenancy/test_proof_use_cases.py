"""Isolation proofs without HTTP: issued over a verified fabric, signed with the published key,
stored and listed by filter; refused when the fabric does not verify; verifiable after rotation."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from policies.errors import InvalidValueError, IsolationViolationError, NotFoundError
from policies.evidence.audit_log import load_public_key
from policies.evidence.proofs import PREDICATE_TYPE, verify_envelope
from policies.verdict import Verdict
from tenancy.gate import verification
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import proofs, signing_keys
from tests.builders import FABRIC, audit_trail


def published_keys(uow: UnitOfWork) -> list[Ed25519PublicKey]:
    return [load_public_key(k.pem) for k in signing_keys.list_keys(uow).keys]


def statement_of(envelope: Any, keys: list[Ed25519PublicKey]) -> dict[str, Any]:
    return verify_envelope(envelope.model_dump(by_alias=True), keys)


def issue(uow: UnitOfWork, tenant: str = "acme"):
    return proofs.issue(uow, tenant_name=tenant, fabric_name=FABRIC)


def listed(uow: UnitOfWork, **filters: Any) -> list[str]:
    query = {"tenant": None, "fabric": None, "since": None, "limit": 100, "cursor": None}
    return [p.id for p in proofs.list_proofs(uow, **{**query, **filters}).data]


def test_a_proof_states_the_tenants_verified_isolation_under_the_published_key(uow, onboarded):
    proof = issue(uow)

    statement = statement_of(proof.envelope, published_keys(uow))
    predicate = statement["predicate"]
    assert statement["predicateType"] == PREDICATE_TYPE
    assert [s["name"] for s in statement["subject"]] == ["opensm/partitions.conf"]
    assert (predicate["tenant"], predicate["fabric"], predicate["kind"]) == (
        "acme",
        FABRIC,
        "infiniband",
    )
    assert predicate["verdict"] == {"holds": True}
    assert (
        predicate["snapshot_digest"]
        == verification.verify_fabric(uow, fabric_name=FABRIC).snapshot_digest
    )
    assert {r["owner"] for r in predicate["reachable"]} == {"tenant:acme", "service:storage"}
    assert predicate["time"] == "2026-03-01T12:00:00Z"


def test_the_subject_digest_is_the_rendered_partitions_conf(uow, onboarded):
    artifact, _ = verification.get_artifact(uow, fabric_name=FABRIC, path="opensm/partitions.conf")

    [subject] = statement_of(issue(uow).envelope, published_keys(uow))["subject"]

    assert subject["digest"] == {"sha256": hashlib.sha256(artifact.content).hexdigest()}


def test_a_proof_is_stored_and_reads_back_with_the_same_envelope(uow, onboarded, clock):
    proof = issue(uow)

    stored = proofs.get_proof(uow, proof_id=proof.id, tenant=None)

    assert (stored.id, stored.tenant, stored.fabric) == (proof.id, "acme", FABRIC)
    assert stored.created_at == "2026-03-01T12:00:00Z"
    assert stored.envelope == proof.envelope


def test_issuing_is_audited_but_changes_no_managed_state(uow, onboarded, db_dump, engine):
    before = db_dump()

    proof = issue(uow)

    after = db_dump()
    evidence = {"proof", "audit_entry", "signing_key", "snapshot_file", "artifact_blob"}
    assert {t for t in after if after[t] != before[t]} <= evidence  # the subjects are retained
    assert len(after["proof"]) == len(before["proof"]) + 1
    assert audit_trail(engine)[-1] == ("proof.issue", f"tenants/acme/isolation-proofs/{proof.id}")


def test_no_proof_is_issued_when_the_fabric_does_not_verify(uow, onboarded, monkeypatch, db_dump):
    broken = Verdict(holds=False, snapshot_digest="sha256:00", counterexamples=(), reachability=())
    monkeypatch.setattr(proofs, "verify_snapshot", lambda snapshot: broken)
    before = db_dump()

    with pytest.raises(IsolationViolationError, match="no isolation proof") as refused:
        issue(uow)

    assert refused.value.extensions == {"snapshot_digest": "sha256:00"}
    assert db_dump() == before


@pytest.mark.parametrize(
    ("tenant", "fabric"), [("initech", FABRIC), ("acme", "ib-nowhere")], ids=["tenant", "fabric"]
)
def test_a_proof_for_an_unknown_tenant_or_fabric_is_not_found(uow, onboarded, tenant, fabric):
    with pytest.raises(NotFoundError, match=tenant if tenant == "initech" else fabric):
        proofs.issue(uow, tenant_name=tenant, fabric_name=fabric)


def test_proofs_are_listed_by_tenant_fabric_and_time(uow, onboarded, clock):
    acme = issue(uow).id
    clock.advance(3600)
    globex = issue(uow, "globex").id

    assert sorted(listed(uow)) == sorted([acme, globex])
    assert listed(uow, tenant="globex") == [globex]
    assert listed(uow, fabric="nope") == []
    assert listed(uow, since=clock.now - timedelta(minutes=30)) == [globex]


def test_the_proof_listing_pages_with_the_total_on_each_page(uow, onboarded):
    ids = {issue(uow).id, issue(uow, "globex").id}

    first = proofs.list_proofs(uow, tenant=None, fabric=None, since=None, limit=1, cursor=None)
    rest = proofs.list_proofs(uow, tenant=None, fabric=None, since=None, limit=1, cursor=first.next)

    assert (first.count, rest.count, rest.next) == (2, 2, None)
    assert {first.data[0].id, rest.data[0].id} == ids


def test_a_tenant_scoped_read_of_another_tenants_proof_is_not_found(uow, onboarded):
    globex = issue(uow, "globex").id

    with pytest.raises(NotFoundError):
        proofs.get_proof(uow, proof_id=globex, tenant="acme")
    assert proofs.get_proof(uow, proof_id=globex, tenant="globex").tenant == "globex"
    with pytest.raises(NotFoundError):
        proofs.get_proof(uow, proof_id="00000000-0000-0000-0000-000000000000", tenant=None)


def test_a_rotation_keeps_old_proofs_verifiable_and_signs_new_ones_with_the_new_key(uow, onboarded):
    old = issue(uow)
    old_keyid = old.envelope.signatures[0].keyid

    rotated = signing_keys.rotate(uow)
    new = issue(uow)

    keys = signing_keys.list_keys(uow).keys
    assert {k.keyid: k.status for k in keys} == {old_keyid: "retired", rotated.keyid: "active"}
    assert new.envelope.signatures[0].keyid == rotated.keyid
    for proof in (old, new):
        assert statement_of(proof.envelope, published_keys(uow))
    with pytest.raises(InvalidValueError):
        statement_of(old.envelope, [load_public_key(rotated.pem)])


def test_published_keys_carry_their_keyid_and_jwk_and_no_private_part(uow, onboarded):
    [key] = signing_keys.list_keys(uow).keys

    assert key.status == "active"
    assert (key.jwk.kty, key.jwk.crv) == ("OKP", "Ed25519")
    assert len(key.keyid) == 64
    assert "PRIVATE" not in key.pem
