"""Routes under /v1/tenants and /v1/qos-classes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from api.deps import Listing, Uow
from tenancy import allocations, services, tenants
from tenancy.schemas import (
    AllocationCreate,
    AllocationView,
    GrantCreate,
    GrantView,
    Page,
    QosClassCreate,
    QosClassView,
    TenantCreate,
    TenantView,
)

router = APIRouter(prefix="/v1", tags=["tenants"])


@router.get("/qos-classes", tags=["qos"])
def list_qos_classes(uow: Uow, listing: Listing) -> Page[QosClassView]:
    """QoS classes (seeded: gold, silver, bronze)."""
    return tenants.list_qos_classes(uow, listing.limit, listing.cursor)


@router.post("/qos-classes", status_code=status.HTTP_201_CREATED, tags=["qos"])
def create_qos_class(spec: QosClassCreate, uow: Uow) -> QosClassView:
    """Define a QoS class: InfiniBand SL, IPoIB rate and MTU codes, VL arbitration weight."""
    return tenants.create_qos_class(uow, spec)


@router.post("/tenants", status_code=status.HTTP_201_CREATED)
def create_tenant(spec: TenantCreate, uow: Uow) -> TenantView:
    """Onboard a tenant (internal or external) with its QoS class."""
    return tenants.create_tenant(uow, spec)


@router.get("/tenants")
def list_tenants(
    uow: Uow,
    listing: Listing,
    status_: Annotated[str | None, Query(alias="status", pattern="^(active|offboarded)$")] = None,
    kind: Annotated[str | None, Query(pattern="^(internal|external)$")] = None,
) -> Page[TenantView]:
    """Tenants by name, optionally filtered by status or kind."""
    return tenants.list_tenants(uow, listing.limit, listing.cursor, status_, kind)


@router.get("/tenants/{tenant}")
def get_tenant(tenant: str, uow: Uow) -> TenantView:
    """One tenant."""
    return tenants.get_tenant(uow, tenant)


@router.delete("/tenants/{tenant}")
def offboard_tenant(tenant: str, uow: Uow) -> TenantView:
    """Offboard: release all nodes, grants and partitions; the record stays as `offboarded`."""
    return tenants.offboard_tenant(uow, tenant)


@router.post("/tenants/{tenant}/allocations", status_code=status.HTTP_201_CREATED)
def allocate(tenant: str, spec: AllocationCreate, uow: Uow) -> AllocationView:
    """Allocate named nodes, or `count` free compute nodes, exclusively to the tenant."""
    return allocations.allocate(uow, tenant, spec)


@router.get("/tenants/{tenant}/allocations")
def list_allocations(
    tenant: str,
    uow: Uow,
    listing: Listing,
    fabric: Annotated[str | None, Query(max_length=63)] = None,
) -> Page[AllocationView]:
    """The tenant's current allocations."""
    return allocations.list_allocations(uow, tenant, listing.limit, listing.cursor, fabric)


@router.get("/tenants/{tenant}/allocations/{allocation_id}")
def get_allocation(tenant: str, allocation_id: str, uow: Uow) -> AllocationView:
    """One allocation."""
    return allocations.get_allocation(uow, tenant, allocation_id)


@router.delete(
    "/tenants/{tenant}/allocations/{allocation_id}", status_code=status.HTTP_204_NO_CONTENT
)
def release_allocation(tenant: str, allocation_id: str, uow: Uow) -> Response:
    """Release an allocation's nodes (the partition goes with the tenant's last allocation)."""
    allocations.release_allocation(uow, tenant, allocation_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/tenants/{tenant}/grants", status_code=status.HTTP_201_CREATED)
def grant(tenant: str, spec: GrantCreate, uow: Uow) -> GrantView:
    """Grant the tenant access to a shared service (limited membership in its partition)."""
    return services.grant_service(uow, tenant, spec)


@router.get("/tenants/{tenant}/grants")
def list_grants(tenant: str, uow: Uow, listing: Listing) -> Page[GrantView]:
    """The tenant's active grants."""
    return services.list_grants(uow, tenant, listing.limit, listing.cursor)


@router.get("/tenants/{tenant}/grants/{grant_id}")
def get_grant(tenant: str, grant_id: str, uow: Uow) -> GrantView:
    """One grant."""
    return services.get_grant(uow, tenant, grant_id)


@router.delete("/tenants/{tenant}/grants/{grant_id}", status_code=status.HTTP_204_NO_CONTENT)
def revoke_grant(tenant: str, grant_id: str, uow: Uow) -> Response:
    """Revoke a grant."""
    services.revoke_grant(uow, tenant, grant_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
