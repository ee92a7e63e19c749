"""Routes under /v1/tenants/{tenant}/peerings and .../peering-requests: consented peerings.

Every route is under the acting tenant (the requester, the peer that accepts, or the side that
ends a peering), so tenant-scoped authorization and 404-for-others apply as to any tenant route.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response, status

from api.deps import Listing, Uow, authorized_router
from api.params import PeeringIdPath, TenantPath
from tenancy.schemas import Page
from tenancy.schemas.peerings import PeeringCreate, PeeringState, PeeringView
from tenancy.usecases import peerings

STATE_HELP = "open (requested or accepted, the default), requested, accepted, ended, or all"

router = authorized_router(prefix="/v1/tenants", tags=["tenants"])


@router.post("/{tenant}/peerings", status_code=status.HTTP_201_CREATED)
def request_peering(tenant: TenantPath, spec: PeeringCreate, uow: Uow) -> PeeringView:
    """Ask another tenant to peer on a fabric; it takes effect once the peer accepts it."""
    return peerings.request_peering(uow, tenant_name=tenant, spec=spec)


@router.get("/{tenant}/peerings")
def list_peerings(
    tenant: TenantPath,
    uow: Uow,
    listing: Listing,
    state: Annotated[PeeringState, Query(description=STATE_HELP)] = "open",
) -> Page[PeeringView]:
    """The tenant's peerings, requested by it or addressed to it."""
    return peerings.list_peerings(
        uow, tenant_name=tenant, limit=listing.limit, cursor=listing.cursor, state=state
    )


@router.delete("/{tenant}/peerings/{peering_id}", status_code=status.HTTP_204_NO_CONTENT)
def end_peering(tenant: TenantPath, peering_id: PeeringIdPath, uow: Uow) -> Response:
    """End a peering (either side): withdraw or decline a request, or disconnect the two."""
    peerings.end_peering(uow, tenant_name=tenant, peering_id=peering_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{tenant}/peering-requests")
def list_peering_requests(tenant: TenantPath, uow: Uow, listing: Listing) -> Page[PeeringView]:
    """Pending peering requests addressed to the tenant."""
    return peerings.list_peering_requests(
        uow, tenant_name=tenant, limit=listing.limit, cursor=listing.cursor
    )


@router.post("/{tenant}/peering-requests/{peering_id}/accept")
def accept_peering(tenant: TenantPath, peering_id: PeeringIdPath, uow: Uow) -> PeeringView:
    """Accept a pending request: the two tenants reach each other, verified before commit.

    On InfiniBand the peering takes a P_Key; a tenant-admin's acceptance is refused (409
    pool-share-exceeded) while either tenant holds its policy share of the fabric's P_Keys.
    """
    return peerings.accept_peering(uow, tenant_name=tenant, peering_id=peering_id)
