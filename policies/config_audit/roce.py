"""Audit a SONiC leaf's deployed config_db.json or frr.conf, and its observed tables.

Counterexamples come from the parsed facts: another owner's port in a segment's VLAN, or a
route-target import that no grant backs. Pure (stdlib only, no I/O).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from policies.config_audit.report import AuditReport, Drift
from policies.findings import Finding, Severity
from policies.intent import is_allowed_edge
from policies.model import Owner
from policies.policy_rules import allowed_peerings
from policies.roce.model import RoceSnapshot, VrfSegment, route_target
from policies.roce.parse_config_db import parse_config_db
from policies.roce.parse_frr import ParsedFrr, parse_frr_conf, rd_rt_type
from policies.verdict import Counterexample, Endpoint, ReachabilityEdge, Rule, edge_rule


class _RoceIndex:
    """Owners of hosts and of the leaf's ports, and the segments by owner and route target."""

    def __init__(self, snapshot: RoceSnapshot, leaf: str) -> None:
        self.snapshot = snapshot
        self.leaf = leaf
        self.grants = frozenset(snapshot.grants)
        self.peerings = allowed_peerings(snapshot.policy, snapshot.tenants, snapshot.peerings)
        owners = {n.name: n.owners for n in snapshot.nodes}
        self.port_node = {nic.port: nic.node for nic in snapshot.nics if nic.switch == leaf}
        self.port_owner = {
            port: (owners.get(node) or (Owner.unassigned(node),))[0]
            for port, node in self.port_node.items()
        }
        self.by_rt: dict[str, VrfSegment] = {
            route_target(snapshot.fabric.rt_asn, s.l3vni): s for s in snapshot.segments
        }

    def ports_of(self, owner: Owner) -> set[str]:
        return {port for port, holder in self.port_owner.items() if holder == owner}

    def endpoint(self, owner: Owner, port: str | None) -> Endpoint:
        node = self.port_node.get(port, "?") if port else "?"
        return Endpoint(0, node, owner, f"{self.leaf}:{port}" if port else None)


def audit_config_db(intended: RoceSnapshot, leaf: str, text: str) -> AuditReport:
    """Audit a leaf's deployed config_db.json: VLAN members per segment against intent.

    Raises:
        InputFormatError: the document is not a config_db.json (from `parse_config_db`).
    """
    parsed = parse_config_db(text)
    index = _RoceIndex(intended, leaf)
    deployed: dict[int, set[str]] = defaultdict(set)
    for member in parsed.vlan_members:
        deployed[member.vlan].add(member.port)
    by_vlan = {s.vlan: s for s in intended.segments}
    drift = []
    for vlan in sorted(by_vlan.keys() | deployed.keys()):
        segment = by_vlan.get(vlan)
        want = index.ports_of(segment.owner) if segment else set()
        have = deployed.get(vlan, set())
        if want != have:
            owner = str(segment.owner) if segment else None
            drift.append(Drift(owner, f"Vlan{vlan}", _ports(have - want), _ports(want - have)))
    counterexamples = tuple(_vlan_counterexamples(index, by_vlan, deployed))
    identity = _other_device(
        intended, leaf, parsed.hostname, parsed.bgp_asn, set(parsed.loopback_addresses)
    )
    edges = tuple(sorted(set(_vlan_edges(index, by_vlan, deployed)), key=_edge_key))
    return AuditReport((*identity, *parsed.findings), tuple(drift), counterexamples, edges)


def _ports(ports: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(ports, key=lambda p: (len(p), p)))


def _vlan_edges(
    index: _RoceIndex, by_vlan: dict[int, VrfSegment], deployed: dict[int, set[str]]
) -> Iterator[ReachabilityEdge]:
    """Another owner's port in a segment's VLAN that intent allows there: an L2 edge."""
    for vlan, ports in deployed.items():
        segment = by_vlan.get(vlan)
        for port in ports:
            holder = index.port_owner.get(port)
            if holder is None or segment is None or segment.owner == holder:
                continue
            if is_allowed_edge(segment.owner, holder, index.grants, index.peerings):
                yield ReachabilityEdge(segment.owner, holder, segment.l2vni, True)


def _vlan_counterexamples(
    index: _RoceIndex, by_vlan: dict[int, VrfSegment], deployed: dict[int, set[str]]
) -> Iterator[Counterexample]:
    for vlan, ports in sorted(deployed.items()):
        segment = by_vlan.get(vlan)
        for port in _ports(ports):
            holder = index.port_owner.get(port)
            if holder is None or segment is None or segment.owner == holder:
                continue
            if is_allowed_edge(segment.owner, holder, index.grants, index.peerings):
                continue
            own = sorted(index.ports_of(segment.owner))
            yield Counterexample(
                edge_rule(segment.owner, holder),
                f"{holder}'s port {index.leaf}:{port} is a member of Vlan{vlan} of "
                f"{segment.owner} (L2VNI {segment.l2vni})",
                segment.l2vni,
                index.endpoint(segment.owner, own[0] if own else None),
                index.endpoint(holder, port),
            )


