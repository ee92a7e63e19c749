"""SQLModel tables: the system of record.

GUIDs are stored as lower-case ``0x`` hex strings because 64-bit GUIDs do not fit a signed BIGINT
on every database.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import Column, DateTime, Dialect, Index, TypeDecorator, UniqueConstraint, text
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    """The current time, UTC-aware: the default of the ``created_at`` columns."""
    return datetime.now(UTC)


class HasId(Protocol):
    """A row with an integer primary key, which is None until the row is flushed."""

    id: int | None


def pk(row: HasId) -> int:
    """The primary key of a row that has been flushed (SQLModel types ids as optional)."""
    if row.id is None:
        raise RuntimeError(f"{type(row).__name__} has not been flushed yet")
    return row.id


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend.

    SQLite has no time zone type: it stores the wall-clock text and returns naive datetimes, so
    values are normalised to UTC on the way in and tagged as UTC on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Convert an aware datetime to UTC before it is stored.

        Raises:
            ValueError: `value` is naive, so its time zone would be a guess.
        """
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous; use UTC-aware ones")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return a stored value as an aware UTC datetime; SQLite's naive ones are tagged UTC."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _ts(nullable: bool = False) -> Column[datetime]:
    return Column(UtcDateTime(), nullable=nullable)


class Fabric(SQLModel, table=True):
    """A managed fabric, InfiniBand or RoCE (`kind`); its name is unique.

    The P_Key range and the per-port P_Key budget are fixed at creation and apply to InfiniBand
    only: RoCE fabrics store zeros here and keep their pools in `RoceFabricSettings`.
    """

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True, max_length=63)
    kind: str = Field(max_length=16)
    # InfiniBand only (0 on RoCE fabrics, whose pools live in roce_fabric_settings).
    pkey_first: int
    pkey_last: int
    pkeys_per_port: int = 128
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class Switch(SQLModel, table=True):
    """An InfiniBand switch as the last topology import reported it; GUIDs are unique per fabric.

    A switch an import no longer lists is kept, `absent`, until one lists it again.
    """

    __table_args__ = (UniqueConstraint("fabric_id", "guid"),)
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    guid: str = Field(max_length=18)
    name: str = Field(max_length=64)
    ports: int
    absent: bool = False


