"""Who holds what: tenants, shared services, segments, allocations, node assignments and grants."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from tenancy.models.columns import ts_column, utcnow


class Tenant(SQLModel, table=True):
    """A customer of the fabrics; its name is unique forever.

    `status` is ``active`` until offboarding sets it to ``offboarded``; the row is never deleted,
    so audit and billing history keep their names. An empty `billing_account` bills to the name.
    """

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True, max_length=63)
    kind: str = Field(max_length=16)
    status: str = Field(default="active", max_length=16)
    qos_class_id: int = Field(foreign_key="qos_class.id")
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    billing_account: str = Field(default="", max_length=64)
    offboarded_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    # The tenant's own node quota across all fabrics; None: its kind's quota applies.
    max_nodes: int | None = None


class Service(SQLModel, table=True):
    """An operator-owned shared service (e.g. storage), unique by name per fabric.

    It holds its nodes through `NodeAssignment` and has its own segment; tenants reach it only
    through a `Grant`.
    """

    __table_args__ = (UniqueConstraint("fabric_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    name: str = Field(max_length=63)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


# The active values a tenant holds once per fabric: all but its additional partitions' P_Keys.
_ONE_PER_PURPOSE = "state = 'active' AND tenant_id IS NOT NULL AND purpose <> 'partition'"


class Segment(SQLModel, table=True):
    """A claimed identifier (a P_Key): active for its owner, then quarantined until reuse.

    The owner is a tenant, a service or (a P_Key on InfiniBand) a peering of two tenants.
    A quarantined value is kept from other owners until every deploy target has read back the
    snapshot that released it, `drain_snapshot_id` (tenancy/record/quarantine.py).

    The unique (fabric, kind, value) constraint is the backstop that makes allocation race-free
    across processes; the partial index keeps one active value per purpose per tenant per
    fabric, apart from a tenant's additional partitions (purpose ``partition``: several).
    """

    __table_args__ = (
        UniqueConstraint("fabric_id", "kind", "value"),
        Index(
            "uq_segment_active_tenant",
            "fabric_id",
            "tenant_id",
            "purpose",
            unique=True,
            sqlite_where=text(_ONE_PER_PURPOSE),
            postgresql_where=text(_ONE_PER_PURPOSE),
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    kind: str = Field(default="pkey", max_length=16)  # the pool: pkey, vlan, vni, subnet, rd
    value: int
    # pkey (a tenant's default partition, a service's), partition (a tenant's additional
    # partition), vlan, l3vni_vlan, l2vni, l3vni...
    purpose: str = Field(default="pkey", max_length=16)
    state: str = Field(default="active", max_length=16)
    tenant_id: int | None = Field(default=None, foreign_key="tenant.id", index=True)
    service_id: int | None = Field(default=None, foreign_key="service.id", index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    released_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    # An accepted InfiniBand peering's shared partition; tenant and service are null.
    peering_id: str | None = Field(
        default=None, foreign_key="peering.id", index=True, max_length=36
    )
    # The first committed snapshot holding it (0: taken before snapshots were counted) and
    # the one that released it; the commit gate stamps both. Null: not committed yet.
    snapshot_id: int | None = None
    drain_snapshot_id: int | None = None


class Allocation(SQLModel, table=True):
    """Nodes given exclusively to a tenant on one fabric (its nodes are `NodeAssignment` rows).

    The id is a UUID. Releasing sets `released_at` and frees the nodes; the row stays for history.
    """

    id: str = Field(primary_key=True, max_length=36)
    tenant_id: int = Field(foreign_key="tenant.id", index=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    released_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    # Who asked for it when not an operator's /v1 call: ``orchestrator`` (the UFM-compatible
    # API allocated a free node whose port a scheduler put in the tenant's partition).
    origin: str | None = Field(default=None, max_length=16)


class NodeAssignment(SQLModel, table=True):
    """Who holds a node right now. The primary key on node_id makes holding exclusive."""

    __tablename__ = "node_assignment"
    node_id: int = Field(foreign_key="node.id", primary_key=True)
    allocation_id: str | None = Field(default=None, foreign_key="allocation.id", index=True)
    service_id: int | None = Field(default=None, foreign_key="service.id", index=True)


class Grant(SQLModel, table=True):
    """A tenant's access to a shared service on the service's fabric.

    Revoking sets `revoked_at` and keeps the row; the partial unique index allows one unrevoked
    grant per tenant and service.
    """

    __table_args__ = (
        Index(
            "uq_grant_active",
            "tenant_id",
            "service_id",
            unique=True,
            sqlite_where=text("revoked_at IS NULL"),
            postgresql_where=text("revoked_at IS NULL"),
        ),
    )
    id: str = Field(primary_key=True, max_length=36)
    tenant_id: int = Field(foreign_key="tenant.id", index=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    service_id: int = Field(foreign_key="service.id", index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    revoked_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
