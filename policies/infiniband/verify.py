"""InfiniBand isolation verification: the reachability the partitions allow, compared with intent.

Semantics (docs/facts/infiniband.md §1.3): two ports can communicate iff they share a partition
(15-bit key) and at least one of them is a full member. Intent (DESIGN.md): every owner reaches
itself and tenants reach the services they were granted; nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.infiniband.model import (
    DEFAULT_PKEY,
    PKEY_BASE_MASK,
    IbPort,
    IbSnapshot,
    Member,
    format_guid,
    format_pkey,
)
from policies.infiniband.verify_index import VerifyIndex
from policies.infiniband.verify_keys import (
    budget_violations,
    foreign_member_violations,
    index0_violations,
    key_violations,
)
from policies.intent import is_allowed_edge
from policies.model import NodeRole, Owner
from policies.policy_rules import LeafPort, PolicyInputs, policy_violations
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


def verify_isolation(snapshot: IbSnapshot, *, digest: str | None = None) -> Verdict:
    """Check that the snapshot's partitions isolate tenants exactly as intended.

    Property: for every pair of distinct owners that share a partition with at least one full
    member between them, the pair is allowed by intent (a tenant and a service it was granted).
    A member is a port (owned by its node's holder) or a virtual GUID (owned by the tenant it is
    bound to), so edges through virtual GUIDs are found like ports'. Also checked: nodes held by
    two owners, management nodes held at all, tenant ports that are full members of the default
    partition, the per-port P_Key budget (counting 0x7fff and every partition of the port, not
    virtual GUIDs), keys that are invalid, outside the fabric's range or duplicated, members
    that are neither ports nor bound virtual GUIDs, members of a tenant's additional partitions
    (explicit members; a default partition's are derived) that the tenant does not hold,
    members of more than one ``indx0`` partition, and the snapshot's policy
    (policies.policy_rules; a leaf is the switch an HCA port is cabled to). Two tenants in an
    accepted peering the policy allows are an intended edge.

    Args:
        snapshot: the fabric, or a part of it.
        digest: the digest the verdict reports; the snapshot's own when None. A caller that
            verifies part of a fabric reports the whole fabric's and need not hash the part.

    Returns:
        A `Verdict`; it never raises for a violating snapshot. `reachability` lists every
        cross-owner edge once (sorted), allowed or not.
    """
    index = VerifyIndex(snapshot)
    edges = sorted(set(_edges(index)), key=_edge_order)
    found: list[Counterexample] = []
    for check in (
        _edge_violations(index, edges),
        _ownership_violations(index),
        _default_partition_violations(index),
        key_violations(index),
        foreign_member_violations(index),
        index0_violations(index),
        budget_violations(index),
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


def _edges(index: VerifyIndex) -> Iterator[Witnessed]:
    """Yield each cross-owner edge with a witness port pair (first GUID on the source side)."""
    for partition in index.snapshot.partitions:
        yield from _partition_edges(index, partition.pkey & PKEY_BASE_MASK, partition.members)
    if index.snapshot.default_full:
        full = set(index.snapshot.default_full)
        everyone = [Member(guid, guid in full) for guid in index.port]
        yield from _partition_edges(index, DEFAULT_PKEY, tuple(everyone))


def _partition_edges(
    index: VerifyIndex, pkey: int, members: tuple[Member, ...]
) -> Iterator[Witnessed]:
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


def _is_infrastructure(index: VerifyIndex, guid: int) -> bool:
    # OpenSM: the SM and infrastructure hosts are full members of 0x7fff by design (SELF=full).
    port = index.port.get(guid)
    return port is not None and index.node_role.get(port.node) is NodeRole.MANAGEMENT


def _edge(index: VerifyIndex, a: Owner, a_guid: int, b: Owner, b_guid: int, pkey: int) -> Witnessed:
    if b < a:
        a, a_guid, b, b_guid = b, b_guid, a, a_guid
    allowed = is_allowed_edge(a, b, index.grants, index.peerings)
    return ReachabilityEdge(a, b, pkey, allowed), a_guid, b_guid


def _edge_order(witnessed: Witnessed) -> tuple[tuple[int, str], tuple[int, str], int, int, int]:
    edge, a_guid, b_guid = witnessed
    return edge.source.sort_key, edge.target.sort_key, edge.segment, a_guid, b_guid


def _edge_violations(index: VerifyIndex, edges: list[Witnessed]) -> Iterator[Counterexample]:
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


def _ownership_violations(index: VerifyIndex) -> Iterator[Counterexample]:
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


def _default_partition_violations(index: VerifyIndex) -> Iterator[Counterexample]:
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


def _policy_inputs(index: VerifyIndex) -> PolicyInputs:
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


def _cabling(index: VerifyIndex) -> Iterator[LeafPort]:
    """Every HCA port cabled to a switch, once per owner of its node."""
    owners = {node.name: node.owners for node in index.snapshot.nodes}
    for port in index.snapshot.ports:
        if port.switch is not None:
            for owner in owners.get(port.node, ()):
                yield port.switch, Endpoint(port.guid, port.node, owner)
