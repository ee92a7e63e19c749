"""Topology: ibnetdiscover and RoCE inventory imports, nodes, ports and NICs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
)
from typing_extensions import TypedDict

from tenancy.schemas.bounds import Asn, UnicastIpv4
from tenancy.schemas.common import (
    PORT_NAME_PATTERN,
    SWITCH_PORT_REF,
    NodeName,
    Strict,
    left_out,
)


class TopologyPortChange(TypedDict):
    """An HCA port the import added, or one it no longer saw.

    A port no longer seen is ``removed``, or ``kept`` (with `allocated` true) when its node is held
    by a tenant or a service, so that a holder never loses ports silently.
    """

    # A TypedDict, not a model: a first import reports every port (100k on the benchmark
    # fabric), and dicts validate and serialize about 7x faster than models (bench_import).
    guid: Annotated[str, Field(description="Port GUID, 0x-prefixed 16-digit lower-case hex")]
    node: Annotated[str, Field(description="The host's name")]
    hca: Annotated[str, Field(description="The HCA's name on the host, e.g. 'mlx5_0'")]
    port: Annotated[int, Field(description="The port's number on the HCA, from 1")]
    allocated: Annotated[bool, Field(description="Whether a tenant or a service holds the node")]
    action: Annotated[
        Literal["added", "removed", "kept"],
        Field(description="'added', 'removed', or 'kept' (no longer seen, but its node is held)"),
    ]


class NicChange(BaseModel):
    """A RoCE NIC the import added, or one the document no longer lists, and where it is cabled.

    A NIC no longer listed is ``removed``, or ``kept`` (with `allocated` true) when its node is
    held by a tenant or a service.
    """

    node: str = Field(description="The host's name")
    nic: str = Field(description="The NIC's name on the host, e.g. 'eth0'")
    switch: str | None = Field(default=None, description="The leaf it is cabled to; null if none")
    port: str | None = Field(
        default=None, description="The leaf port, e.g. 'Ethernet0'; null if none"
    )
    allocated: bool = Field(
        default=False, description="Whether a tenant or a service holds the node"
    )
    action: Literal["added", "removed", "kept"] = Field(
        default="added",
        description="'added', 'removed', or 'kept' (no longer seen, but its node is held)",
    )


class PortMove(BaseModel):
    """A known port the import found claiming another place: `port` moved `from` ... `to` ...

    InfiniBand: a port GUID now claimed by another host (``from``/``to`` are hostnames). RoCE: a
    switch port (``leaf01:Ethernet0``) now claimed by another host's NIC (``from``/``to`` are
    hostnames), or a host's NIC (``gpu0001/eth0``) re-cabled (``from``/``to`` are switch ports).
    """

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    port: str = Field(
        description="What moved: a port GUID (InfiniBand), a switch port 'leaf01:Ethernet0' or "
        "a host NIC 'gpu0001/eth0' (RoCE)"
    )
    source: str = Field(
        alias="from", description="Where it was: a host name, or a switch port for a NIC"
    )
    target: str = Field(alias="to", description="Where it is now, written like `from`")


class SwitchChange(BaseModel):
    """A switch the import no longer lists: it is kept, absent, until an import lists it again.

    `guid` identifies an InfiniBand switch; a RoCE switch is identified by its name (no GUID).
    """

    name: str = Field(description="The switch's name")
    guid: str | None = Field(
        default=None, description="InfiniBand: its node GUID (0x-prefixed hex); null on RoCE"
    )


class TopologyImportResult(BaseModel):
    """Counts after the import; `added` and `missing` list HCA ports (InfiniBand) or NICs (RoCE).

    `switches` counts the switches the import listed, `nodes` the nodes not absent (listed, or
    held and kept). `moved` lists known ports now claimed elsewhere (applied: their old and new
    hosts were free); `absent_nodes` and `absent_switches` name what the import does not list,
    kept and marked absent.
    """

    switches: int = Field(description="Switches the import listed")
    nodes: int = Field(description="Nodes not absent after the import (listed, or held and kept)")
    ports: int = Field(
        description="HCA ports (InfiniBand) or NICs (RoCE) the fabric has after the import"
    )
    added: list[TopologyPortChange] | list[NicChange] = Field(
        description="HCA ports (InfiniBand) or NICs (RoCE) the import added"
    )
    missing: list[TopologyPortChange] | list[NicChange] = Field(
        description="Ports or NICs the import no longer lists: removed, or kept for a holder"
    )
    moved: list[PortMove] = Field(
        default_factory=list, description="Known ports now claimed elsewhere (applied)"
    )
    absent_nodes: list[str] = Field(
        default_factory=list, description="Names of the nodes the import no longer lists"
    )
    absent_switches: list[SwitchChange] = Field(
        default_factory=list, description="Switches the import no longer lists, kept as absent"
    )


class PortView(BaseModel):
    """An HCA port of a node and the switch port it is cabled to (null if not reported)."""

    guid: str = Field(description="Port GUID, 0x-prefixed 16-digit lower-case hex")
    hca: str = Field(description="The HCA's name on the host, e.g. 'mlx5_0'")
    port: int = Field(description="The port's number on the HCA, from 1")
    switch: str | None = Field(description="Name of the switch it is cabled to; null if unknown")
    switch_port: int | None = Field(description="Port number on that switch; null if not reported")


class DrainView(BaseModel):
    """Why a draining node is not free yet (`policies.enforcement`)."""

    waiting_for: list[str] = Field(
        description="The deploy targets that do not enforce a snapshot without the node's "
        "previous owner yet, by name: on InfiniBand those that do not hold one, on RoCE the "
        "leaves whose read-back has not matched one"
    )
    untargeted: list[str] = Field(
        description="RoCE: the leaves the host is cabled to that have no deploy target. Nothing "
        "reads them back, so no report ends the drain: register their targets and run their "
        "agents, or force-drain the node (POST .../force-drain, with a reason). Empty on "
        "InfiniBand"
    )
    reason: str = Field(description="What the drain waits for, for people")


class NodeView(BaseModel):
    """A host: its HCA ports on InfiniBand, its NICs (and no ports) on RoCE.

    `state` is ``free``, ``allocated`` (held by a tenant or a service), ``absent`` (the last
    import did not list it; not allocatable) or ``draining`` (see `policies.node_state`).
    """

    name: str = Field(description="The host's name")
    role: str = Field(description="'compute', 'storage' or 'management'")
    state: str = Field(description="'free', 'allocated', 'absent' or 'draining'")
    tenant: str | None = Field(description="The tenant holding it; null if none")
    service: str | None = Field(
        default=None, description="The shared service holding it; null if none"
    )
    ports: list[PortView] = Field(description="Its HCA ports on InfiniBand; empty on RoCE")
    nics: list[NicView] | None = Field(
        default=None, exclude_if=left_out, description="RoCE: its NICs; left out on InfiniBand"
    )
    drain: DrainView | None = Field(
        default=None,
        exclude_if=left_out,
        description="While it is draining: what the drain waits for; left out in other states",
    )


class NodePatch(Strict):
    """Body that sets a node's role; a node allocated to a tenant must stay ``compute``."""

    role: Literal["compute", "storage", "management"] = Field(
        description="compute (allocatable to tenants), storage (for shared services) or "
        "management (e.g. the SM's host: never held)"
    )


