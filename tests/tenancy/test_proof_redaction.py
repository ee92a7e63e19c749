"""Proof views in the use cases (issue 10, item 6): stored with the proof, filtered on read.

InfiniBand redaction is shown in tests/policies and tests/api; here the view is stored and
filtered, and on RoCE (whose claims name only the tenant and its granted services) the tenant
view is the full proof with another ``view`` and verifies against the leaves' files.
"""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from policies.errors import NotFoundError
from policies.evidence.audit_log import load_public_key
from policies.evidence.proofs import View, check_claims, verify_envelope
from tenancy.gate import verification
from tenancy.schemas import GrantCreate
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import proofs, shared_services, signing_keys
from tests.builders import FABRIC, ROCE_FABRIC, SERVICE


def published_keys(uow: UnitOfWork) -> list[Ed25519PublicKey]:
    return [load_public_key(k.pem) for k in signing_keys.list_keys(uow).keys]


def statement_of(uow: UnitOfWork, proof: Any) -> dict[str, Any]:
    return verify_envelope(proof.envelope.model_dump(by_alias=True), published_keys(uow))


def listed(uow: UnitOfWork, view: View | None) -> list[str]:
    page = proofs.list_proofs(
        uow, tenant="acme", fabric=None, since=None, limit=100, cursor=None, view=view
    )
    return [p.id for p in page.data]


def test_the_view_is_stored_and_reads_filter_by_it(uow, onboarded):
    full = proofs.issue(uow, tenant_name="acme", fabric_name=FABRIC)
    tenant = proofs.issue(uow, tenant_name="acme", fabric_name=FABRIC, view="tenant")

    assert (full.view, tenant.view) == ("full", "tenant")
    assert statement_of(uow, tenant)["predicate"]["view"] == "tenant"
    assert proofs.get_proof(uow, proof_id=tenant.id, tenant="acme", view="tenant").view == "tenant"
    with pytest.raises(NotFoundError):
        proofs.get_proof(uow, proof_id=full.id, tenant="acme", view="tenant")
    assert proofs.get_proof(uow, proof_id=full.id, tenant=None).view == "full"
    assert listed(uow, "tenant") == [tenant.id]
    assert sorted(listed(uow, None)) == sorted([full.id, tenant.id])


def test_a_tenant_view_counts_other_tenants_in_the_service_partition(uow, onboarded):
    shared_services.grant_service(
        uow, tenant_name="globex", spec=GrantCreate(fabric=FABRIC, service=SERVICE)
    )

    proof = proofs.issue(uow, tenant_name="acme", fabric_name=FABRIC, view="tenant")

    statement = statement_of(uow, proof)
    counted = {s["segment"]: s["others"]["count"] for s in statement["predicate"]["segments"]}
    assert counted == {"0x0100": 4, "0x0101": 0}
    assert "tenant:globex" not in statement["predicate"]["ownership"].values()
    artifact, _ = verification.get_artifact(uow, fabric_name=FABRIC, path="opensm/partitions.conf")
    assert check_claims(statement, {artifact.path: artifact.content})


def test_a_roce_tenant_view_is_the_full_proof_with_its_view(uow, roce_onboarded):
    full = statement_of(uow, proofs.issue(uow, tenant_name="acme", fabric_name=ROCE_FABRIC))
    tenant = statement_of(
        uow, proofs.issue(uow, tenant_name="acme", fabric_name=ROCE_FABRIC, view="tenant")
    )

    assert (full["predicate"]["view"], tenant["predicate"]["view"]) == ("full", "tenant")
    assert {k: v for k, v in tenant["predicate"].items() if k != "view"} == {
        k: v for k, v in full["predicate"].items() if k != "view"
    }
    assert set(tenant["predicate"]["vrfs"]) == {"tenant:acme", "service:storage"}
    files = {
        s["name"]: verification.get_artifact(uow, fabric_name=ROCE_FABRIC, path=s["name"])[
            0
        ].content
        for s in tenant["subject"]
    }
    assert check_claims(tenant, files)
