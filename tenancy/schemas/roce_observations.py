"""Observed state of a RoCE leaf (``isofabric collect roce``) and its drift from intent."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StrictInt

from tenancy.schemas.audits import ObservationCreate
from tenancy.schemas.common import SLUG_PATTERN, Strict
from tenancy.schemas.verification import CounterexampleView

# A CONFIG_DB key part or field as read (port, VLAN, VRF, map name, field value): carried as
# read, bounded; what it means is decided by the comparison, not by the schema.
Name = Annotated[str, Field(min_length=1, max_length=256)]
Value = Annotated[str, Field(max_length=4096)]
RouteTarget = Annotated[str, Field(min_length=1, max_length=64)]
# VXLAN: a VNI is 24 bits (RFC 7348 §5).
VniNumber = Annotated[StrictInt, Field(ge=0, le=2**24 - 1)]
# A 64-port (or breakout 256-port) leaf with a few hundred VLANs stays far below these.
MAX_PORTS = 4096
MAX_ENTRIES = 65_536


class ObservedTunnelMap(Strict):
    """One VXLAN_TUNNEL_MAP entry: ``<tunnel>|<name>`` maps `vni` to `vlan`."""

    tunnel: Name = Field(description="The VXLAN tunnel (the VTEP's name, e.g. 'vtep')")
    name: Name = Field(description="The map's name, e.g. 'map_10000_Vlan100'")
    vni: VniNumber | None = Field(description="The VNI; null when the entry has none")
    vlan: Value = Field(description="The VLAN the VNI maps to, e.g. 'Vlan100'")


class ObservedVni(Strict):
    """A VNI as bgpd shows it (``show bgp l2vpn evpn vni json``), with its route targets."""

    vni: VniNumber = Field(description="The VNI")
    layer: Annotated[str, Field(max_length=8)] = Field(
        description="bgpd's `type`: 'L2' (a VLAN's VNI) or 'L3' (a VRF's L3VNI)"
    )
    import_rts: Annotated[list[RouteTarget], Field(max_length=MAX_PORTS)] = Field(
        description="Route targets the VNI imports ('65000:10000')"
    )
    export_rts: Annotated[list[RouteTarget], Field(max_length=MAX_PORTS)] = Field(
        description="Route targets the VNI exports"
    )


class ObservedFrr(Strict):
    """FRR's tenant state of the leaf: bgpd's VNIs, and each BGP VRF instance's RT imports."""

    vnis: Annotated[list[ObservedVni], Field(max_length=MAX_ENTRIES)] = Field(
        description="Every VNI bgpd knows (an L3VNI only once zebra has its VRF device)"
    )
    vrf_imports: Annotated[
        dict[Name, Annotated[list[RouteTarget], Field(max_length=MAX_PORTS)]],
        Field(max_length=MAX_ENTRIES),
    ] = Field(
        description="Per BGP VRF instance of the running configuration ('Vrf50001'): the "
        "route targets its l2vpn evpn address family imports"
    )


class RoceObservationCreate(BaseModel):
    """What ``isofabric collect roce`` prints for one leaf; unknown members are ignored.

    CONFIG_DB (read in SONiC's ConfigDBConnector layout) gives `vlan_members`, `vrfs`,
    `tunnel_maps` and `port_qos_maps`; FRR gives `frr`, null when it was not read (then
    nothing of FRR is compared, and `frr_error` says why when reading it failed).
    """

    kind: Literal["roce"] = Field(description="'roce': one leaf's CONFIG_DB and FRR state")
    leaf: Annotated[str, Field(max_length=63, pattern=SLUG_PATTERN)] = Field(
        description="The leaf switch the state was read from (its name in the fabric)"
    )
    collected_at: datetime | None = Field(
        default=None,
        description="When the state was read, RFC 3339; carried for the record, not compared",
    )
    vlan_members: Annotated[
        dict[Name, Annotated[list[Name], Field(max_length=MAX_PORTS)]],
        Field(max_length=MAX_PORTS),
    ] = Field(description="Per port ('Ethernet0'): the VLANs it is a member of ('Vlan100')")
    vrfs: Annotated[dict[Name, VniNumber | None], Field(max_length=MAX_ENTRIES)] = Field(
        description="Per VRF ('Vrf50001'): its VNI, null when it has none"
    )
    tunnel_maps: Annotated[list[ObservedTunnelMap], Field(max_length=MAX_ENTRIES)] = Field(
        description="Every VXLAN_TUNNEL_MAP entry"
    )
    port_qos_maps: Annotated[
        dict[Name, Annotated[dict[Name, Value], Field(max_length=64)]],
        Field(max_length=MAX_PORTS),
    ] = Field(
        description="Per PORT_QOS_MAP key (a port, or 'global'): its fields, a list field "
        "comma-joined ('pfc_enable': '3,4')"
    )
    frr: ObservedFrr | None = Field(
        default=None, description="FRR's state; null when FRR was not read"
    )
    frr_error: Annotated[str, Field(min_length=1, max_length=4096)] | None = Field(
        default=None, description="Why FRR could not be read; null when it was, or not asked"
    )


class LeafDriftView(BaseModel):
    """One difference between a leaf's observed state and intent.

    `code` says what kind (``vlan-member-unexpected``, ``vlan-member-missing``,
    ``draining-port-in-tenant-vlan``, ``vrf-unexpected``, ``vrf-missing``, ``vrf-vni``,
    ``tunnel-map-unexpected``, ``tunnel-map-missing``, ``port-qos``, ``route-target-leak``,
    ``route-target-import-missing``, ``frr-vrf-unexpected``, ``frr-vrf-missing``,
    ``vni-route-targets``, ``vni-unexpected``, ``vni-missing``); `subject` what differs.
    """

    code: str = Field(description="The kind of difference, kebab-case, e.g. 'route-target-leak'")
    subject: str = Field(
        description="What differs: a port ('Ethernet0'), a VRF, a tunnel map "
        "('vtep|map_10000_Vlan100') or a VNI ('10000')"
    )
    node: str | None = Field(description="The host on the port; null when not a host port")
    owner: str | None = Field(
        description="Who holds that host: 'tenant:<name>' or 'service:<name>'; null for none"
    )
    expected: list[str] = Field(description="The subject's intended values (sorted)")
    observed: list[str] = Field(description="Its observed values (sorted)")
    message: str = Field(description="What differs, for people")


class RoceObservationView(BaseModel):
    """Response to a posted RoCE leaf state: its drift from intent and what it allows.

    `holds` and `counterexamples` judge the leaf's observed VLAN members and VRF route-target
    imports (not the rest of the fabric); `in_sync` is true when there is no drift at all.
    Nothing is stored.
    """

    fabric: str = Field(description="The fabric's name")
    leaf: str = Field(description="The observed leaf")
    snapshot_digest: str = Field(description="The intended state the leaf was compared with")
    holds: bool = Field(description="Whether isolation holds as the observed leaf describes it")
    in_sync: bool = Field(description="True when the leaf shows no drift from intent")
    frr_observed: bool = Field(description="Whether FRR's state was observed and compared")
    drift: list[LeafDriftView] = Field(description="Each difference from intent")
    counterexamples: list[CounterexampleView] = Field(
        description="Isolation violations the observed leaf allows; empty when `holds`"
    )


AnyObservationCreate = Annotated[
    ObservationCreate | RoceObservationCreate,
    Field(
        discriminator="kind",
        description="Live P_Key tables of an InfiniBand fabric (`kind` 'infiniband', "
        "`isofabric collect ib`) or one RoCE leaf's state ('roce', `isofabric collect roce`)",
    ),
]
