"""InfiniBand isolation verification: the reachability the partitions allow, compared with intent.

Semantics (docs/facts/infiniband.md §1.3): two ports can communicate iff they share a partition
(15-bit key) and at least one of them is a full member. Intent (DESIGN.md): every owner reaches
itself and tenants reach the services they were granted; nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from functools import cached_property

from policies.infiniband.model import (
    DEFAULT_PKEY,
    PKEY_BASE_MASK,
    IbPort,
    IbSnapshot,
    Member,
    Partition,
    format_guid,
    format_pkey,
)
from policies.intent import is_allowed_edge
from policies.model import NodeRole, Owner
from policies.policy import Peering
from policies.policy_rules import LeafPort, PolicyInputs, allowed_peerings, policy_violations
from policies.verdict import (
    IB_RULES,
    Counterexample,
    Endpoint,
    ReachabilityEdge,
    Rule,
    Verdict,
    capped,
    edge_rule,
)


class _Index:
    """Lookups shared by the rules: port by GUID and the owner each port belongs to."""

    def __init__(self, snapshot: IbSnapshot) -> None:
        self.snapshot = snapshot
        self.port = {p.guid: p for p in snapshot.ports}
        self.node_role = {n.name: n.role for n in snapshot.nodes}
        # One owner value per host, shared by its ports (a host has 8 HCAs on the benchmark).
        node_owner = {n.name: n.owners[0] for n in snapshot.nodes if n.owners}
        self.owner: dict[int, Owner] = {}
        for port in snapshot.ports:
            owner = node_owner.get(port.node)
            if owner is None:
                owner = node_owner[port.node] = Owner.unassigned(port.node)
            self.owner[port.guid] = owner
        self.grants = frozenset(snapshot.grants)
        self.peerings = allowed_peerings(snapshot.policy, snapshot.tenants, snapshot.peerings)

    def endpoint(self, guid: int) -> Endpoint:
        port = self.port.get(guid)
        node = port.node if port else "?"
        return Endpoint(guid, node, self.owner.get(guid, Owner.unassigned(node)))

    @cached_property
    def first_port(self) -> dict[Owner, IbPort]:
        """Each owner's first port: its first node by name, that node's lowest GUID."""
        owners = {node.name: node.owners for node in self.snapshot.nodes}
        first: dict[Owner, IbPort] = {}
        for port in sorted(self.snapshot.ports, key=lambda p: (p.node, p.guid)):
            for owner in owners.get(port.node, ()):
                first.setdefault(owner, port)
        return first

    def owner_endpoint(self, owner: Owner) -> Endpoint:
        """`owner`'s first port (``?`` when it holds none in the snapshot)."""
        port = self.first_port.get(owner)
        return Endpoint(port.guid, port.node, owner) if port else Endpoint(0, "?", owner)

    @cached_property
    def own_key(self) -> dict[Owner, int]:
        """The P_Key of each owner's own partition (peering partitions aside)."""
        keys: dict[Owner, int] = {}
        for p in self.snapshot.partitions:
            if p.peering is None:
                keys.setdefault(p.owner, p.pkey)
        return keys

    @cached_property
    def peering_key(self) -> dict[Peering, int]:
        """The P_Key of each peering's shared partition."""
        return {p.peering: p.pkey for p in self.snapshot.partitions if p.peering is not None}


