"""RoCE isolation verification: the reachability an EVPN-VXLAN fabric allows, compared with intent.

Semantics (reference/roce.md §1, §7; DESIGN.md "Isolation semantics"). Tenant VRFs are separate
routing tables, so two owners can communicate iff

* one owner's VRF imports a route target of the other's VNIs (``rt_asn:VNI``, L3 or L2), or
* their segments share a VNI (L2 or L3) or a VLAN ID (VLAN IDs are fabric-wide, so one ID is one
  bridge domain on every leaf), or
* one host-facing switch port carries both (NICs of both cabled to it, or a node held by both).

Intent is `policies.intent.is_allowed_edge`: an owner reaches itself, a tenant reaches the services
it was granted, nothing else. Each cross-owner edge is reported once; its `segment` is the VNI that
is shared when the edge comes from a VNI collision, and otherwise the L3VNI of the target side (the
service's L3VNI for a grant), or of the source side when the target has no segment (an unassigned
node cabled to a tenant's port).

Route leaks: an import that reaches another owner is judged like any other edge (cross-tenant,
service-without-grant, ...), so a granted leak is allowed and an ungranted one is refuted with both
endpoints. `route-leak` is reserved for an import of a route target that belongs to no segment of
the fabric: it reaches nobody today, but it silently leaks to whichever tenant is given that VNI
next (and to anything outside the fabric that exports it).

Endpoints carry ``guid=0`` and the switch port (``leaf01:Ethernet0``) of the host's first NIC.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, combinations

from policies.intent import is_allowed_edge
from policies.model import NodeRole, Owner, OwnerKind
from policies.roce_model import (
    CNP_DSCP,
    CNP_TC,
    MAX_SWITCH_MTU,
    MAX_VNI,
    VXLAN_OVERHEAD,
    Nic,
    RoceQos,
    RoceSettings,
    RoceSnapshot,
    SwitchRole,
    VrfSegment,
    route_target,
)
from policies.verify import (
    ROCE_RULES,
    Counterexample,
    Endpoint,
    ReachabilityEdge,
    Rule,
    Verdict,
    _capped,
    edge_rule,
)

# IEEE 802.1Q / sonic-vlan YANG: VLAN 1 is the default VLAN and 4095 is reserved.
MIN_VLAN, MAX_VLAN = 2, 4094
# Linux IFNAMSIZ: a VRF is a netdev, its name at most 15 characters (sonic-vrf YANG).
MAX_VRF_NAME = 15
# RFC 4364 §4.2: the assigned-number field of a type-1 RD (``<loopback>:<n>``) is 2 bytes.
MAX_RD_INDEX = 65535
# RFC 4360 §3.1: a type-0 route target has a 2-byte ASN administrator field.
MAX_RT_ASN = 65535
# A /30 is the smallest subnet with room for the anycast gateway and one host.
MAX_TENANT_PREFIX_LENGTH = 30
# IEEE 802.1Qbb: PFC has 8 priorities.
PFC_PRIORITIES = 8
# ECN marking probability is a WRED drop/mark percentage (sonic-wred-profile YANG: 0..100).
MAX_ECN_PROBABILITY = 100
MAX_ETS_WEIGHT_TOTAL = 100

# An edge with the two endpoints that witness it and a sentence saying how they connect.
Witnessed = tuple[ReachabilityEdge, Endpoint, Endpoint, str]
# One identifier a segment uses: (segment, label, value, the range it must lie in).
_Use = tuple[VrfSegment, str, int, range]


class _Index:
    """Lookups shared by the rules: segments by owner and route target, node owners, NICs."""

    def __init__(self, snapshot: RoceSnapshot) -> None:
        self.snapshot = snapshot
        self.settings = snapshot.fabric
        self.grants = frozenset(snapshot.grants)
        self.segment: dict[Owner, VrfSegment] = {}
        self.by_rt: dict[str, list[VrfSegment]] = defaultdict(list)
        for segment in snapshot.segments:
            self.segment.setdefault(segment.owner, segment)
            for vni in dict.fromkeys((segment.l3vni, segment.l2vni)):
                self.by_rt[route_target(self.settings.rt_asn, vni)].append(segment)
        self.owners = {node.name: node.owners for node in snapshot.nodes}
        self.first_nic: dict[str, Nic] = {}
        for nic in sorted(snapshot.nics, key=lambda n: (n.node, n.name)):
            self.first_nic.setdefault(nic.node, nic)
        self.home: dict[Owner, str] = {}
        for node in sorted(snapshot.nodes, key=lambda n: n.name):
            for owner in node.owners:
                self.home.setdefault(owner, node.name)

    def owners_of(self, node: str) -> tuple[Owner, ...]:
        """Owners of a host; a free (or unknown) host is its own unassigned owner."""
        return self.owners.get(node) or (Owner.unassigned(node),)

    def endpoint(self, owner: Owner) -> Endpoint:
        """The owner's first host (by name) and that host's first NIC's switch port."""
        node = owner.name if owner.kind is OwnerKind.UNASSIGNED else self.home.get(owner, "?")
        nic = self.first_nic.get(node)
        return Endpoint(0, node, owner, _port(nic) if nic else None)


