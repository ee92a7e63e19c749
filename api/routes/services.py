"""Routes under /v1/fabrics/{fabric}/services: operator-owned shared services (e.g. storage)."""

from __future__ import annotations

from fastapi import status

from api.deps import Listing, Uow, authorized_router
from api.params import FabricPath, ServicePath
from tenancy.schemas import Page, ServiceCreate, ServiceView
from tenancy.usecases import shared_services

router = authorized_router(prefix="/v1/fabrics", tags=["fabrics"])


@router.post("/{fabric}/services", status_code=status.HTTP_201_CREATED)
def create_service(fabric: FabricPath, spec: ServiceCreate, uow: Uow) -> ServiceView:
    """Create an operator-owned shared service (e.g. storage) with its own segment.

    The segment is a partition on InfiniBand, a VRF with its VLAN and VNIs on RoCE.
    """
    return shared_services.create_service(uow, fabric_name=fabric, spec=spec)


@router.get("/{fabric}/services")
def list_services(fabric: FabricPath, uow: Uow, listing: Listing) -> Page[ServiceView]:
    """Shared services of the fabric."""
    return shared_services.list_services(
        uow, fabric_name=fabric, limit=listing.limit, cursor=listing.cursor
    )


@router.get("/{fabric}/services/{service}")
def get_service(fabric: FabricPath, service: ServicePath, uow: Uow) -> ServiceView:
    """One shared service."""
    return shared_services.get_service(uow, fabric_name=fabric, name=service)
