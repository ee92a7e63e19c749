"""RoCE fabrics: settings, leaves and spines, their ports and links, and host NICs."""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, UniqueConstraint
from sqlmodel import Field, SQLModel

# A 4-byte ASN (RFC 6793) is above PostgreSQL's INTEGER; SQLite's INTEGER already holds 64 bits,
# and declaring it there as before spares a table copy that its foreign keys would refuse.
ASN_TYPE = BigInteger().with_variant(Integer(), "sqlite")


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
    asn: int = Field(sa_type=ASN_TYPE)
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