def _port(nic: Nic) -> str:
    return f"{nic.switch}:{nic.port}"


def verify_roce(snapshot: RoceSnapshot) -> Verdict:
    """Check that the RoCE fabric's VRFs, VNIs, VLANs, ports and QoS isolate owners as intended.

    Property: every pair of distinct owners that can communicate (a route-target import, a shared
    VNI or VLAN, a shared host port; see the module docstring) is allowed by intent, i.e. is a
    tenant and a service it was granted. Also checked (reference/roce.md §7): identifiers unique
    and in range (VNI, VLAN, VRF name, RD), one owner per node and per host port, imports of
    route targets nobody owns, subnets disjoint and inside the pool, NICs on real leaf host ports,
    the QoS classes (PFC/ECN/CNP/DSCP/ETS) and the VXLAN MTU budget.

    Returns:
        A `Verdict` listing `ROCE_RULES`; it never raises for a violating snapshot.
        `reachability` lists every cross-owner edge once (sorted), allowed or not. At most
        `MAX_COUNTEREXAMPLES_PER_RULE` counterexamples are kept per rule.
    """
    index = _Index(snapshot)
    edges = _reachability(index)
    checks = chain(
        _edge_violations(edges),
        _node_violations(index),
        _port_violations(index),
        _identifier_violations(index),
        _vrf_violations(index),
        _rd_violations(index),
        _route_leaks(index),
        _subnet_violations(index),
        _nic_violations(index),
        _qos_violations(snapshot.qos_classes, snapshot.fabric.max_lossless_priorities),
        _mtu_violations(snapshot.fabric),
    )
    found = _capped(checks)
    return Verdict(
        holds=not found,
        snapshot_digest=snapshot.digest,
        counterexamples=tuple(found),
        reachability=tuple(edge for edge, _, _, _ in edges),
        rules=ROCE_RULES,
    )


# --- reachability -------------------------------------------------------------------------------


def _reachability(index: _Index) -> list[Witnessed]:
    """Every cross-owner edge once, with the first witness found (imports, ids, then ports)."""
    witnesses: dict[ReachabilityEdge, Witnessed] = {}
    for witnessed in chain(_route_edges(index), _shared_id_edges(index), _port_edges(index)):
        witnesses.setdefault(witnessed[0], witnessed)
    return sorted(
        witnesses.values(),
        key=lambda w: (w[0].source.sort_key, w[0].target.sort_key, w[0].segment),
    )


