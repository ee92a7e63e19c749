"""Routes under /v1/tenants/{tenant}/allocations: nodes held exclusively by a tenant."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response, status

from api.deps import Listing, Uow, authorized_router
from api.params import AllocationIdPath, TenantPath
from tenancy.schemas import AllocationCreate, AllocationView, Page
from tenancy.store.history import AllocationState
from tenancy.usecases import allocations

STATE_HELP = "active (not released, the default), released, or all"

router = authorized_router(prefix="/v1/tenants", tags=["tenants"])


@router.post("/{tenant}/allocations", status_code=status.HTTP_201_CREATED)
def allocate(tenant: TenantPath, spec: AllocationCreate, uow: Uow) -> AllocationView:
    """Allocate named nodes, or `count` free compute nodes, exclusively to the tenant."""
    return allocations.allocate(uow, tenant_name=tenant, spec=spec)


@router.get("/{tenant}/allocations")
def list_allocations(
    tenant: TenantPath,
    uow: Uow,
    listing: Listing,
    fabric: Annotated[
        str | None,
        Query(max_length=63, description="Only allocations on this fabric (its name)"),
    ] = None,
    state: Annotated[AllocationState, Query(description=STATE_HELP)] = "active",
) -> Page[AllocationView]:
    """The tenant's allocations: current ones unless `state` asks for released ones or all."""
    return allocations.list_allocations(
        uow,
        tenant_name=tenant,
        limit=listing.limit,
        cursor=listing.cursor,
        fabric=fabric,
        state=state,
    )


@router.get("/{tenant}/allocations/{allocation_id}")
def get_allocation(
    tenant: TenantPath,
    allocation_id: AllocationIdPath,
    uow: Uow,
    state: Annotated[AllocationState, Query(description=STATE_HELP)] = "active",
) -> AllocationView:
    """One allocation; a released one only with `?state=released` or `?state=all`."""
    return allocations.get_allocation(
        uow, tenant_name=tenant, allocation_id=allocation_id, state=state
    )


@router.delete("/{tenant}/allocations/{allocation_id}", status_code=status.HTTP_204_NO_CONTENT)
def release_allocation(tenant: TenantPath, allocation_id: AllocationIdPath, uow: Uow) -> Response:
    """Release an allocation's nodes.

    The tenant's segment (its P_Key, or its VRF with VLAN and VNIs) goes with its last
    allocation on the fabric.
    """
    allocations.release_allocation(uow, tenant_name=tenant, allocation_id=allocation_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
