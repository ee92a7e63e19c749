"""Routes under /v1/tenants and /v1/qos-classes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from api.deps import CurrentPrincipal, Listing, Uow
from policies.authz import Role
from tenancy import allocations, shared_services, tenants, verification
from tenancy.schemas import (
    AllocationCreate,
    AllocationView,
    GrantCreate,
    GrantView,
    Page,
    QosClassCreate,
    QosClassView,
    TenantCreate,
    TenantReachabilityView,
    TenantSummary,
    TenantView,
)

router = APIRouter(prefix="/v1", tags=["tenants"])


@router.get("/qos-classes", tags=["qos"])
def list_qos_classes(uow: Uow, listing: Listing) -> Page[QosClassView]:
    """QoS classes (seeded: gold, silver, bronze)."""
    return tenants.list_qos_classes(uow, limit=listing.limit, cursor=listing.cursor)


@router.post("/qos-classes", status_code=status.HTTP_201_CREATED, tags=["qos"])
def create_qos_class(spec: QosClassCreate, uow: Uow) -> QosClassView:
    """Define a QoS class: InfiniBand SL, IPoIB rate and MTU codes, VL arbitration weight."""
    return tenants.create_qos_class(uow, spec=spec)


@router.post("/tenants", status_code=status.HTTP_201_CREATED)
def create_tenant(spec: TenantCreate, uow: Uow) -> TenantView:
    """Onboard a tenant (internal or external) with its QoS class."""
    return tenants.create_tenant(uow, spec=spec)


# The billing role gets a narrower shape than the declared one: serialize what the handler returns.
@router.get("/tenants", response_model=None, responses={200: {"model": Page[TenantView]}})
def list_tenants(
    uow: Uow,
    listing: Listing,
    principal: CurrentPrincipal,
    status_: Annotated[str | None, Query(alias="status", pattern="^(active|offboarded)$")] = None,
    kind: Annotated[str | None, Query(pattern="^(internal|external)$")] = None,
) -> Page[TenantView] | Page[TenantSummary]:
    """Tenants by name, optionally filtered by status or kind; a tenant role sees its own only,
    the billing role only names and billing accounts."""
    page = tenants.list_tenants(
        uow,
        limit=listing.limit,
        cursor=listing.cursor,
        status=status_,
        kind=kind,
        only=principal.tenant,
    )
    if principal.role == Role.BILLING:
        return Page(data=[_summary(t) for t in page.data], count=page.count, next=page.next)
    return page


def _summary(view: TenantView) -> TenantSummary:
    return TenantSummary(name=view.name, billing_account=view.billing_account)


@router.get("/tenants/{tenant}", response_model=None, responses={200: {"model": TenantView}})
def get_tenant(tenant: str, uow: Uow, principal: CurrentPrincipal) -> TenantView | TenantSummary:
    """One tenant (the billing role sees its name and billing account only)."""
    view = tenants.get_tenant(uow, name=tenant)
    return _summary(view) if principal.role == Role.BILLING else view


@router.get("/tenants/{tenant}/reachability")
def get_reachability(tenant: str, uow: Uow) -> TenantReachabilityView:
    """Per fabric where the tenant has segments: the reachability edges that involve it and
    whether the fabric's isolation verdict holds."""
    return verification.tenant_reachability(uow, tenant_name=tenant)


@router.delete("/tenants/{tenant}")
def offboard_tenant(tenant: str, uow: Uow) -> TenantView:
    """Offboard: release all nodes, grants and partitions; the record stays as `offboarded`."""
    return tenants.offboard_tenant(uow, name=tenant)


@router.post("/tenants/{tenant}/allocations", status_code=status.HTTP_201_CREATED)
def allocate(tenant: str, spec: AllocationCreate, uow: Uow) -> AllocationView:
    """Allocate named nodes, or `count` free compute nodes, exclusively to the tenant."""
    return allocations.allocate(uow, tenant_name=tenant, spec=spec)


@router.get("/tenants/{tenant}/allocations")
def list_allocations(
    tenant: str,
    uow: Uow,
    listing: Listing,
    fabric: Annotated[str | None, Query(max_length=63)] = None,
) -> Page[AllocationView]:
    """The tenant's current allocations."""
    return allocations.list_allocations(
        uow, tenant_name=tenant, limit=listing.limit, cursor=listing.cursor, fabric=fabric
    )


@router.get("/tenants/{tenant}/allocations/{allocation_id}")
def get_allocation(tenant: str, allocation_id: str, uow: Uow) -> AllocationView:
    """One allocation."""
    return allocations.get_allocation(uow, tenant_name=tenant, allocation_id=allocation_id)


@router.delete(
    "/tenants/{tenant}/allocations/{allocation_id}", status_code=status.HTTP_204_NO_CONTENT
)
def release_allocation(tenant: str, allocation_id: str, uow: Uow) -> Response:
    """Release an allocation's nodes (the partition goes with the tenant's last allocation)."""
    allocations.release_allocation(uow, tenant_name=tenant, allocation_id=allocation_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/tenants/{tenant}/grants", status_code=status.HTTP_201_CREATED)
def grant(tenant: str, spec: GrantCreate, uow: Uow) -> GrantView:
    """Grant the tenant access to a shared service (limited membership in its partition)."""
    return shared_services.grant_service(uow, tenant_name=tenant, spec=spec)


@router.get("/tenants/{tenant}/grants")
def list_grants(tenant: str, uow: Uow, listing: Listing) -> Page[GrantView]:
    """The tenant's active grants."""
    return shared_services.list_grants(
        uow, tenant_name=tenant, limit=listing.limit, cursor=listing.cursor
    )


@router.get("/tenants/{tenant}/grants/{grant_id}")
def get_grant(tenant: str, grant_id: str, uow: Uow) -> GrantView:
    """One grant."""
    return shared_services.get_grant(uow, tenant_name=tenant, grant_id=grant_id)


@router.delete("/tenants/{tenant}/grants/{grant_id}", status_code=status.HTTP_204_NO_CONTENT)
def revoke_grant(tenant: str, grant_id: str, uow: Uow) -> Response:
    """Revoke a grant."""
    shared_services.revoke_grant(uow, tenant_name=tenant, grant_id=grant_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