class Node(SQLModel, table=True):
    """A host on a fabric, unique by name per fabric.

    `role` decides who may hold it: tenants get compute nodes only, services compute or storage
    nodes, and management nodes belong to no one. `state` (free, allocated, absent, draining)
    changes only by the table of `policies.node_state`; it is ``allocated`` exactly while a
    `NodeAssignment` holds the node. Topology imports create nodes and never delete one: a node
    an import no longer lists keeps its record and role and turns ``absent``.
    """

    __table_args__ = (UniqueConstraint("fabric_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    name: str = Field(max_length=63)
    role: str = Field(default="compute", max_length=16)
    state: str = Field(default="free", max_length=16)


class Port(SQLModel, table=True):
    """An InfiniBand HCA port, unique by GUID per fabric.

    The ``switch_*`` columns say where ibnetdiscover saw it cabled; they are null when it did not
    report a peer.
    """

    __table_args__ = (UniqueConstraint("fabric_id", "guid"),)
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    node_id: int = Field(foreign_key="node.id", index=True)
    guid: str = Field(max_length=18)
    hca: str = Field(max_length=32)
    port_num: int
    switch_guid: str | None = Field(default=None, max_length=18)
    switch_name: str | None = Field(default=None, max_length=64)
    switch_port: int | None = None


class QosClass(SQLModel, table=True):
    """A named service class every tenant is placed in; names are unique.

    The ``ib_*`` and ``vlarb_weight`` columns shape InfiniBand traffic (SL, rate, MTU, VL
    arbitration); the ``roce_*``, ``lossless``, ``ets_*`` and ``ecn_*`` columns RoCE traffic
    (DSCP, traffic class, PFC, ETS and ECN).
    """

    __tablename__ = "qos_class"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, max_length=63)
    ib_sl: int
    ib_rate: int
    ib_mtu: int
    vlarb_weight: int
    roce_dscp: int = 0
    roce_tc: int = 0
    lossless: bool = False
    ets_weight: int = 10
    ecn_min_bytes: int = 153_600
    ecn_max_bytes: int = 1_536_000
    ecn_probability: int = 5


class RoceFabricSettings(SQLModel, table=True):
    """Pools and limits of a RoCE fabric (one row per RoCE fabric)."""

    __tablename__ = "roce_fabric_settings"
    fabric_id: int = Field(foreign_key="fabric.id", primary_key=True)
    vlan_first: int
    vlan_last: int
    l2vni_first: int
    l2vni_last: int
    l3vni_first: int
    l3vni_last: int
    tenant_prefix_pool: str = Field(max_length=18)
    tenant_prefix_length: int
    rt_asn: int
    host_mtu: int
    underlay_mtu: int
    anycast_gateway_mac: str = Field(max_length=17)
    max_lossless_priorities: int


class RoceSwitch(SQLModel, table=True):
    """A RoCE leaf or spine switch from the inventory document, unique by name per fabric.

    Only leaves have a VTEP address; hosts attach to leaves. A switch an import no longer lists is
    kept, `absent`, until one lists it again.
    """

    __tablename__ = "roce_switch"
    __table_args__ = (UniqueConstraint("fabric_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    name: str = Field(max_length=63)
    role: str = Field(max_length=8)
    asn: int
    loopback: str = Field(max_length=15)
    vtep: str | None = Field(default=None, max_length=15)
    platform: str = Field(default="sonic", max_length=16)
    absent: bool = False


class RoceSwitchPort(SQLModel, table=True):
    """A front-panel port of a RoCE switch (``Ethernet0``), unique by name per switch."""

    __tablename__ = "roce_switch_port"
    __table_args__ = (UniqueConstraint("switch_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    switch_id: int = Field(foreign_key="roce_switch.id", index=True)
    name: str = Field(max_length=32)
    lanes: str = Field(max_length=64)
    speed: int
    cable_length: str = Field(default="5m", max_length=8)


class RoceLink(SQLModel, table=True):
    """A cable between two RoCE switch ports; each import replaces the fabric's links.

    The unique port columns keep a port from being the same end of two links; the inventory
    check refuses any port cabled twice.
    """

    __tablename__ = "roce_link"
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    a_port_id: int = Field(foreign_key="roce_switch_port.id", unique=True)
    b_port_id: int = Field(foreign_key="roce_switch_port.id", unique=True)


class Nic(SQLModel, table=True):
    """A host NIC on a leaf port; the unique port id keeps a switch port to one NIC."""

    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    node_id: int = Field(foreign_key="node.id", index=True)
    name: str = Field(max_length=32)
    switch_port_id: int = Field(foreign_key="roce_switch_port.id", unique=True)


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
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())
    billing_account: str = Field(default="", max_length=64)
    offboarded_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))


class Service(SQLModel, table=True):
    """An operator-owned shared service (e.g. storage), unique by name per fabric.

    It holds its nodes through `NodeAssignment` and has its own segment; tenants reach it only
    through a `Grant`.
    """

    __table_args__ = (UniqueConstraint("fabric_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    name: str = Field(max_length=63)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class Segment(SQLModel, table=True):
    """A claimed identifier (a P_Key): active for its owner, then quarantined until reuse.

    The unique (fabric, kind, value) constraint is the backstop that makes allocation race-free
    across processes; the partial index keeps one active partition per tenant per fabric.
    """

    __table_args__ = (
        UniqueConstraint("fabric_id", "kind", "value"),
        Index(
            "uq_segment_active_tenant",
            "fabric_id",
            "tenant_id",
            "purpose",
            unique=True,
            sqlite_where=text("state = 'active' AND tenant_id IS NOT NULL"),
            postgresql_where=text("state = 'active' AND tenant_id IS NOT NULL"),
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    kind: str = Field(default="pkey", max_length=16)  # the pool: pkey, vlan, vni, subnet, rd
    value: int
    purpose: str = Field(default="pkey", max_length=16)  # pkey, vlan, l3vni_vlan, l2vni, l3vni...
    state: str = Field(default="active", max_length=16)
    tenant_id: int | None = Field(default=None, foreign_key="tenant.id", index=True)
    service_id: int | None = Field(default=None, foreign_key="service.id", index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())
    released_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))


class Allocation(SQLModel, table=True):
    """Nodes given exclusively to a tenant on one fabric (its nodes are `NodeAssignment` rows).

    The id is a UUID. Releasing sets `released_at` and frees the nodes; the row stays for history.
    """

    id: str = Field(primary_key=True, max_length=36)
    tenant_id: int = Field(foreign_key="tenant.id", index=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())
    released_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))


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
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())
    revoked_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))


