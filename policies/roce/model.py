"""The engine's immutable view of a RoCEv2 leaf-spine fabric with BGP EVPN-VXLAN.

A tenant owns one VRF (named ``Vrf<l3vni>``) with its L3VNI, the L3VNI's own VLAN and tunnel map
on every leaf where it has ports, and one L2 segment (VLAN + L2VNI) with an anycast gateway from
its subnet. VLAN IDs are fabric-wide (the same ID on every leaf). Route targets are type 0
``rt_asn:VNI``; RDs type 1 ``<loopback>:<rd_index>`` (docs/facts/roce.md §1, §4, §7).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cached_property
from ipaddress import IPv4Address, IPv4Network
from typing import Any

from policies.model import Grant, Node, Owner
from policies.policy import DEFAULT_POLICY, Peering, Policy, TenantFacts

# VXLAN adds 50 bytes (outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8) to every tenant frame.
VXLAN_OVERHEAD = 50
# sonic-port YANG: PORT mtu is uint16 range 68..9216 (68 is IPv4's minimum, RFC 791).
MIN_SWITCH_MTU = 68
MAX_SWITCH_MTU = 9216
# RoCEv2 congestion notification packets: DSCP 48 on traffic class 6, strict priority, never PFC.
CNP_DSCP = 48
CNP_TC = 6
MAX_VNI = 2**24 - 1
DEFAULT_TENANT_PREFIX_POOL = IPv4Network("10.64.0.0/10")


class SwitchRole(StrEnum):
    """Leaves carry hosts and VTEPs; spines only route the underlay."""

    LEAF = "leaf"
    SPINE = "spine"


@dataclass(frozen=True, slots=True)
class SwitchPort:
    """A front-panel port as SONiC's PORT table describes it (`speed` in Mb/s)."""

    name: str
    lanes: str
    speed: int
    cable_length: str = "5m"


@dataclass(frozen=True, slots=True)
class Switch:
    """A SONiC switch with its underlay identity; spines have no VTEP."""

    name: str
    role: SwitchRole
    asn: int
    loopback: IPv4Address
    vtep: IPv4Address | None
    ports: tuple[SwitchPort, ...]
    platform: str = "sonic"


@dataclass(frozen=True, slots=True)
class Link:
    """A fabric (underlay) link between two switch ports."""

    a_switch: str
    a_port: str
    b_switch: str
    b_port: str


@dataclass(frozen=True, slots=True)
class Nic:
    """A host NIC cabled to a leaf port."""

    node: str
    name: str
    switch: str
    port: str


@dataclass(frozen=True, slots=True)
class RoceQos:
    """A QoS class on RoCE: DSCP -> traffic class (= priority = queue), lossless (PFC) or not.

    ECN marking thresholds are WRED green min/max in bytes with a marking probability (percent).
    """

    name: str
    dscp: int
    tc: int
    lossless: bool
    ets_weight: int
    ecn_min_bytes: int = 153_600
    ecn_max_bytes: int = 1_536_000
    ecn_probability: int = 5


@dataclass(frozen=True, slots=True)
class VrfSegment:
    """A tenant's (or shared service's) RoCE segment: its VRF, VNIs, VLANs and subnet.

    `imports` lists extra route targets imported into the VRF (granted services' and, for a
    service, its granted tenants'); anything beyond the owner's own RT and those backed by a
    grant is a leak.
    """

    owner: Owner
    vrf: str
    l3vni: int
    l3vni_vlan: int
    vlan: int
    l2vni: int
    subnet: IPv4Network
    rd_index: int
    qos_class: str | None = None
    imports: tuple[str, ...] = ()

    @property
    def gateway(self) -> str:
        """The anycast gateway address with prefix length, e.g. ``10.64.0.1/24``."""
        return f"{next(self.subnet.hosts())}/{self.subnet.prefixlen}"