def _edge(index: _Index, a: Endpoint, b: Endpoint, why: str, vni: int | None = None) -> Witnessed:
    """The edge between two endpoints' owners, source first; `vni` defaults to the target's."""
    if b.owner < a.owner:
        a, b = b, a
    segment = vni if vni is not None else index.segment[b.owner].l3vni
    allowed = is_allowed_edge(a.owner, b.owner, index.grants)
    return ReachabilityEdge(a.owner, b.owner, segment, allowed), a, b, why


def _route_edges(index: _Index) -> Iterator[Witnessed]:
    for segment in index.snapshot.segments:
        for rt in segment.imports:
            for other in index.by_rt.get(rt, ()):
                if other.owner != segment.owner:
                    why = f"{segment.vrf} of {segment.owner} imports route target {rt}"
                    a, b = index.endpoint(segment.owner), index.endpoint(other.owner)
                    yield _edge(index, a, b, why)


def _shared_id_edges(index: _Index) -> Iterator[Witnessed]:
    # VLAN IDs are fabric-wide (roce_model), so a shared VLAN ID is one bridge domain everywhere.
    for label, ids in (("VNI", _vnis), ("VLAN", _vlans)):
        for value, segments in _grouped(index.snapshot.segments, ids).items():
            owners = sorted({s.owner for s in segments})
            for a, b in combinations(owners, 2):
                why = f"both use {label} {value}"
                vni = value if label == "VNI" else None
                yield _edge(index, index.endpoint(a), index.endpoint(b), why, vni)


def _vnis(segment: VrfSegment) -> tuple[int, ...]:
    return segment.l3vni, segment.l2vni


def _vlans(segment: VrfSegment) -> tuple[int, ...]:
    return segment.vlan, segment.l3vni_vlan


def _grouped(
    segments: Iterable[VrfSegment], ids: Callable[[VrfSegment], tuple[int, ...]]
) -> dict[int, list[VrfSegment]]:
    grouped: dict[int, list[VrfSegment]] = defaultdict(list)
    for segment in segments:
        for value in ids(segment):
            grouped[value].append(segment)
    return grouped


def _port_edges(index: _Index) -> Iterator[Witnessed]:
    # A host port is an access port of its owner's VLAN: every host cabled to it joins that VLAN.
    for port, nics in _nics_by_port(index).items():
        ends: dict[Owner, Endpoint] = {}
        for nic in nics:
            for owner in index.owners_of(nic.node):
                ends.setdefault(owner, Endpoint(0, nic.node, owner, port))
        for a, b in combinations(sorted(ends), 2):
            carrier = index.segment.get(b) or index.segment.get(a)
            if carrier is not None:
                why = f"switch port {port} carries both"
                yield _edge(index, ends[a], ends[b], why, carrier.l3vni)


def _nics_by_port(index: _Index) -> dict[str, list[Nic]]:
    by_port: dict[str, list[Nic]] = defaultdict(list)
    for nic in sorted(index.snapshot.nics, key=lambda n: (n.switch, n.port, n.node, n.name)):
        by_port[_port(nic)].append(nic)
    return by_port


def _edge_violations(edges: list[Witnessed]) -> Iterator[Counterexample]:
    for edge, a, b, why in edges:
        if not edge.allowed:
            yield Counterexample(
                edge_rule(edge.source, edge.target),
                f"{edge.source} and {edge.target} can communicate through VNI {edge.segment}: "
                f"{why}",
                edge.segment,
                a,
                b,
            )


# --- ownership and cabling ----------------------------------------------------------------------


def _node_violations(index: _Index) -> Iterator[Counterexample]:
    for node in index.snapshot.nodes:
        nic = index.first_nic.get(node.name)
        port = _port(nic) if nic else None
        if len(node.owners) > 1:
            a, b = node.owners[0], node.owners[1]
            yield Counterexample(
                Rule.NODE_SHARED,
                f"node {node.name} is held by both {a} and {b}",
                None,
                Endpoint(0, node.name, a, port),
                Endpoint(0, node.name, b, port),
            )
        if node.role is NodeRole.MANAGEMENT and node.owners:
            yield Counterexample(
                Rule.MANAGEMENT_ASSIGNED,
                f"management node {node.name} is held by {node.owners[0]}",
                None,
                Endpoint(0, node.name, node.owners[0], port),
            )


