"""Isolation proofs (issue 5): issue, list and read them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from api.deps import CurrentPrincipal, Listing, Uow, authorize, bearer_scheme
from tenancy import proofs
from tenancy.schemas import Page, ProofCreated, ProofIssue, ProofView

router = APIRouter(tags=["proofs"], dependencies=[Depends(bearer_scheme), Depends(authorize)])


@router.post("/v1/tenants/{tenant}/isolation-proofs", status_code=status.HTTP_201_CREATED)
def issue_proof(tenant: str, spec: ProofIssue, uow: Uow) -> ProofCreated:
    """Sign a proof (DSSE over an in-toto Statement) that the tenant is isolated on the fabric.

    409 isolation-violation when the fabric does not verify. Recorded in the audit log.
    """
    return proofs.issue(uow, tenant_name=tenant, fabric_name=spec.fabric)


@router.get("/v1/proofs")
def list_proofs(
    uow: Uow,
    listing: Listing,
    principal: CurrentPrincipal,
    tenant: Annotated[str | None, Query(max_length=63)] = None,
    fabric: Annotated[str | None, Query(max_length=63)] = None,
    since: Annotated[datetime | None, Query(description="RFC 3339: issued from then")] = None,
) -> Page[ProofView]:
    """Stored proofs, oldest id first; a tenant principal sees its own tenant's only."""
    if principal.tenant is not None:
        if tenant not in (None, principal.tenant):
            return Page(data=[], count=0, next=None)
        tenant = principal.tenant
    return proofs.list_proofs(
        uow, tenant=tenant, fabric=fabric, since=since, limit=listing.limit, cursor=listing.cursor
    )


@router.get("/v1/proofs/{proof_id}")
def get_proof(proof_id: str, uow: Uow, principal: CurrentPrincipal) -> ProofView:
    """One stored proof; another tenant's proof is a 404."""
    return proofs.get_proof(uow, proof_id=proof_id, tenant=principal.tenant)