def verify_isolation(snapshot: IbSnapshot, *, digest: str | None = None) -> Verdict:
    """Check that the snapshot's partitions isolate tenants exactly as intended.

    Property: for every pair of distinct owners that share a partition with at least one full
    member between them, the pair is allowed by intent (a tenant and a service it was granted).
    Also checked: nodes held by two owners, management nodes held at all, tenant ports that are
    full members of the default partition, the per-port P_Key budget (counting 0x7fff), keys
    that are invalid, outside the fabric's range, duplicated, or list unknown ports, and the
    snapshot's policy (policies.policy_rules; a leaf is the switch an HCA port is cabled to).
    Two tenants in an accepted peering the policy allows are an intended edge.

    Args:
        snapshot: the fabric, or a part of it.
        digest: the digest the verdict reports; the snapshot's own when None. A caller that
            verifies part of a fabric reports the whole fabric's and need not hash the part.

    Returns:
        A `Verdict`; it never raises for a violating snapshot. `reachability` lists every
        cross-owner edge once (sorted), allowed or not.
    """
    index = _Index(snapshot)
    edges = sorted(set(_edges(index)), key=_edge_order)
    found: list[Counterexample] = []
    for check in (
        _edge_violations(index, edges),
        _ownership_violations(index),
        _default_partition_violations(index),
        _key_violations(index),
        _budget_violations(index),
        policy_violations(_policy_inputs(index)),
    ):
        found.extend(capped(check))
    return Verdict(
        holds=not found,
        snapshot_digest=snapshot.digest if digest is None else digest,
        counterexamples=tuple(found),
        reachability=tuple(edge for edge, _, _ in edges),
        rules=IB_RULES,
    )


Witnessed = tuple[ReachabilityEdge, int, int]


def _edges(index: _Index) -> Iterator[Witnessed]:
    """Yield each cross-owner edge with a witness port pair (first GUID on the source side)."""
    for partition in index.snapshot.partitions:
        yield from _partition_edges(index, partition.pkey & PKEY_BASE_MASK, partition.members)
    if index.snapshot.default_full:
        full = set(index.snapshot.default_full)
        everyone = [Member(guid, guid in full) for guid in index.port]
        yield from _partition_edges(index, DEFAULT_PKEY, tuple(everyone))


def _partition_edges(index: _Index, pkey: int, members: tuple[Member, ...]) -> Iterator[Witnessed]:
    full: dict[Owner, int] = {}
    limited: dict[Owner, int] = {}
    for member in members:
        owner = index.owner.get(member.guid)
        if owner is None or _is_infrastructure(index, member.guid):
            continue
        (full if member.full else limited).setdefault(owner, member.guid)
    limited = {owner: guid for owner, guid in limited.items() if owner not in full}
    for owner, guid in full.items():
        for other, other_guid in (*full.items(), *limited.items()):
            if other != owner and (other not in full or owner < other):
                yield _edge(index, owner, guid, other, other_guid, pkey)


def _is_infrastructure(index: _Index, guid: int) -> bool:
    # OpenSM: the SM and infrastructure hosts are full members of 0x7fff by design (SELF=full).
    port = index.port.get(guid)
    return port is not None and index.node_role.get(port.node) is NodeRole.MANAGEMENT


def _edge(index: _Index, a: Owner, a_guid: int, b: Owner, b_guid: int, pkey: int) -> Witnessed:
    if b < a:
        a, a_guid, b, b_guid = b, b_guid, a, a_guid
    allowed = is_allowed_edge(a, b, index.grants, index.peerings)
    return ReachabilityEdge(a, b, pkey, allowed), a_guid, b_guid


def _edge_order(witnessed: Witnessed) -> tuple[tuple[int, str], tuple[int, str], int, int, int]:
    edge, a_guid, b_guid = witnessed
    return edge.source.sort_key, edge.target.sort_key, edge.segment, a_guid, b_guid


def _edge_violations(index: _Index, edges: list[Witnessed]) -> Iterator[Counterexample]:
    for edge, a_guid, b_guid in edges:
        if edge.allowed:
            continue
        rule = edge_rule(edge.source, edge.target)
        yield Counterexample(
            rule,
            f"{edge.source} and {edge.target} can communicate through partition "
            f"{format_pkey(edge.segment)}",
            edge.segment,
            index.endpoint(a_guid),
            index.endpoint(b_guid),
        )


def _ownership_violations(index: _Index) -> Iterator[Counterexample]:
    first_port: dict[str, IbPort] = {}
    for port in index.snapshot.ports:
        first_port.setdefault(port.node, port)
    for node in index.snapshot.nodes:
        first = first_port.get(node.name)
        guid = first.guid if first else 0
        if len(node.owners) > 1:
            a, b = node.owners[0], node.owners[1]
            yield Counterexample(
                Rule.NODE_SHARED,
                f"node {node.name} is held by both {a} and {b}",
                None,
                Endpoint(guid, node.name, a),
                Endpoint(guid, node.name, b),
            )
        if node.role is NodeRole.MANAGEMENT and node.owners:
            yield Counterexample(
                Rule.MANAGEMENT_ASSIGNED,
                f"management node {node.name} is held by {node.owners[0]}",
                None,
                Endpoint(guid, node.name, node.owners[0]),
            )


