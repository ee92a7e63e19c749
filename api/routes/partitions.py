"""Routes under /v1/tenants/{tenant}/partitions: a tenant's InfiniBand partitions and members."""

from __future__ import annotations

from typing import Annotated

from fastapi import Body, Path, Query, Response, status
from pydantic import AfterValidator

from api.deps import CurrentPrincipal, Listing, Uow, authorized_router
from api.params import TenantPath
from policies.errors import NotFoundError
from tenancy.schemas import (
    HEX_GUID_PATTERN,
    SLUG_PATTERN,
    MemberAdd,
    MemberSpec,
    MembersPut,
    Page,
    PartitionCreate,
    PartitionView,
)
from tenancy.schemas.partitions import guid_text
from tenancy.store.uow import Principal
from tenancy.usecases import partitions

router = authorized_router(prefix="/v1/tenants", tags=["partitions"])

PartitionPath = Annotated[
    str,
    Path(
        pattern=SLUG_PATTERN,
        description="The partition's name: 'default' (the tenant's own) or one it created",
    ),
]
# Validated as a body's GUID is: written back as 0x and 16 lower-case digits, as stored.
GuidPath = Annotated[
    str,
    Path(
        pattern=HEX_GUID_PATTERN, description="A port GUID or virtual GUID, 0x and 1-16 hex digits"
    ),
    AfterValidator(guid_text),
]
FabricQuery = Annotated[
    str | None,
    Query(
        pattern=SLUG_PATTERN,
        description="The fabric; needed when the tenant has a partition of that name on several",
    ),
]


@router.post("/{tenant}/partitions", status_code=status.HTTP_201_CREATED)
def create_partition(tenant: TenantPath, spec: PartitionCreate, uow: Uow) -> PartitionView:
    """Create an additional InfiniBand partition; its P_Key comes from the fabric's pool.

    Within the policy's `max_partitions` (default partition included) and, for tenant roles,
    the pool share. RoCE fabrics answer 409: a tenant has one VRF there.
    """
    return partitions.create_partition(uow, tenant_name=tenant, spec=spec)


@router.get("/{tenant}/partitions")
def list_partitions(
    tenant: TenantPath,
    uow: Uow,
    listing: Listing,
    principal: CurrentPrincipal,
    fabric: FabricQuery = None,
) -> Page[PartitionView]:
    """The tenant's partitions with their members: on each fabric, `default` first, then by name."""
    return partitions.page_partitions(
        uow,
        tenant_name=tenant,
        fabric=own_fabric(principal, fabric),
        limit=listing.limit,
        cursor=listing.cursor,
    )


@router.get("/{tenant}/partitions/{name}")
def get_partition(
    tenant: TenantPath,
    name: PartitionPath,
    uow: Uow,
    principal: CurrentPrincipal,
    fabric: FabricQuery = None,
) -> PartitionView:
    """One partition with its members."""
    found = own_fabric(principal, fabric)
    return partitions.get_partition(uow, tenant_name=tenant, name=name, fabric=found)


@router.delete("/{tenant}/partitions/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_partition(
    tenant: TenantPath, name: PartitionPath, uow: Uow, fabric: FabricQuery = None
) -> Response:
    """Delete an additional partition: its members leave, its P_Key goes into quarantine."""
    partitions.delete_partition(uow, tenant_name=tenant, name=name, fabric=fabric)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put("/{tenant}/partitions/{name}/members")
def set_members(
    tenant: TenantPath, name: PartitionPath, body: MembersPut, uow: Uow, fabric: FabricQuery = None
) -> PartitionView:
    """Replace the partition's members with exactly this set (verified before commit)."""
    return partitions.set_members(
        uow, tenant_name=tenant, name=name, members=body.members, fabric=fabric
    )


@router.post("/{tenant}/partitions/{name}/members/{guid}")
def add_member(
    tenant: TenantPath,
    name: PartitionPath,
    guid: GuidPath,
    uow: Uow,
    body: Annotated[
        MemberAdd | None,
        Body(description="Optional: the membership ('full' unless it says 'limited')"),
    ] = None,
    fabric: FabricQuery = None,
) -> PartitionView:
    """Add a member (full unless the body says 'limited'), or change its membership."""
    member = MemberSpec.model_construct(guid=guid, membership=(body or MemberAdd()).membership)
    return partitions.add_member(uow, tenant_name=tenant, name=name, member=member, fabric=fabric)


@router.delete("/{tenant}/partitions/{name}/members/{guid}")
def remove_member(
    tenant: TenantPath, name: PartitionPath, guid: GuidPath, uow: Uow, fabric: FabricQuery = None
) -> PartitionView:
    """Remove a member; 404 when it is not one."""
    return partitions.remove_member(uow, tenant_name=tenant, name=name, guid=guid, fabric=fabric)


def own_fabric(principal: Principal, fabric: str | None) -> str | None:
    """The fabric a read is about: an orchestrator reads its own fabric's partitions only."""
    if principal.role != "orchestrator":
        return fabric
    if fabric is not None and fabric != principal.fabric:
        raise NotFoundError(f"fabric '{fabric}' does not exist", resource="fabric", name=fabric)
    return principal.fabric
