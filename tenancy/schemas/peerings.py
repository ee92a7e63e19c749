"""Consented peerings between two tenants on one fabric."""

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

    fabric: Slug = Field(description="The fabric the two tenants would peer on (its name)")
    peer: Slug = Field(description="The tenant to reach (its name), not the requester itself")


class PeeringView(BaseModel):
    """A peering between `requester` and `peer` on one fabric, and who did what when.

    `state` is ``requested`` until the peer's tenant-admin (or an operator) accepts it
    (``accepted``), or either side ends it (``ended``). Only an accepted peering that the policy
    allows connects the two tenants: on InfiniBand a shared partition (`segment`, held while
    accepted) in which both tenants' ports are full members; on RoCE route-target imports
    between the two VRFs (no segment of its own). `*_by` name the principals.
    """

    id: str = Field(description="The peering's id, a UUID")
    fabric: str = Field(description="The fabric's name")
    requester: str = Field(description="The tenant that asked")
    peer: str = Field(description="The tenant asked")
    state: PeeringStateName = Field(description="'requested', 'accepted' or 'ended'")
    segment: SegmentView | None = Field(
        default=None, description="InfiniBand: the peering's partition while it is accepted"
    )
    requested_at: datetime = Field(description="When it was requested, RFC 3339 UTC")
    requested_by: str = Field(
        description="Who requested it: the principal ('token:<name>:<id>', 'admin-token', ...)"
    )
    accepted_at: datetime | None = Field(
        default=None, description="When the peer accepted it, RFC 3339 UTC; null if not accepted"
    )
    accepted_by: str | None = Field(
        default=None, description="Who accepted it (a principal); null if not accepted"
    )
    ended_at: datetime | None = Field(
        default=None, description="When either side ended it, RFC 3339 UTC; null while open"
    )
    ended_by: str | None = Field(
        default=None, description="Who ended it (a principal); null while open"
    )