def _port_violations(index: _Index) -> Iterator[Counterexample]:
    # reference/roce.md §7: a host port belongs to one tenant. A node with two owners on its own
    # port is `node-shared`; here each NIC counts for its node's first owner only.
    for port, nics in _nics_by_port(index).items():
        first: dict[Owner, Nic] = {}
        for nic in nics:
            first.setdefault(index.owners_of(nic.node)[0], nic)
        (a, a_nic), *others = sorted(first.items())
        for b, b_nic in others:
            carrier = index.segment.get(b) or index.segment.get(a)
            yield Counterexample(
                Rule.PORT_SHARED,
                f"switch port {port} is cabled to {a_nic.node} ({a}) and {b_nic.node} ({b})",
                carrier.l3vni if carrier else None,
                Endpoint(0, a_nic.node, a, port),
                Endpoint(0, b_nic.node, b, port),
            )


def _nic_violations(index: _Index) -> Iterator[Counterexample]:
    switches = {switch.name: switch for switch in index.snapshot.switches}
    uplinks = {(link.a_switch, link.a_port) for link in index.snapshot.links} | {
        (link.b_switch, link.b_port) for link in index.snapshot.links
    }
    for nic in index.snapshot.nics:
        switch = switches.get(nic.switch)
        if switch is None:
            problem = "an unknown switch"
        elif switch.role is not SwitchRole.LEAF:
            problem = f"a {switch.role.value}, not a leaf"
        elif nic.port not in {p.name for p in switch.ports}:
            problem = "a port the switch does not have"
        elif (nic.switch, nic.port) in uplinks:
            problem = "a fabric (underlay) link port"
        else:
            continue
        owner = index.owners_of(nic.node)[0]
        segment = index.segment.get(owner)
        yield Counterexample(
            Rule.NIC_UNKNOWN_PORT,
            f"NIC {nic.name} of {nic.node} is cabled to {_port(nic)}, {problem}",
            segment.l3vni if segment else None,
            Endpoint(0, nic.node, owner, _port(nic)),
        )


# --- identifiers --------------------------------------------------------------------------------


def _identifier_uses(settings: RoceSettings, segments: Iterable[VrfSegment]) -> Iterator[_Use]:
    l2vni = range(max(1, settings.l2vni_first), min(MAX_VNI, settings.l2vni_last) + 1)
    l3vni = range(max(1, settings.l3vni_first), min(MAX_VNI, settings.l3vni_last) + 1)
    vlan = range(max(MIN_VLAN, settings.vlan_first), min(MAX_VLAN, settings.vlan_last) + 1)
    for segment in segments:
        yield segment, "L3VNI", segment.l3vni, l3vni
        yield segment, "L2VNI", segment.l2vni, l2vni
        yield segment, "VLAN", segment.vlan, vlan
        yield segment, "L3VNI VLAN", segment.l3vni_vlan, vlan


def _identifier_violations(index: _Index) -> Iterator[Counterexample]:
    # VNIs are unique fabric-wide across L2 and L3; VLAN IDs are fabric-wide (reference/roce.md §7).
    seen: dict[tuple[bool, int], tuple[VrfSegment, str]] = {}
    for segment, label, value, allowed in _identifier_uses(index.settings, index.snapshot.segments):
        is_vni = label.endswith("VNI")
        owner = index.endpoint(segment.owner)
        if value not in allowed:
            yield Counterexample(
                Rule.VNI_OUT_OF_RANGE if is_vni else Rule.VLAN_OUT_OF_RANGE,
                f"{label} {value} of {segment.owner} is outside {allowed.start}-{allowed.stop - 1}",
                segment.l3vni,
                owner,
            )
        first = seen.setdefault((is_vni, value), (segment, label))
        if first[0] is not segment or first[1] != label:
            yield Counterexample(
                Rule.VNI_DUPLICATE if is_vni else Rule.VLAN_DUPLICATE,
                f"{label} {value} of {segment.owner} is also the {first[1]} of {first[0].owner}",
                value if is_vni else segment.l3vni,
                index.endpoint(first[0].owner),
                owner,
            )


