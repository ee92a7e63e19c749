"""Routes under /v1/tenants/{tenant}/grants: a tenant's access to shared services."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response, status

from api.deps import Listing, Uow, authorized_router
from api.params import GrantIdPath, TenantPath
from tenancy.schemas import GrantCreate, GrantView, Page
from tenancy.store.history import GrantState
from tenancy.usecases import shared_services

STATE_HELP = "active (not revoked, the default), revoked, or all"

router = authorized_router(prefix="/v1/tenants", tags=["tenants"])


@router.post("/{tenant}/grants", status_code=status.HTTP_201_CREATED)
def grant(tenant: TenantPath, spec: GrantCreate, uow: Uow) -> GrantView:
    """Grant the tenant access to a shared service.

    On InfiniBand the tenant's ports become limited members of the service's partition; on RoCE
    the two VRFs import each other's route target (an explicit, audited route leak).
    """
    return shared_services.grant_service(uow, tenant_name=tenant, spec=spec)


@router.get("/{tenant}/grants")
def list_grants(
    tenant: TenantPath,
    uow: Uow,
    listing: Listing,
    state: Annotated[GrantState, Query(description=STATE_HELP)] = "active",
) -> Page[GrantView]:
    """The tenant's grants: active ones unless `state` asks for revoked ones or all."""
    return shared_services.list_grants(
        uow, tenant_name=tenant, limit=listing.limit, cursor=listing.cursor, state=state
    )


@router.get("/{tenant}/grants/{grant_id}")
def get_grant(
    tenant: TenantPath,
    grant_id: GrantIdPath,
    uow: Uow,
    state: Annotated[GrantState, Query(description=STATE_HELP)] = "active",
) -> GrantView:
    """One grant; a revoked one only with `?state=revoked` or `?state=all`."""
    return shared_services.get_grant(uow, tenant_name=tenant, grant_id=grant_id, state=state)


@router.delete("/{tenant}/grants/{grant_id}", status_code=status.HTTP_204_NO_CONTENT)
def revoke_grant(tenant: TenantPath, grant_id: GrantIdPath, uow: Uow) -> Response:
    """Revoke a grant."""
    shared_services.revoke_grant(uow, tenant_name=tenant, grant_id=grant_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
