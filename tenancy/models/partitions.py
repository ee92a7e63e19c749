"""A tenant's additional InfiniBand partitions, their members, and bound virtual GUIDs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from tenancy.models.columns import ts_column, utcnow

# The name of the partition every tenant holding nodes on an InfiniBand fabric has.
DEFAULT_PARTITION = "default"


class Partition(SQLModel, table=True):
    """A tenant's additional InfiniBand partition: its P_Key is the `segment` row it holds.

    A tenant holding nodes on a fabric also has its partition named ``default``, which is its
    P_Key segment of purpose ``pkey`` (no row here) with its nodes' ports as members. An
    additional partition lists its members explicitly (`PartitionMember`) and lives until it is
    deleted or the tenant is offboarded (tenancy/record/partitions.py). `qos_class_id` None:
    the tenant's class.
    """

    __table_args__ = (
        UniqueConstraint("fabric_id", "tenant_id", "name"),
        UniqueConstraint("segment_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    tenant_id: int = Field(foreign_key="tenant.id", index=True)
    name: str = Field(max_length=63)
    segment_id: int = Field(foreign_key="segment.id")
    ipoib: bool = True
    index0: bool = False
    qos_class_id: int | None = Field(default=None, foreign_key="qos_class.id")
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    # The name a UFM client gave it (`partition_name`): shown on the UFM-compatible API, a
    # label only (never parsed as a tenant); None: shown as UFM names it, api_pkey_0x<key>.
    label: str | None = Field(default=None, max_length=64)
    # ``orchestrator``: created through the UFM-compatible API (a scheduler's P_Key), which
    # `release_on_last_removal` deletes once emptied there; None: created through /v1.
    origin: str | None = Field(default=None, max_length=16)


class PartitionMember(SQLModel, table=True):
    """A port or a virtual GUID listed in a tenant's partition, full or limited."""

    __tablename__ = "partition_member"
    partition_id: int = Field(foreign_key="partition.id", primary_key=True)
    guid: str = Field(primary_key=True, max_length=18, index=True)
    full: bool = True


class VirtualGuid(SQLModel, table=True):
    """A virtual GUID of a fabric's ranges, bound to the tenant of the first partition it joined.

    ``bound`` while it is in a partition; ``draining`` once it left the last one, until every
    deploy target has read back `drain_snapshot_id` (the rule identifiers and nodes follow:
    tenancy/record/quarantine.py); then the row is deleted and the GUID is free.
    """

    __tablename__ = "virtual_guid"
    __table_args__ = (UniqueConstraint("fabric_id", "guid"),)
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    guid: str = Field(max_length=18)
    tenant_id: int = Field(foreign_key="tenant.id", index=True)
    state: str = Field(default="bound", max_length=16)
    bound_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    released_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    # The first committed snapshot holding it and the one without it (the commit gate stamps).
    snapshot_id: int | None = None
    drain_snapshot_id: int | None = None
    # While draining: the P_Key of the partition it left, which the fabric may still enforce
    # (the UFM-compatible API lists it there until the drain ends).
    pkey: int | None = None


class FacadeSession(SQLModel, table=True):
    """A session of the UFM-compatible API's ``/dologin`` (api/ufm/auth.py), stored hashed.

    The cookie's secret is never stored: `id` is its SHA-256, `credential_sha256` that of the
    token it signed in with, which authenticates again on every request (a revoked or expired
    token ends its sessions). Rows live in the database, so any replica honours a session.
    """

    __tablename__ = "facade_session"
    id: str = Field(primary_key=True, max_length=64)
    credential_sha256: str = Field(max_length=64)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    expires_at: datetime = Field(sa_column=ts_column())