def _vrf_violations(index: _Index) -> Iterator[Counterexample]:
    # SONiC: one VRF has one `vni` (its L3VNI); names match Vrf[a-zA-Z0-9_-]+, <= 15 characters.
    seen: dict[str, VrfSegment] = {}
    for segment in index.snapshot.segments:
        expected = f"Vrf{segment.l3vni}"
        if segment.vrf != expected or len(segment.vrf) > MAX_VRF_NAME:
            yield Counterexample(
                Rule.VRF_INVALID,
                f"VRF {segment.vrf!r} of {segment.owner} must be named {expected!r} "
                f"(at most {MAX_VRF_NAME} characters)",
                segment.l3vni,
                index.endpoint(segment.owner),
            )
        first = seen.setdefault(segment.vrf, segment)
        if first is not segment:
            yield Counterexample(
                Rule.VRF_INVALID,
                f"VRF {segment.vrf} would hold L3VNI {first.l3vni} of {first.owner} and "
                f"L3VNI {segment.l3vni} of {segment.owner}",
                segment.l3vni,
                index.endpoint(first.owner),
                index.endpoint(segment.owner),
            )


def _rd_violations(index: _Index) -> Iterator[Counterexample]:
    # Every leaf derives the RD <loopback>:<rd_index>, so one index per VRF fabric-wide keeps the
    # RD unique per VRF on each leaf (reference/roce.md §7).
    seen: dict[int, VrfSegment] = {}
    for segment in index.snapshot.segments:
        if not 0 <= segment.rd_index <= MAX_RD_INDEX:
            yield Counterexample(
                Rule.RD_INVALID,
                f"RD index {segment.rd_index} of {segment.owner} is outside 0-{MAX_RD_INDEX}",
                segment.l3vni,
                index.endpoint(segment.owner),
            )
        first = seen.setdefault(segment.rd_index, segment)
        if first is not segment:
            yield Counterexample(
                Rule.RD_INVALID,
                f"RD index {segment.rd_index} of {segment.owner} is also used by {first.owner}",
                segment.l3vni,
                index.endpoint(first.owner),
                index.endpoint(segment.owner),
            )


def _route_leaks(index: _Index) -> Iterator[Counterexample]:
    for segment in index.snapshot.segments:
        for rt in segment.imports:
            if rt not in index.by_rt:
                yield Counterexample(
                    Rule.ROUTE_LEAK,
                    f"{segment.vrf} of {segment.owner} imports route target {rt}, which no "
                    f"segment of the fabric exports",
                    segment.l3vni,
                    index.endpoint(segment.owner),
                )


def _subnet_violations(index: _Index) -> Iterator[Counterexample]:
    # Sweep by start address, keeping the subnet that reaches furthest: O(n log n) overlap test.
    pool = index.settings.tenant_prefix_pool
    widest: VrfSegment | None = None
    for segment in sorted(
        index.snapshot.segments, key=lambda s: (s.subnet.network_address, s.subnet.prefixlen)
    ):
        subnet = segment.subnet
        if not subnet.subnet_of(pool):
            yield Counterexample(
                Rule.SUBNET_OUTSIDE_POOL,
                f"subnet {subnet} of {segment.owner} is outside the tenant pool {pool}",
                segment.l3vni,
                index.endpoint(segment.owner),
            )
        if widest is not None and subnet.network_address <= widest.subnet.broadcast_address:
            yield Counterexample(
                Rule.SUBNET_OVERLAP,
                f"subnet {subnet} of {segment.owner} overlaps {widest.subnet} of {widest.owner}",
                segment.l3vni,
                index.endpoint(widest.owner),
                index.endpoint(segment.owner),
            )
        if widest is None or subnet.broadcast_address > widest.subnet.broadcast_address:
            widest = segment


