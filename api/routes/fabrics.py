"""Routes under /v1/fabrics: register, list and read fabrics."""

from __future__ import annotations

from fastapi import status

from api.deps import Listing, Uow, authorized_router
from api.params import FabricPath
from tenancy.schemas import AnyFabricCreate, FabricPatch, FabricView, Page, VirtualGuidView
from tenancy.usecases import fabrics, virtual_guids

router = authorized_router(prefix="/v1/fabrics", tags=["fabrics"])


@router.post("", status_code=status.HTTP_201_CREATED)
def create_fabric(spec: AnyFabricCreate, uow: Uow) -> FabricView:
    """Register an InfiniBand fabric (P_Key range) or a RoCE fabric (VLAN/VNI/prefix pools)."""
    return fabrics.create_fabric(uow, spec=spec)


@router.get("")
def list_fabrics(uow: Uow, listing: Listing) -> Page[FabricView]:
    """List fabrics by name."""
    return fabrics.list_fabrics(uow, limit=listing.limit, cursor=listing.cursor)


@router.get("/{fabric}")
def get_fabric(fabric: FabricPath, uow: Uow) -> FabricView:
    """One fabric."""
    return fabrics.get_fabric(uow, name=fabric)


@router.patch("/{fabric}")
def update_fabric(fabric: FabricPath, patch: FabricPatch, uow: Uow) -> FabricView:
    """Change an InfiniBand fabric's virtual GUID setting (verified before commit).

    Refused (409) while the ledger holds a virtual GUID the new setting would not admit.
    """
    return virtual_guids.update_fabric(uow, name=fabric, patch=patch)


@router.get("/{fabric}/virtual-guids")
def list_virtual_guids(fabric: FabricPath, uow: Uow, listing: Listing) -> Page[VirtualGuidView]:
    """The virtual GUID ledger: each GUID's tenant, its partitions and whether it is draining."""
    return virtual_guids.list_virtual_guids(
        uow, fabric=fabric, limit=listing.limit, cursor=listing.cursor
    )