class InventoryPort(Strict):
    """A switch port in a RoCE inventory: its name, SONiC lanes, speed and cable length."""

    name: str = Field(pattern=PORT_NAME_PATTERN, description="SONiC port name, e.g. 'Ethernet0'")
    # sonic-port YANG: lanes is text of 1..128 characters; the column holds 64, which 16 lanes of
    # three digits fit.
    lanes: str = Field(
        pattern=r"^[0-9]{1,4}(,[0-9]{1,4}){0,15}$",
        max_length=64,
        description="SerDes lanes as SONiC writes them: 1-16 numbers, comma-separated, e.g. "
        "'0,1,2,3'",
    )
    # sonic-port YANG: speed 1..1600000 Mb/s; 1000 (1G) is the slowest port a fabric uses.
    speed: StrictInt = Field(ge=1000, le=1_600_000, description="Mb/s, as SONiC writes it")
    cable_length: str = Field(
        default="5m",
        pattern=r"^[0-9]{1,4}m$",
        description="Cable length in metres as SONiC's CABLE_LENGTH writes it, e.g. '5m'",
    )


class InventorySwitch(Strict):
    """A SONiC switch in a RoCE inventory; a leaf needs a `vtep` address and a spine has none.

    Names, loopbacks and VTEP addresses must be unique across the document.
    """

    name: NodeName = Field(description="The switch's name (its host name), unique")
    role: Literal["leaf", "spine"] = Field(description="'leaf' (hosts attach here) or 'spine'")
    asn: Asn = Field(description="Its BGP ASN, 1-4294967294 (4-byte ASNs allowed)")
    loopback: UnicastIpv4 = Field(description="Its loopback (router id), routable unicast IPv4")
    vtep: UnicastIpv4 | None = Field(
        default=None,
        description="A leaf's VXLAN tunnel endpoint, routable unicast IPv4; null on a spine",
    )
    platform: Literal["sonic"] = Field(default="sonic", description="'sonic', the only one")
    ports: list[InventoryPort] = Field(
        default_factory=list, max_length=1024, description="Its ports (up to 1024)"
    )


