"""Isolation proofs: issue, list and read them.

Operators and auditors get full proofs; a tenant's roles get tenant views, which count the other
members of a shared segment instead of naming them, and read no other view: a tenant
may not learn which other tenants share a service with it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Query, status
from fastapi.responses import Response

from api.deps import CurrentPrincipal, HeavyWork, Listing, Uow, authorized_router
from api.params import ProofIdPath, TenantPath
from api.responses import json_bytes
from policies.authz import Role
from policies.evidence.proofs import FULL_VIEW, TENANT_VIEW, View
from tenancy.schemas import Page, ProofCreated, ProofIssue, ProofView
from tenancy.store.uow import Principal, UnitOfWork
from tenancy.usecases import proofs

router = authorized_router(tags=["proofs"])

# Roles that may see who else shares a segment; any other role (fail closed) sees tenant views.
FULL_VIEW_ROLES = frozenset({Role.OPERATOR.value, Role.AUDITOR.value})


def view_for(principal: Principal) -> View:
    """The proof view `principal` is issued and may read: full for operators and auditors."""
    return FULL_VIEW if principal.role in FULL_VIEW_ROLES else TENANT_VIEW


def _readable(principal: Principal) -> View | None:
    """The only view `principal` may read, or None when it may read every view."""
    view = view_for(principal)
    return None if view == FULL_VIEW else view


@router.post(
    "/v1/tenants/{tenant}/isolation-proofs",
    status_code=status.HTTP_201_CREATED,
    response_model=ProofCreated,
)
async def issue_proof(
    tenant: TenantPath,
    heavy: HeavyWork,  # verifies the whole fabric; auditors may issue too
    spec: ProofIssue,
    uow: Uow,
    principal: CurrentPrincipal,
) -> Response:
    """Sign a proof (DSSE over an in-toto Statement) that the tenant is isolated on the fabric.

    A tenant's admin gets the tenant view (the predicate's ``view``: other members counted, not
    named). 409 isolation-violation when the fabric does not verify. Recorded in the audit log.
    """
    # Loading, verifying and rendering a whole fabric runs in a heavy worker process (api/
    # heavy_processes.py): in a thread here it would hold this process's GIL for seconds.
    answer = await heavy.run(uow, proof_answer, tenant, spec.fabric, view_for(principal))
    return Response(answer, status_code=status.HTTP_201_CREATED, media_type="application/json")


def proof_answer(uow: UnitOfWork, tenant: str, fabric: str, view: View) -> bytes:
    """The JSON answer to a proof issued in `view` (run in a heavy worker; errors raise)."""
    return json_bytes(proofs.issue(uow, tenant_name=tenant, fabric_name=fabric, view=view))


@router.get("/v1/proofs")
def list_proofs(
    uow: Uow,
    listing: Listing,
    principal: CurrentPrincipal,
    tenant: Annotated[
        str | None,
        Query(
            max_length=63,
            description="Only proofs about this tenant (its name); a tenant principal always "
            "gets its own tenant's, and an empty page for another",
        ),
    ] = None,
    fabric: Annotated[
        str | None, Query(max_length=63, description="Only proofs about this fabric (its name)")
    ] = None,
    since: Annotated[
        datetime | None,
        Query(
            description="Only proofs issued at or after this instant, RFC 3339 (e.g. "
            "2026-03-01T00:00:00Z)"
        ),
    ] = None,
) -> Page[ProofView]:
    """Stored proofs, oldest id first; a tenant principal sees its own tenant's tenant views."""
    if principal.tenant is not None:
        if tenant not in (None, principal.tenant):
            return Page(data=[], count=0, next=None)
        tenant = principal.tenant
    return proofs.list_proofs(
        uow,
        tenant=tenant,
        fabric=fabric,
        since=since,
        limit=listing.limit,
        cursor=listing.cursor,
        view=_readable(principal),
    )


@router.get("/v1/proofs/{proof_id}")
def get_proof(proof_id: ProofIdPath, uow: Uow, principal: CurrentPrincipal) -> ProofView:
    """One stored proof; another tenant's proof, or a full one asked by a tenant, is a 404."""
    view = _readable(principal)
    return proofs.get_proof(uow, proof_id=proof_id, tenant=principal.tenant, view=view)