@dataclass(frozen=True, slots=True)
class RoceSettings:
    """Fabric-wide pools and limits of a RoCE fabric (the fields of its `POST /v1/fabrics`)."""

    name: str
    vlan_first: int = 100
    vlan_last: int = 3999
    l2vni_first: int = 10000
    l2vni_last: int = 19999
    l3vni_first: int = 50000
    l3vni_last: int = 59999
    tenant_prefix_pool: IPv4Network = DEFAULT_TENANT_PREFIX_POOL
    tenant_prefix_length: int = 24
    rt_asn: int = 65000
    host_mtu: int = 9000
    underlay_mtu: int = 9216
    anycast_gateway_mac: str = "00:00:5e:00:01:01"
    max_lossless_priorities: int = 2


def route_target(rt_asn: int, vni: int) -> str:
    """The type-0 route target ``ASN2:VNI`` every leaf uses for a VNI (explicit, fabric-wide)."""
    return f"{rt_asn}:{vni}"


@dataclass(frozen=True)
class RoceSnapshot:
    """Everything the engine knows about one RoCE fabric at one moment.

    `policy` is the policy in force, `tenants` the facts of every tenant that holds something in
    the snapshot and `peerings` the accepted peerings on this fabric (policies.policy_rules).
    """

    fabric: RoceSettings
    switches: tuple[Switch, ...] = ()
    links: tuple[Link, ...] = ()
    nodes: tuple[Node, ...] = ()
    nics: tuple[Nic, ...] = ()
    segments: tuple[VrfSegment, ...] = ()
    grants: tuple[Grant, ...] = ()
    qos_classes: tuple[RoceQos, ...] = ()
    defined_qos_classes: tuple[RoceQos, ...] = ()
    policy: Policy = DEFAULT_POLICY
    tenants: tuple[TenantFacts, ...] = ()
    peerings: tuple[Peering, ...] = ()

    @cached_property
    def digest(self) -> str:
        """The v2 digest (``v2:<hex>``, policies/digest): a multiset hash of its groups."""
        from policies.roce.digest import roce_digest  # the digest module reads this one

        return roce_digest(self)

    def leaves(self) -> tuple[Switch, ...]:
        """Leaf switches sorted by name."""
        return tuple(
            sorted((s for s in self.switches if s.role is SwitchRole.LEAF), key=lambda s: s.name)
        )


def with_grant_imports(
    segments: tuple[VrfSegment, ...],
    grants: tuple[Grant, ...],
    rt_asn: int,
    peerings: Iterable[Peering] = (),
) -> tuple[VrfSegment, ...]:
    """Add the route leaks that grants and accepted peerings call for, in both directions.

    The tenant's VRF imports the service's RT and the service's VRF imports the tenant's RT;
    one direction alone would leave replies without a route. A peering makes each of its two
    tenants' VRFs import the other's L3VNI RT.

    Returns:
        Segments sorted by L3VNI with sorted, de-duplicated `imports`.
    """
    by_owner = {s.owner: s for s in segments}
    extra: dict[Owner, set[str]] = {s.owner: set(s.imports) for s in segments}
    pairs = [(Owner.tenant(g.tenant), Owner.service(g.service)) for g in grants]
    pairs += [(Owner.tenant(p.a), Owner.tenant(p.b)) for p in peerings]
    for x, y in pairs:
        one, other = by_owner.get(x), by_owner.get(y)
        if one is None or other is None:
            continue
        extra[one.owner].add(route_target(rt_asn, other.l3vni))
        extra[other.owner].add(route_target(rt_asn, one.l3vni))
    return tuple(
        sorted(
            (replace(s, imports=tuple(sorted(extra[s.owner]))) for s in segments),
            key=lambda s: s.l3vni,
        )
    )


def _plain(value: Any) -> Any:
    """JSON-ready, sortable form of a dataclass dict (addresses and networks as text)."""
    return json.dumps(value, sort_keys=True, default=str)
