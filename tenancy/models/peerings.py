"""Consented peerings between two tenants on one fabric."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, text
from sqlmodel import Field, SQLModel

from tenancy.models.columns import ts_column


class Peering(SQLModel, table=True):
    """A request by tenant `requester_id` to reach tenant `peer_id` on one fabric, and its fate.

    `state` is ``requested`` until the peer accepts (``accepted``) or either side ends it
    (``ended``); the row stays for history, with who did what when (principal names). An accepted
    peering on InfiniBand holds a P_Key: a `Segment` row with this `peering_id`. The partial
    unique index allows one open (not ended) peering per fabric and ordered pair; the reverse
    pair is refused under the fabric's lock (tenancy/usecases/peerings.py).
    """

    __table_args__ = (
        Index(
            "uq_peering_open",
            "fabric_id",
            "requester_id",
            "peer_id",
            unique=True,
            sqlite_where=text("state != 'ended'"),
            postgresql_where=text("state != 'ended'"),
        ),
    )
    id: str = Field(primary_key=True, max_length=36)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    requester_id: int = Field(foreign_key="tenant.id", index=True)
    peer_id: int = Field(foreign_key="tenant.id", index=True)
    state: str = Field(default="requested", max_length=16)
    requested_at: datetime = Field(sa_column=ts_column())
    requested_by: str = Field(max_length=128)
    accepted_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    accepted_by: str | None = Field(default=None, max_length=128)
    ended_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    ended_by: str | None = Field(default=None, max_length=128)
