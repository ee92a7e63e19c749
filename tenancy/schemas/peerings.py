"""Consented peerings between two tenants on one fabric (issue 13, item 4)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from tenancy.schemas.common import Slug, Strict
from tenancy.schemas.tenants import SegmentView

PeeringStateName = Literal["requested", "accepted", "ended"]
# What a listing asks for: `open` is requested or accepted (not ended).
PeeringState = Literal["open", "requested", "accepted", "ended", "all"]


class PeeringCreate(Strict):
    """Body of a peering request: the fabric and the tenant the requester wants to reach.

    Neither tenant needs to hold nodes on the fabric (requiring it would tell a requester where
    another tenant runs): the peering applies to whatever both hold there, now or later.
    """

    fabric: Slug
    peer: Slug


class PeeringView(BaseModel):
    """A peering between `requester` and `peer` on one fabric, and who did what when.

    `state` is ``requested`` until the peer's tenant-admin (or an operator) accepts it
    (``accepted``), or either side ends it (``ended``). Only an accepted peering that the policy
    allows connects the two tenants: on InfiniBand a shared partition (`segment`, held while
    accepted) in which both tenants' ports are full members; on RoCE route-target imports
    between the two VRFs (no segment of its own). `*_by` name the principals.
    """

    id: str
    fabric: str
    requester: str
    peer: str
    state: PeeringStateName
    segment: SegmentView | None = Field(
        default=None, description="InfiniBand: the peering's partition while it is accepted"
    )
    requested_at: datetime
    requested_by: str
    accepted_at: datetime | None = None
    accepted_by: str | None = None
    ended_at: datetime | None = None
    ended_by: str | None = None
