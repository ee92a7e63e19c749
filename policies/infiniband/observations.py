"""Compare the P_Key tables read from a live InfiniBand fabric with the fabric's intent.

A collector (``isofabric collect ib``) reads every CA port's P_Key table with ``smpquery
pkeys``. Each entry is a 16-bit P_Key: the low 15 bits name the partition, bit 15 is full
membership (docs/facts/infiniband.md §1.3). From those tables this module builds the snapshot the
live fabric *is*: the intended snapshot's ownership (nodes, ports, grants) with partitions taken
from the observed tables, so that `verify_isolation` finds every cross-owner reachability the
tables allow. It also reports, per port, the keys intended but absent and present but not
intended.

It is pure (stdlib only, no I/O).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace

from policies.infiniband.model import (
    DEFAULT_PKEY,
    PKEY_BASE_MASK,
    PKEY_FULL_BIT,
    IbSnapshot,
    Member,
    Partition,
    format_pkey,
)
from policies.infiniband.verify import verify_isolation
from policies.model import NodeRole, Owner
from policies.verdict import Verdict


@dataclass(frozen=True, slots=True)
class PortDrift:
    """One port whose live table differs from intent; keys as 16-bit P_Keys (bit 15 = full)."""

    guid: int
    node: str
    owner: Owner
    missing: tuple[int, ...]
    unexpected: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ObservationReport:
    """Per-port drift and the verdict on the snapshot the live tables describe."""

    ports: tuple[PortDrift, ...]
    verdict: Verdict

    @property
    def holds(self) -> bool:
        """True iff the live tables allow no isolation violation."""
        return self.verdict.holds


def intended_tables(snapshot: IbSnapshot) -> dict[int, set[int]]:
    """The P_Keys each CA port should hold.

    Its memberships, and 0x7fff: limited, or full if the port is listed in `default_full`.
    Virtual GUIDs have no table here: their vport's table is not a CA port's that a collector
    reads (`policies.infiniband.virtual`).
    """
    tables: dict[int, set[int]] = {p.guid: set() for p in snapshot.ports}
    full_default = set(snapshot.default_full)
    for guid, keys in tables.items():
        keys.add(DEFAULT_PKEY | PKEY_FULL_BIT if guid in full_default else DEFAULT_PKEY)
    virtual = _virtual_only(snapshot)
    for partition in snapshot.partitions:
        for member in partition.members:
            if member.guid in virtual:
                continue
            key = (partition.pkey & PKEY_BASE_MASK) | (PKEY_FULL_BIT if member.full else 0)
            tables.setdefault(member.guid, set()).add(key)
    return tables


def observed_snapshot(intended: IbSnapshot, tables: Mapping[int, Iterable[int]]) -> IbSnapshot:
    """The intended snapshot with partitions and default-partition members read from `tables`.

    A key is full on a port if any of its entries there has bit 15 set. Entries with base 0 are
    empty slots and ignored. A partition keeps the owner, QoS class, peering, label and flags of
    the intended partition with that key; an unknown key is owned by nobody
    (``unassigned:0x....``). Virtual GUIDs cannot be observed: no membership of theirs is kept.
    """
    virtual = _virtual_only(intended)
    members: dict[int, dict[int, bool]] = {}
    for guid, keys in tables.items():
        if guid in virtual:
            continue
        for key in keys:
            base = key & PKEY_BASE_MASK
            if base:
                held = members.setdefault(base, {})
                held[guid] = held.get(guid, False) or bool(key & PKEY_FULL_BIT)
    default = members.pop(DEFAULT_PKEY, {})
    by_key = {p.pkey: p for p in intended.partitions}
    partitions = []
    for base, held in sorted(members.items()):
        known = by_key.get(base)
        seen = tuple(sorted(Member(g, full) for g, full in held.items()))
        if known is None:
            partitions.append(Partition(base, Owner.unassigned(format_pkey(base)), seen))
        else:
            partitions.append(replace(known, pkey=base, members=seen))
    default_full = tuple(sorted(g for g, full in default.items() if full))
    return replace(intended, partitions=tuple(partitions), default_full=default_full)


def compare_observation(
    intended: IbSnapshot,
    tables: Mapping[int, Iterable[int]],
    unobserved: Collection[int] = frozenset(),
) -> ObservationReport:
    """Per-port drift of the live `tables` (port GUID -> P_Keys) and their isolation verdict.

    Ports of management nodes are not compared on 0x7fff: the Subnet Manager's own port is a
    full member there by design (``SELF=full``). A port in `unobserved` and not in `tables`
    (the collector could not read it) has no drift: its table is unknown, not empty. It is in
    no partition of the snapshot the verdict judges, so it adds no reachability: the verdict
    covers the observed ports only.
    """
    observed = {guid: set(keys) for guid, keys in tables.items()}
    want = intended_tables(intended)
    unknown = set(unobserved) - observed.keys()
    ports = {p.guid: p for p in intended.ports}
    roles = {n.name: n for n in intended.nodes}
    drift = []
    for guid in sorted((want.keys() | observed.keys()) - unknown - _virtual_only(intended)):
        port = ports.get(guid)
        node = roles.get(port.node) if port else None
        have = {k for k in observed.get(guid, set()) if k & PKEY_BASE_MASK}
        expected = want.get(guid, set())
        if node is not None and node.role is NodeRole.MANAGEMENT:
            have = {k for k in have if k & PKEY_BASE_MASK != DEFAULT_PKEY}
            expected = {k for k in expected if k & PKEY_BASE_MASK != DEFAULT_PKEY}
        if have == expected:
            continue
        name = port.node if port else "?"
        owner = node.owners[0] if node and node.owners else Owner.unassigned(name)
        drift.append(
            PortDrift(
                guid, name, owner, tuple(sorted(expected - have)), tuple(sorted(have - expected))
            )
        )
    verdict = verify_isolation(observed_snapshot(intended, observed))
    return ObservationReport(tuple(drift), verdict)


def _virtual_only(snapshot: IbSnapshot) -> set[int]:
    """The bound virtual GUIDs that are not also a port's GUID."""
    ports = {p.guid for p in snapshot.ports}
    return {v.guid for v in snapshot.virtual_guids if v.guid not in ports}
