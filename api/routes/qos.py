"""Routes under /v1/qos-classes: the QoS classes tenants are onboarded with."""

from __future__ import annotations

from fastapi import status

from api.deps import Listing, Uow, authorized_router
from tenancy.schemas import Page, QosClassCreate, QosClassView
from tenancy.usecases import tenants

# Tagged "tenants" as well as "qos": the OpenAPI document has always grouped them so.
router = authorized_router(prefix="/v1/qos-classes", tags=["tenants", "qos"])


@router.get("")
def list_qos_classes(uow: Uow, listing: Listing) -> Page[QosClassView]:
    """QoS classes (seeded: gold, silver, bronze)."""
    return tenants.list_qos_classes(uow, limit=listing.limit, cursor=listing.cursor)


@router.post("", status_code=status.HTTP_201_CREATED)
def create_qos_class(spec: QosClassCreate, uow: Uow) -> QosClassView:
    """Define a QoS class for both technologies.

    On InfiniBand: the SL, rate and MTU codes and VL arbitration weight; on RoCE: the DSCP,
    traffic class, lossless (PFC) or not, ETS weight and ECN thresholds.
    """
    return tenants.create_qos_class(uow, spec=spec)
