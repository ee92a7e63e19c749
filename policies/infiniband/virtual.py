"""Memberships of virtual GUIDs: the ones no read-back can confirm.

A collector reads CA ports' P_Key tables (``smpquery pkeys``); a virtual GUID's memberships live
in its vport's table, which NVIDIA's SM programs (docs/facts/infiniband.md §5) and which no
read-back of isofabric sees. The service shows each of them as ``unobserved`` in verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.infiniband.model import IbSnapshot


@dataclass(frozen=True, slots=True, order=True)
class UnobservedMembership:
    """A virtual GUID's membership in a partition: its key and name, its tenant, full or not."""

    guid: int
    pkey: int
    partition: str
    tenant: str
    full: bool


def unobserved_memberships(snapshot: IbSnapshot) -> tuple[UnobservedMembership, ...]:
    """Every membership of a bound virtual GUID in the snapshot's partitions, by GUID and key.

    `tenant` is the tenant the virtual GUID is bound to (`IbSnapshot.virtual_guids`).
    """
    bound = {v.guid: v.tenant for v in snapshot.virtual_guids}
    found = {
        UnobservedMembership(m.guid, p.pkey, p.name, bound[m.guid], m.full)
        for p in snapshot.partitions
        for m in p.members
        if m.guid in bound
    }
    return tuple(sorted(found))