class InventoryLink(Strict):
    """A cable between two switch ports (``switch:port``); no port may be cabled twice."""

    a: str = Field(
        pattern=SWITCH_PORT_REF,
        examples=["leaf01:Ethernet248"],
        description="One end, '<switch>:<port>'",
    )
    b: str = Field(
        pattern=SWITCH_PORT_REF,
        examples=["spine01:Ethernet0"],
        description="The other end, '<switch>:<port>'",
    )


class InventoryNic(Strict):
    """A host NIC and the leaf port it is cabled to; hosts attach to leaves, never spines."""

    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9._-]{0,31}$",
        description="The NIC's name on the host, e.g. 'eth0' (at most 32 characters)",
    )
    switch: NodeName = Field(description="The leaf it is cabled to (a switch of the document)")
    port: str = Field(pattern=PORT_NAME_PATTERN, description="The leaf port, e.g. 'Ethernet0'")


class InventoryNode(Strict):
    """A host in a RoCE inventory with its NICs, whose names are unique per host."""

    name: NodeName = Field(description="The host's name, unique in the document")
    nics: list[InventoryNic] = Field(
        min_length=1, max_length=64, description="Its NICs (1-64), names unique per host"
    )


class RoceInventory(Strict):
    """The topology document of a RoCE fabric (JSON or YAML): switches, links and hosts.

    It is checked as a whole before anything is written; NICs it no longer lists are removed
    unless their node is held.
    """

    switches: list[InventorySwitch] = Field(
        min_length=1, max_length=10_000, description="Leaves and spines (1-10,000)"
    )
    links: list[InventoryLink] = Field(
        default_factory=list, max_length=100_000, description="Switch-to-switch cables"
    )
    nodes: list[InventoryNode] = Field(
        default_factory=list, max_length=100_000, description="Hosts and their NICs"
    )


class NicView(BaseModel):
    """A node's NIC on a RoCE fabric and the leaf port it is cabled to."""

    name: str = Field(description="The NIC's name on the host, e.g. 'eth0'")
    switch: str = Field(description="The leaf it is cabled to")
    port: str = Field(description="The leaf port, e.g. 'Ethernet0'")