# --- QoS and MTU --------------------------------------------------------------------------------


def _qos_violations(classes: tuple[RoceQos, ...], max_lossless: int) -> Iterator[Counterexample]:
    yield from _cnp_conflicts(classes)
    yield from _traffic_class_conflicts(classes)
    lossless_tcs = sorted({c.tc for c in classes if c.lossless})
    if len(lossless_tcs) > max_lossless:
        # Every lossless priority reserves PFC headroom per port (reference/roce.md §2).
        yield _qos_example(
            Rule.QOS_LOSSLESS_LIMIT,
            f"{len(lossless_tcs)} lossless traffic classes {lossless_tcs} exceed the fabric's "
            f"limit of {max_lossless}",
        )
    for qos in classes:
        if qos.lossless and not _ecn_valid(qos):
            yield _qos_example(
                Rule.QOS_ECN_MISSING,
                f"lossless class {qos.name} needs ECN marking with 0 < min ({qos.ecn_min_bytes}) "
                f"< max ({qos.ecn_max_bytes}) and probability 1-100 ({qos.ecn_probability})",
            )
    yield from _dscp_duplicates(classes)
    total = sum(c.ets_weight for c in classes)
    if total > MAX_ETS_WEIGHT_TOTAL:
        yield _qos_example(
            Rule.QOS_ETS_OVERCOMMIT, f"ETS weights add up to {total}%, more than 100%"
        )


def _qos_example(rule: Rule, message: str) -> Counterexample:
    return Counterexample(rule, message)


def _ecn_valid(qos: RoceQos) -> bool:
    thresholds = 0 < qos.ecn_min_bytes < qos.ecn_max_bytes
    return thresholds and 1 <= qos.ecn_probability <= MAX_ECN_PROBABILITY


def _cnp_conflicts(classes: Iterable[RoceQos]) -> Iterator[Counterexample]:
    # RoCEv2 CNPs travel on DSCP 48 / TC 6, strict priority and lossy (reference/roce.md §2).
    for qos in classes:
        if qos.dscp == CNP_DSCP or qos.tc == CNP_TC:
            yield _qos_example(
                Rule.QOS_CNP_CONFLICT,
                f"class {qos.name} (DSCP {qos.dscp}, TC {qos.tc}) collides with the CNP "
                f"DSCP {CNP_DSCP} / TC {CNP_TC}",
            )


def _traffic_class_conflicts(classes: Iterable[RoceQos]) -> Iterator[Counterexample]:
    # PFC is per priority (TC): a TC is lossless for every class on it, so it must not mix, and
    # the CNP TC must never be paused.
    first: dict[int, RoceQos] = {}
    for qos in classes:
        if qos.lossless and qos.tc == CNP_TC:
            yield _qos_example(
                Rule.QOS_PFC_ON_LOSSY,
                f"lossless class {qos.name} would enable PFC on the CNP TC {CNP_TC}",
            )
        other = first.setdefault(qos.tc, qos)
        if other.lossless != qos.lossless:
            yield _qos_example(
                Rule.QOS_PFC_ON_LOSSY,
                f"classes {other.name} and {qos.name} share TC {qos.tc} but only one is lossless",
            )


