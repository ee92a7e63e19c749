"""Routes under /v1/tenants/{tenant}/grants: a tenant's access to shared services."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.deps import Listing, Uow
from tenancy import shared_services
from tenancy.schemas import GrantCreate, GrantView, Page

router = APIRouter(prefix="/v1/tenants", tags=["tenants"])


@router.post("/{tenant}/grants", status_code=status.HTTP_201_CREATED)
def grant(tenant: str, spec: GrantCreate, uow: Uow) -> GrantView:
    """Grant the tenant access to a shared service (limited membership in its partition)."""
    return shared_services.grant_service(uow, tenant_name=tenant, spec=spec)


@router.get("/{tenant}/grants")
def list_grants(tenant: str, uow: Uow, listing: Listing) -> Page[GrantView]:
    """The tenant's active grants."""
    return shared_services.list_grants(
        uow, tenant_name=tenant, limit=listing.limit, cursor=listing.cursor
    )


@router.get("/{tenant}/grants/{grant_id}")
def get_grant(tenant: str, grant_id: str, uow: Uow) -> GrantView:
    """One grant."""
    return shared_services.get_grant(uow, tenant_name=tenant, grant_id=grant_id)


@router.delete("/{tenant}/grants/{grant_id}", status_code=status.HTTP_204_NO_CONTENT)
def revoke_grant(tenant: str, grant_id: str, uow: Uow) -> Response:
    """Revoke a grant."""
    shared_services.revoke_grant(uow, tenant_name=tenant, grant_id=grant_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
