"""Audit OpenSM's deployed partitions.conf: the file's memberships in place of the intended ones.

The deployed memberships replace the intended partitions in a copy of the snapshot (the
database's port ownership is kept) and `verify_isolation` judges it; a file OpenSM would discard
makes every CA port a full member of 0x7fff, as OpenSM's fallback does
(docs/facts/infiniband.md §1.6). Pure (stdlib only, no I/O).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from policies.config_audit.report import AuditReport, Drift
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
from policies.model import NodeRole, Owner

# Default's special members that stand for every CA port (partitions.conf(5)).
_FULL_SPECIALS = frozenset({"ALL", "ALL_CAS"})


def deployed_snapshot(intended: IbSnapshot, parsed: ParsedPartitions) -> IbSnapshot:
    """The snapshot with the file's partitions in place of the intended ones.

    Ownership (nodes, ports, grants, virtual GUIDs) is the intended snapshot's. A partition keeps
    the owner, QoS class, peering, label and flags of the intended partition with its key; an
    unknown key is owned by nobody (``unassigned:0x....``). When OpenSM would discard the file,
    or its Default statement makes ALL/ALL_CAS full, every CA port is a full member of 0x7fff.
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
    """The file's members in the intended partition of that key (nobody's when there is none)."""
    listed = tuple(sorted(Member(guid, how == "full") for guid, how in members.items()))
    if intended is None:
        return Partition(key, Owner.unassigned(format_pkey(key)), listed)
    return replace(intended, pkey=key, members=listed)


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
