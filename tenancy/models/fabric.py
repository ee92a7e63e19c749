"""Fabrics as the last topology import left them: InfiniBand switches, nodes, ports; QoS classes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from tenancy.models.columns import ts_column, utcnow


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
    # InfiniBand: the virtual GUID setting as JSON ({"enabled", "ranges", "sm"}); None: off.
    virtual_guids: str | None = Field(default=None, max_length=4096)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


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

    __table_args__ = (
        UniqueConstraint("fabric_id", "name"),
        # Picking free compute nodes in name order, and finding draining ones, without a scan.
        Index("ix_node_fabric_state_role_name", "fabric_id", "state", "role", "name"),
    )
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    name: str = Field(max_length=63)
    role: str = Field(default="compute", max_length=16)
    state: str = Field(default="free", max_length=16)
    # While draining: the snapshot (history row id) that removed the previous owner's segment;
    # the node is free again once every deploy target applied that snapshot or a later one.
    drain_snapshot_id: int | None = None


class Port(SQLModel, table=True):
    """An InfiniBand HCA port, unique by GUID per fabric.

    The ``switch_*`` columns say where ibnetdiscover saw it cabled; they are null when it did not
    report a peer.
    """

    __table_args__ = (
        UniqueConstraint("fabric_id", "guid"),
        # The ports on a leaf: a change under a dedicated-leaf policy reads them.
        Index("ix_port_fabric_switch_name", "fabric_id", "switch_name"),
    )
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