def _default_partition_violations(index: _Index) -> Iterator[Counterexample]:
    for guid in sorted(index.snapshot.default_full):
        if _is_infrastructure(index, guid):
            continue
        endpoint = index.endpoint(guid)
        yield Counterexample(
            Rule.DEFAULT_PARTITION_FULL,
            f"port {format_guid(guid)} of {endpoint.owner} is a full member of the default "
            f"partition {format_pkey(DEFAULT_PKEY)} and can reach every port",
            DEFAULT_PKEY,
            endpoint,
        )


def _key_violations(index: _Index) -> Iterator[Counterexample]:
    fabric = index.snapshot.fabric
    seen: dict[int, Partition] = {}
    for partition in index.snapshot.partitions:
        key, base = partition.pkey, partition.pkey & PKEY_BASE_MASK
        if key != base or base in (0, DEFAULT_PKEY):
            yield _key_example(Rule.PKEY_INVALID, partition, "is not a valid tenant P_Key")
        elif not fabric.pkey_first <= key <= fabric.pkey_last:
            yield _key_example(
                Rule.PKEY_OUT_OF_RANGE,
                partition,
                f"is outside the fabric range {format_pkey(fabric.pkey_first)}-"
                f"{format_pkey(fabric.pkey_last)}",
            )
        if base in seen:
            other = seen[base].owner
            yield _key_example(Rule.PKEY_DUPLICATE, partition, f"is also used by {other}")
        seen.setdefault(base, partition)
        yield from _unknown_members(index, partition)


def _key_example(rule: Rule, partition: Partition, problem: str) -> Counterexample:
    return Counterexample(
        rule, f"P_Key {format_pkey(partition.pkey)} of {partition.owner} {problem}", partition.pkey
    )


def _unknown_members(index: _Index, partition: Partition) -> Iterator[Counterexample]:
    for member in partition.members:
        if member.guid not in index.port:
            yield Counterexample(
                Rule.UNKNOWN_MEMBER,
                f"partition {format_pkey(partition.pkey)} of {partition.owner} lists port "
                f"{format_guid(member.guid)}, which is not in the fabric",
                partition.pkey,
            )


def _budget_violations(index: _Index) -> Iterator[Counterexample]:
    # OpenSM installs keys that do not fit the table in no defined order and logs only ERR 0512
    # (docs/facts/infiniband.md §2.3), so an over-budget port silently loses memberships.
    budget = index.snapshot.fabric.pkeys_per_port
    counts: Counter[int] = Counter()
    for partition in index.snapshot.partitions:
        counts.update({m.guid for m in partition.members})
    for guid, count in sorted(counts.items()):
        if count + 1 > budget:  # +1: every port also holds the default partition 0x7fff
            yield Counterexample(
                Rule.PKEY_BUDGET,
                f"port {format_guid(guid)} needs {count + 1} P_Keys (default partition included)"
                f" but the fabric allows {budget} per port",
                None,
                index.endpoint(guid),
            )


def _policy_inputs(index: _Index) -> PolicyInputs:
    snapshot = index.snapshot
    return PolicyInputs(
        policy=snapshot.policy,
        tenants=snapshot.tenants,
        peerings=snapshot.peerings,
        grants=snapshot.grants,
        cabling=_cabling(index),
        endpoint=index.owner_endpoint,
        segment=index.own_key.get,
        peering_segment=index.peering_key.get,
    )


def _cabling(index: _Index) -> Iterator[LeafPort]:
    """Every HCA port cabled to a switch, once per owner of its node."""
    owners = {node.name: node.owners for node in index.snapshot.nodes}
    for port in index.snapshot.ports:
        if port.switch is not None:
            for owner in owners.get(port.node, ()):
                yield port.switch, Endpoint(port.guid, port.node, owner)
