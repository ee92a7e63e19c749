"""Audit a deployed config file against the fabric's intent: findings, drift, counterexamples.

Three formats are audited: OpenSM's ``partitions.conf`` (InfiniBand), and a SONiC leaf's
``config_db.json`` or ``frr.conf`` (RoCE). Each audit reports

* findings: the parser's findings (constructs the software fails open on or misreads);
* drift: per owner and segment, what the file adds to or lacks from the intended state;
* counterexamples: isolation violations the deployed file allows. For partitions.conf the
  deployed memberships replace the intended partitions in a copy of the snapshot (the database's
  port ownership is kept) and `verify_isolation` judges it; a file OpenSM would discard makes
  every CA port a full member of 0x7fff, as OpenSM's fallback does (docs/facts/infiniband.md
  §1.6). For config_db.json and frr.conf they are derived from the parsed facts: another owner's
  port in a segment's VLAN, or a route-target import that no grant backs.

It is pure (stdlib only, no I/O).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from policies.findings import Finding, Severity
from policies.infiniband.model import (
    DEFAULT_PKEY,
    IbSnapshot,
    Member,
    Partition,
    format_guid,
    format_pkey,
)
from policies.infiniband.parse_partitions import (
    ParsedPartitions,
    memberships,
    parse_partitions_conf,
)
from policies.infiniband.verify import verify_isolation
from policies.intent import is_allowed_edge
from policies.model import NodeRole, Owner
from policies.policy_rules import allowed_peerings
from policies.roce.model import RoceSnapshot, VrfSegment, route_target
from policies.roce.parse_config_db import parse_config_db
from policies.roce.parse_frr import ParsedFrr, parse_frr_conf, rd_rt_type
from policies.verdict import Counterexample, Endpoint, ReachabilityEdge, Rule, edge_rule

_FULL_SPECIALS = frozenset({"ALL", "ALL_CAS"})


class AuditFormat(StrEnum):
    """The configuration files an audit accepts."""

    PARTITIONS = "partitions"
    CONFIG_DB = "config_db"
    FRR = "frr"


# What an audit's reachability is derived from, per format: an empty list means "none of this".
REACHABILITY_SCOPE = {
    AuditFormat.PARTITIONS: "every P_Key's members (the whole fabric)",
    AuditFormat.CONFIG_DB: "this leaf's VLAN members (L2 only: routed reachability is in the "
    "leaf's frr.conf)",
    AuditFormat.FRR: "this leaf's VRF route-target imports",
}


@dataclass(frozen=True, slots=True)
class Drift:
    """What the file adds to (`added`) or lacks from (`missing`) one owner's segment.

    `owner` is ``tenant:acme`` (None for a segment no owner holds); `segment` is the P_Key
    (``0x0101``), the VLAN (``Vlan102``) or the VRF (``Vrf50001``). Items are port GUIDs, switch
    ports or route targets; `changed` lists GUIDs whose membership (full/limited) differs.
    """

    owner: str | None
    segment: str
    added: tuple[str, ...]
    missing: tuple[str, ...]
    changed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AuditReport:
    """The outcome of one audit; `holds` iff the file allows no isolation violation."""

    findings: tuple[Finding, ...]
    drift: tuple[Drift, ...]
    counterexamples: tuple[Counterexample, ...]
    reachability: tuple[ReachabilityEdge, ...] = ()

    @property
    def holds(self) -> bool:
        """True when no counterexample was found."""
        return not self.counterexamples

    @property
    def critical(self) -> bool:
        """True when any finding is critical."""
        return any(f.severity is Severity.CRITICAL for f in self.findings)


# ---------------------------------------------------------------------------------------------
# InfiniBand: partitions.conf


def deployed_snapshot(intended: IbSnapshot, parsed: ParsedPartitions) -> IbSnapshot:
    """The snapshot with the file's partitions in place of the intended ones.

    Ownership (nodes, ports, grants) is the intended snapshot's. A partition keeps the owner and
    QoS class of the intended partition with its key; an unknown key is owned by nobody
    (``unassigned:0x....``). When OpenSM would discard the file, or its Default statement makes
    ALL/ALL_CAS full, every CA port is a full member of 0x7fff.
    """
    if parsed.fails_open:
        return replace(intended, partitions=(), default_full=_all_ports(intended))
    deployed = memberships(parsed)
    default = deployed.pop(DEFAULT_PKEY, {})
    default_full = {guid for guid, how in default.items() if how == "full"}
    if _default_all_full(parsed):
        default_full |= set(_all_ports(intended))
    by_key = {p.pkey: p for p in intended.partitions}
    partitions = tuple(
        _deployed_partition(key, members, by_key.get(key))
        for key, members in sorted(deployed.items())
    )
    return replace(intended, partitions=partitions, default_full=tuple(sorted(default_full)))


def _all_ports(snapshot: IbSnapshot) -> tuple[int, ...]:
    return tuple(sorted(p.guid for p in snapshot.ports))


def _default_all_full(parsed: ParsedPartitions) -> bool:
    return any(
        member.special in _FULL_SPECIALS and member.membership != "limited"
        for partition in parsed.partitions
        if partition.pkey == DEFAULT_PKEY
        for member in partition.members
    )


def _deployed_partition(key: int, members: dict[int, str], intended: Partition | None) -> Partition:
    owner = intended.owner if intended else Owner.unassigned(format_pkey(key))
    return Partition(
        pkey=key,
        owner=owner,
        members=tuple(sorted(Member(guid, how == "full") for guid, how in members.items())),
        qos_class=intended.qos_class if intended else None,
        peering=intended.peering if intended else None,
    )


def partition_drift(intended: IbSnapshot, deployed: IbSnapshot) -> tuple[Drift, ...]:
    """Per P_Key: GUIDs added, missing or with another membership; 0x7fff: new full members."""
    before = {p.pkey: p for p in intended.partitions}
    after = {p.pkey: p for p in deployed.partitions}
    drift = []
    for key in sorted(before.keys() | after.keys()):
        old = {m.guid: m.full for m in before[key].members} if key in before else {}
        new = {m.guid: m.full for m in after[key].members} if key in after else {}
        item = Drift(
            owner=str(before[key].owner) if key in before else None,
            segment=format_pkey(key),
            added=_guids(new.keys() - old.keys()),
            missing=_guids(old.keys() - new.keys()),
            changed=_guids(g for g in old.keys() & new.keys() if old[g] != new[g]),
        )
        if item.added or item.missing or item.changed:
            drift.append(item)
    extra_full = set(deployed.default_full) - set(intended.default_full) - _infrastructure(deployed)
    if extra_full:
        drift.append(Drift(None, format_pkey(DEFAULT_PKEY), _guids(extra_full), ()))
    return tuple(drift)


def _guids(guids: Iterable[int]) -> tuple[str, ...]:
    return tuple(format_guid(g) for g in sorted(guids))


def _infrastructure(snapshot: IbSnapshot) -> set[int]:
    management = {n.name for n in snapshot.nodes if n.role is NodeRole.MANAGEMENT}
    return {p.guid for p in snapshot.ports if p.node in management}


def audit_partitions(intended: IbSnapshot, text: str) -> AuditReport:
    """Audit a deployed partitions.conf against the fabric's intended snapshot."""
    parsed = parse_partitions_conf(text)
    deployed = deployed_snapshot(intended, parsed)
    verdict = verify_isolation(deployed)
    drift = partition_drift(intended, deployed)
    granted = tuple(e for e in verdict.reachability if e.allowed and e.source != e.target)
    return AuditReport(parsed.findings, drift, verdict.counterexamples, granted)


# ---------------------------------------------------------------------------------------------
# RoCE: config_db.json and frr.conf


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