def audit_frr(intended: RoceSnapshot, leaf: str, text: str) -> AuditReport:
    """Audit a leaf's deployed frr.conf: each VRF's route-target imports against intent."""
    parsed = parse_frr_conf(text)
    index = _RoceIndex(intended, leaf)
    rt_asn = intended.fabric.rt_asn
    by_vrf = {s.vrf: s for s in intended.segments}
    deployed = {b.vrf: set(b.rt_imports) for b in parsed.bgp if b.vrf is not None}
    drift = []
    counterexamples: list[Counterexample] = []
    for vrf in sorted(by_vrf.keys() | deployed.keys()):
        segment = by_vrf.get(vrf)
        want = _intended_imports(segment, rt_asn) if segment else set()
        have = deployed.get(vrf, set())
        if want != have:
            owner = str(segment.owner) if segment else None
            drift.append(Drift(owner, vrf, tuple(sorted(have - want)), tuple(sorted(want - have))))
        if segment is not None:
            counterexamples.extend(_import_counterexamples(index, segment, have - want))
    identity = _other_device(intended, leaf, *_frr_identity(parsed))
    granted = _granted_imports(index, by_vrf, deployed)
    findings = (*identity, *_ungranted_findings(parsed.findings, granted))
    edges = tuple(sorted({edge for edge, _ in granted.values()}, key=_edge_key))
    return AuditReport(findings, tuple(drift), tuple(counterexamples), edges)


def _granted_imports(
    index: _RoceIndex, by_vrf: dict[str, VrfSegment], deployed: dict[str, set[str]]
) -> dict[str, tuple[ReachabilityEdge, str]]:
    """Imports the file has that intent grants, by ``<vrf>|<rt>``: each one is an allowed edge."""
    granted = {}
    for vrf, imports in deployed.items():
        segment = by_vrf.get(vrf)
        for rt in imports:
            source = index.by_rt.get(rt)
            if segment is None or source is None or source.owner == segment.owner:
                continue
            if is_allowed_edge(segment.owner, source.owner, index.grants, index.peerings):
                edge = ReachabilityEdge(segment.owner, source.owner, source.l3vni, True)
                granted[f"{vrf}|{rt}"] = (edge, rt)
    return granted


def _ungranted_findings(
    findings: tuple[Finding, ...], granted: dict[str, tuple[ReachabilityEdge, str]]
) -> tuple[Finding, ...]:
    # An import without export is the shape of a route leak; a granted leak is intended, and is
    # reported as reachability, not as a finding.
    return tuple(
        f for f in findings if not (f.code == "import-without-export" and f.key in granted)
    )


def _edge_key(edge: ReachabilityEdge) -> tuple[tuple[int, str], tuple[int, str], int]:
    return (edge.source.sort_key, edge.target.sort_key, edge.segment)


def _frr_identity(parsed: ParsedFrr) -> tuple[str | None, str | None, set[str]]:
    """Hostname, default-instance ASN, and the addresses in the router-id and every RD."""
    default = parsed.instance(None)
    addresses = {b.router_id for b in parsed.bgp if b.router_id}
    rds = [b.rd for b in parsed.bgp] + [v.rd for b in parsed.bgp for v in b.vnis]
    addresses |= {rd.rpartition(":")[0] for rd in rds if rd and rd_rt_type(rd) == "type1"}
    return parsed.hostname, str(default.asn) if default else None, addresses


def _other_device(
    intended: RoceSnapshot, leaf: str, hostname: str | None, asn: str | None, addresses: set[str]
) -> tuple[Finding, ...]:
    """A critical finding when the file names another device than `leaf`.

    A leaf's file carries its identity: hostname, BGP ASN, and its loopback/VTEP addresses (in
    the loopbacks, router-id and type-1 RDs). Another leaf's file can look isolated on its own.
    """
    switch = next((s for s in intended.switches if s.name == leaf), None)
    if switch is None:
        return ()
    own = {str(switch.loopback), str(switch.vtep)} - {"None"}
    wrong = [f"hostname {hostname}"] if hostname is not None and hostname != leaf else []
    wrong += [f"ASN {asn}"] if asn is not None and asn != str(switch.asn) else []
    wrong += [f"address {address}" for address in sorted(addresses - own)]
    if not wrong:
        return ()
    message = (
        f"the file is not {leaf}'s ({', '.join(wrong)}; {leaf} is ASN {switch.asn}, "
        f"{', '.join(sorted(own))}): a file for another device"
    )
    return (Finding("other-device", Severity.CRITICAL, message),)


def _intended_imports(segment: VrfSegment, rt_asn: int) -> set[str]:
    return {route_target(rt_asn, segment.l3vni), *segment.imports}


def _import_counterexamples(
    index: _RoceIndex, segment: VrfSegment, extra: set[str]
) -> Iterator[Counterexample]:
    for rt in sorted(extra):
        source = index.by_rt.get(rt)
        mine = sorted(index.ports_of(segment.owner))
        a = index.endpoint(segment.owner, mine[0] if mine else None)
        if source is None:
            yield Counterexample(
                Rule.ROUTE_LEAK,
                f"{segment.vrf} of {segment.owner} imports route target {rt}, which no "
                "segment of the fabric exports and no grant backs",
                segment.l3vni,
                a,
            )
        elif not is_allowed_edge(segment.owner, source.owner, index.grants, index.peerings):
            theirs = sorted(index.ports_of(source.owner))
            yield Counterexample(
                edge_rule(segment.owner, source.owner),
                f"{segment.vrf} of {segment.owner} imports {rt} of {source.owner} "
                f"({source.vrf}) without a grant",
                segment.l3vni,
                a,
                index.endpoint(source.owner, theirs[0] if theirs else None),
            )


def observed_counterexamples(
    intended: RoceSnapshot, leaf: str, members: dict[int, set[str]], imports: Mapping[str, Any]
) -> tuple[Counterexample, ...]:
    """Violations of a leaf's observed VLAN members (VLAN ID -> ports) and VRF RT imports."""
    index, rt_asn = _RoceIndex(intended, leaf), intended.fabric.rt_asn
    found = list(_vlan_counterexamples(index, {s.vlan: s for s in intended.segments}, members))
    for segment in intended.segments:
        extra = set(imports.get(segment.vrf, ())) - _intended_imports(segment, rt_asn)
        found.extend(_import_counterexamples(index, segment, extra))
    return tuple(found)
