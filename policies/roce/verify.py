"""RoCE isolation verification: the reachability an EVPN-VXLAN fabric allows, compared with intent.

Semantics (docs/facts/roce.md §1, §7; DESIGN.md "Isolation semantics"). Tenant VRFs are separate
routing tables, so two owners can communicate iff

* one owner's VRF imports a route target of the other's VNIs (``rt_asn:VNI``, L3 or L2), or
* their segments share a VNI (L2 or L3) or a VLAN ID (VLAN IDs are fabric-wide, so one ID is one
  bridge domain on every leaf), or
* one host-facing switch port carries both (NICs of both cabled to it, or a node held by both).

Intent is `policies.intent.is_allowed_edge`: an owner reaches itself, a tenant reaches the services
it was granted and the tenants it is peered with (an accepted peering the policy allows), nothing
else. Each cross-owner edge is reported once; its `segment` is the VNI that is shared when the
edge comes from a VNI collision, and otherwise the L3VNI of the target side (the service's L3VNI
for a grant), or of the source side when the target has no segment (an unassigned node cabled to
a tenant's port). The snapshot's policy is checked too (policies.policy_rules; a leaf is the
switch a NIC is cabled to).

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
from policies.model import NodeRole, Owner
from policies.policy_rules import LeafPort, PolicyInputs, policy_violations
from policies.roce.index import RoceIndex, Witnessed, nic_port
from policies.roce.model import (
    Nic,
    RoceSnapshot,
    SwitchRole,
    VrfSegment,
)
from policies.roce.verify_qos import mtu_violations, qos_violations
from policies.roce.verify_segments import (
    identifier_violations,
    rd_violations,
    route_leaks,
    subnet_violations,
    vrf_violations,
)
from policies.verdict import (
    ROCE_RULES,
    Counterexample,
    Endpoint,
    ReachabilityEdge,
    Rule,
    Verdict,
    capped,
    edge_rule,
)


def verify_roce(snapshot: RoceSnapshot, *, digest: str | None = None) -> Verdict:
    """Check that the RoCE fabric's VRFs, VNIs, VLANs, ports and QoS isolate owners as intended.

    Property: every pair of distinct owners that can communicate (a route-target import, a shared
    VNI or VLAN, a shared host port; see the module docstring) is allowed by intent, i.e. is a
    tenant and a service it was granted. Also checked (docs/facts/roce.md §7): identifiers unique
    and in range (VNI, VLAN, VRF name, RD), one owner per node and per host port, imports of
    route targets nobody owns, subnets disjoint and inside the pool, NICs on real leaf host ports,
    the QoS classes (PFC/ECN/CNP/DSCP/ETS) and the VXLAN MTU budget.

    Args:
        snapshot: the fabric, or a part of it.
        digest: the digest the verdict reports; the snapshot's own when None. A caller that
            verifies part of a fabric reports the whole fabric's and need not hash the part.

    Returns:
        A `Verdict` listing `ROCE_RULES`; it never raises for a violating snapshot.
        `reachability` lists every cross-owner edge once (sorted), allowed or not. At most
        `MAX_COUNTEREXAMPLES_PER_RULE` counterexamples are kept per rule.
    """
    index = RoceIndex(snapshot)
    edges = _reachability(index)
    checks = chain(
        _edge_violations(edges),
        _node_violations(index),
        _port_violations(index),
        identifier_violations(index),
        vrf_violations(index),
        rd_violations(index),
        route_leaks(index),
        subnet_violations(index),
        _nic_violations(index),
        qos_violations(snapshot.qos_classes, snapshot.fabric.max_lossless_priorities),
        mtu_violations(snapshot.fabric),
        policy_violations(_policy_inputs(index)),
    )
    found = capped(checks)
    return Verdict(
        holds=not found,
        snapshot_digest=snapshot.digest if digest is None else digest,
        counterexamples=tuple(found),
        reachability=tuple(edge for edge, _, _, _ in edges),
        rules=ROCE_RULES,
    )


# --- reachability -------------------------------------------------------------------------------


def _reachability(index: RoceIndex) -> list[Witnessed]:
    """Every cross-owner edge once, with the first witness found (imports, ids, then ports)."""
    witnesses: dict[ReachabilityEdge, Witnessed] = {}
    for witnessed in chain(_route_edges(index), _shared_id_edges(index), _port_edges(index)):
        witnesses.setdefault(witnessed[0], witnessed)
    return sorted(
        witnesses.values(),
        key=lambda w: (w[0].source.sort_key, w[0].target.sort_key, w[0].segment),
    )


def _edge(
    index: RoceIndex, a: Endpoint, b: Endpoint, why: str, vni: int | None = None
) -> Witnessed:
    """The edge between two endpoints' owners, source first; `vni` defaults to the target's."""
    if b.owner < a.owner:
        a, b = b, a
    segment = vni if vni is not None else index.segment[b.owner].l3vni
    allowed = is_allowed_edge(a.owner, b.owner, index.grants, index.peerings)
    return ReachabilityEdge(a.owner, b.owner, segment, allowed), a, b, why


def _route_edges(index: RoceIndex) -> Iterator[Witnessed]:
    for segment in index.snapshot.segments:
        for rt in segment.imports:
            for other in index.by_rt.get(rt, ()):
                if other.owner != segment.owner:
                    why = f"{segment.vrf} of {segment.owner} imports route target {rt}"
                    a, b = index.endpoint(segment.owner), index.endpoint(other.owner)
                    yield _edge(index, a, b, why)


def _shared_id_edges(index: RoceIndex) -> Iterator[Witnessed]:
    # VLAN IDs are fabric-wide (policies.roce.model): a shared VLAN ID is one bridge domain.
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


def _port_edges(index: RoceIndex) -> Iterator[Witnessed]:
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


def _nics_by_port(index: RoceIndex) -> dict[str, list[Nic]]:
    by_port: dict[str, list[Nic]] = defaultdict(list)
    for nic in sorted(index.snapshot.nics, key=lambda n: (n.switch, n.port, n.node, n.name)):
        by_port[nic_port(nic)].append(nic)
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


def _node_violations(index: RoceIndex) -> Iterator[Counterexample]:
    for node in index.snapshot.nodes:
        nic = index.first_nic.get(node.name)
        port = nic_port(nic) if nic else None
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


def _port_violations(index: RoceIndex) -> Iterator[Counterexample]:
    # docs/facts/roce.md §7: a host port belongs to one tenant. A node with two owners on its own
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


def _nic_violations(index: RoceIndex) -> Iterator[Counterexample]:
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
            f"NIC {nic.name} of {nic.node} is cabled to {nic_port(nic)}, {problem}",
            segment.l3vni if segment else None,
            Endpoint(0, nic.node, owner, nic_port(nic)),
        )


# --- policy -------------------------------------------------------------------------------------


def _policy_inputs(index: RoceIndex) -> PolicyInputs:
    snapshot = index.snapshot
    return PolicyInputs(
        policy=snapshot.policy,
        tenants=snapshot.tenants,
        peerings=snapshot.peerings,
        grants=snapshot.grants,
        cabling=_cabling(index),
        endpoint=index.endpoint,
        segment=lambda owner: _l3vni(index, owner),
    )


def _l3vni(index: RoceIndex, owner: Owner) -> int | None:
    segment = index.segment.get(owner)
    return segment.l3vni if segment else None


def _cabling(index: RoceIndex) -> Iterator[LeafPort]:
    """Every NIC with the leaf it is cabled to, once per owner of its node (none if free)."""
    for nic in index.snapshot.nics:
        for owner in index.owners.get(nic.node, ()):
            yield nic.switch, Endpoint(0, nic.node, owner, nic_port(nic))