class AuditEntry(SQLModel, table=True):
    """One mutation, appended in the same transaction as the change.

    The entries, in `index` order from 0, are the leaves of the RFC 9162 Merkle tree (leaf = hash
    of the entry's RFC 8785 canonical JSON); the service never updates or deletes one.
    """

    __tablename__ = "audit_entry"
    index: int = Field(primary_key=True)
    time: datetime = Field(sa_column=_ts())
    principal: str = Field(max_length=128)
    role: str = Field(max_length=32)
    action: str = Field(max_length=64)
    target: str = Field(max_length=512)
    request_id: str | None = Field(default=None, max_length=64)
    fabric: str | None = Field(default=None, max_length=63, index=True)
    digest_before: str | None = Field(default=None, max_length=71)
    digest_after: str | None = Field(default=None, max_length=71)
    leaf_hash: str = Field(max_length=64)


class AuditCheckpoint(SQLModel, table=True):
    """A signed tree head (C2SP signed note) over the first `size` entries."""

    __tablename__ = "audit_checkpoint"
    size: int = Field(primary_key=True)
    root_hash: str = Field(max_length=44)
    note: str
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class SigningKey(SQLModel, table=True):
    """The public halves of the service's Ed25519 keys; one is active, retired ones published.

    The private half is never stored here (it is in the key file, tenancy/key_store.py): whoever
    can change rows must not be able to sign.
    """

    __tablename__ = "signing_key"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=128)
    public_pem: str
    status: str = Field(default="active", max_length=16)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class ApiToken(SQLModel, table=True):
    """An API token: only the SHA-256 of its secret is stored; the secret is shown once.

    `parent_id` is the token that minted it (null for the admin token, open mode and the CLI):
    a child expires no later than its parent and is revoked with it.
    """

    __tablename__ = "api_token"
    id: str = Field(primary_key=True, max_length=36)
    name: str = Field(max_length=63)
    role: str = Field(max_length=32)
    tenant: str | None = Field(default=None, max_length=63, index=True)
    secret_sha256: str = Field(max_length=64, unique=True, index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())
    expires_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    revoked_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    parent_id: str | None = Field(
        default=None, foreign_key="api_token.id", index=True, max_length=36
    )


class Proof(SQLModel, table=True):
    """A signed isolation proof: a DSSE envelope over an in-toto Statement (issue 5).

    `view` is whom it was issued for: ``full`` (operators, auditors) or ``tenant`` (other tenants
    counted, not named); a tenant's roles read only ``tenant`` ones (issue 10, item 6).
    """

    __tablename__ = "proof"
    id: str = Field(primary_key=True, max_length=36)
    tenant: str = Field(max_length=63, index=True)
    fabric: str = Field(max_length=63, index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())
    envelope: str
    view: str = Field(default="full", max_length=8)


class UsageInterval(SQLModel, table=True):
    """What a tenant held and when (issue 6), the input of usage metering.

    One row per node of an allocation (with its port count) or per grant, opened and closed in the
    same transaction as the change.

    Names (QoS class, billing account, resource) are copied at opening time, so metering needs no
    joins and later renames cannot rewrite history; ``ended_at`` is null while it is held.
    """

    __tablename__ = "usage_interval"
    id: int | None = Field(default=None, primary_key=True)
    tenant_id: int = Field(foreign_key="tenant.id", index=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    billing_account: str = Field(max_length=64)
    qos_class: str = Field(max_length=63)
    resource_type: str = Field(max_length=16)  # node, service
    resource: str = Field(max_length=63)
    ports: int = 0
    allocation_id: str | None = Field(default=None, foreign_key="allocation.id", index=True)
    grant_id: str | None = Field(default=None, foreign_key="grant.id", index=True)
    started_at: datetime = Field(sa_column=_ts())
    ended_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