def _dscp_duplicates(classes: Iterable[RoceQos]) -> Iterator[Counterexample]:
    # One fabric-wide DSCP_TO_TC_MAP: a DSCP value selects exactly one class.
    first: dict[int, RoceQos] = {}
    for qos in classes:
        other = first.setdefault(qos.dscp, qos)
        if other is not qos:
            yield _qos_example(
                Rule.QOS_DSCP_DUPLICATE,
                f"classes {other.name} and {qos.name} both use DSCP {qos.dscp}",
            )


def _mtu_violations(settings: RoceSettings) -> Iterator[Counterexample]:
    problem = _mtu_problem(settings)
    if problem:
        yield Counterexample(Rule.MTU_BUDGET, problem)


def _mtu_problem(settings: RoceSettings) -> str | None:
    # VXLAN adds 50 bytes to every tenant frame; the underlay must carry it (reference/roce.md §7).
    needed = settings.host_mtu + VXLAN_OVERHEAD
    if needed <= settings.underlay_mtu <= MAX_SWITCH_MTU:
        return None
    return (
        f"underlay MTU {settings.underlay_mtu} must be at least host MTU {settings.host_mtu} + "
        f"{VXLAN_OVERHEAD} (VXLAN) = {needed} and at most {MAX_SWITCH_MTU}"
    )


# --- fabric settings ----------------------------------------------------------------------------


def check_roce_settings(settings: RoceSettings) -> list[str]:
    """Problems with a RoCE fabric's pools and limits, checked once when the fabric is created.

    Contract: returns an empty list iff the VLAN range lies in 2-4094, both VNI ranges in
    1-2^24-1, every range is ordered and the L2VNI and L3VNI ranges are disjoint, `rt_asn` is a
    2-byte ASN, the tenant prefix length lies between the pool's and /30, the underlay carries the
    host MTU plus VXLAN overhead, and 1-8 lossless priorities are allowed.

    Returns:
        One sentence per problem, in a fixed order.
    """
    problems = [
        *_range_problems("VLAN", settings.vlan_first, settings.vlan_last, MIN_VLAN, MAX_VLAN),
        *_range_problems("L2VNI", settings.l2vni_first, settings.l2vni_last, 1, MAX_VNI),
        *_range_problems("L3VNI", settings.l3vni_first, settings.l3vni_last, 1, MAX_VNI),
    ]
    problems += _pool_problems(settings)
    mtu = _mtu_problem(settings)
    if mtu:
        problems.append(mtu)
    if not 1 <= settings.max_lossless_priorities <= PFC_PRIORITIES:
        problems.append(
            f"max_lossless_priorities {settings.max_lossless_priorities} is outside "
            f"1-{PFC_PRIORITIES}"
        )
    return problems


def _pool_problems(settings: RoceSettings) -> list[str]:
    problems = []
    l2 = range(settings.l2vni_first, settings.l2vni_last + 1)
    l3 = range(settings.l3vni_first, settings.l3vni_last + 1)
    if l2 and l3 and max(l2.start, l3.start) < min(l2.stop, l3.stop):
        problems.append(f"L2VNI range {_span(l2)} and L3VNI range {_span(l3)} overlap")
    if not 1 <= settings.rt_asn <= MAX_RT_ASN:
        problems.append(f"rt_asn {settings.rt_asn} is outside 1-{MAX_RT_ASN}")
    pool = settings.tenant_prefix_pool
    if not pool.prefixlen <= settings.tenant_prefix_length <= MAX_TENANT_PREFIX_LENGTH:
        problems.append(
            f"tenant prefix length /{settings.tenant_prefix_length} must be between the pool's "
            f"/{pool.prefixlen} and /{MAX_TENANT_PREFIX_LENGTH}"
        )
    return problems


def _range_problems(label: str, first: int, last: int, low: int, high: int) -> list[str]:
    if first > last:
        return [f"{label} range {first}-{last} is empty (first > last)"]
    if first < low or last > high:
        return [f"{label} range {first}-{last} is outside {low}-{high}"]
    return []


def _span(values: range) -> str:
    return f"{values.start}-{values.stop - 1}"
