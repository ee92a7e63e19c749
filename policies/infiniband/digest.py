"""The groups of an InfiniBand snapshot's v2 digest (policies/digest).

``fabric``: settings, QoS classes, the default partition's full members, the planner version and
deviations on ports nobody holds. ``node:<name>``: the host's role and ports. ``owner:<owner>``:
the nodes it holds, its partition keys (with QoS class), its grants, and deviations of its ports'
memberships from `plan_partitions`. Memberships themselves are derived, so a tenant's allocation
changes its own group only, never the group of a service it was granted.

A tenant's additional partitions (`Partition.label`) list their members explicitly: each is a
``partitions`` entry of its owner's group, ``[label, pkey, qos_class, ipoib, index0, [[guid,
full], ...]]``, and none is replanned. Virtual GUIDs bound to a tenant are its group's
``virtual_guids``; the fabric's ``virtual_guids`` setting is in the ``fabric`` group when true.
Snapshots without any of these hash exactly as before.

Under a policy other than the default (version 0) the ``fabric`` group also holds the policy's
version and fingerprint and each tenant's group its facts; a peering is in both tenants' groups
(with its partition's key). Snapshots without either hash exactly as before.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from policies.digest import (
    GroupMaker,
    Groups,
    add_policy_facts,
    canonical,
    digest_of,
    holder_facts,
    node_groups,
    owner_groups,
    policy_fields,
)
from policies.infiniband.intent import plan_partitions
from policies.infiniband.model import IbSnapshot, Partition
from policies.model import Owner, OwnerKind
from policies.policy import Peering

# Bump when plan_partitions derives different memberships from the same inputs.
PLANNER_VERSION = "ib-partitions/1"

Deviation = tuple[str, int, int, bool]  # "+" extra / "-" missing, P_Key, port GUID, full


def ib_digest(snapshot: IbSnapshot) -> str:
    """The v2 digest of the whole snapshot."""
    return digest_of(ib_groups(snapshot))


def ib_groups(
    snapshot: IbSnapshot,
    *,
    owners: Iterable[Owner] | None = None,
    nodes: Iterable[str] | None = None,
) -> Groups:
    """The snapshot's digest groups, or those of `owners` and `nodes` (`GroupMaker.groups`)."""
    return _MAKER.groups(snapshot, owners, nodes)


def _fabric_group(snapshot: IbSnapshot) -> bytes:
    fabric = snapshot.fabric
    unowned = _deviations(snapshot).get(None, [])
    return canonical(
        {
            "planner": PLANNER_VERSION,
            "settings": [fabric.name, fabric.kind.value, fabric.pkey_first, fabric.pkey_last],
            "pkeys_per_port": fabric.pkeys_per_port,
            "qos": sorted(
                [q.name, q.ib_sl, q.ib_rate, q.ib_mtu, q.vlarb_weight] for q in snapshot.qos_classes
            ),
            "default_full": sorted(snapshot.default_full),
            "deviations": sorted(unowned),
            **policy_fields(snapshot.policy),
            **({"virtual_guids": True} if fabric.virtual_guids else {}),
        }
    )


def _node_groups(snapshot: IbSnapshot, wanted: set[str] | None) -> Groups:
    ports = ((p.node, [p.guid, p.hca, p.port, p.switch, p.switch_port]) for p in snapshot.ports)
    return node_groups(snapshot.nodes, ports, wanted, "ports")


def _owner_groups(snapshot: IbSnapshot, wanted: set[Owner] | None) -> Groups:
    facts = holder_facts(snapshot.nodes, snapshot.grants, wanted)
    add_policy_facts(facts, snapshot.policy, snapshot.tenants, snapshot.peerings, wanted)
    for partition in snapshot.partitions:
        for key_holder, (label, entry) in _key_entries(partition):
            if wanted is None or key_holder in wanted:
                facts[key_holder][label].append(entry)
    for virtual in snapshot.virtual_guids:
        tenant = Owner.tenant(virtual.tenant)
        if wanted is None or tenant in wanted:
            facts[tenant]["virtual_guids"].append(virtual.guid)
    for holder, deviations in _deviations(snapshot).items():
        if holder is not None and (wanted is None or holder in wanted):
            facts[holder]["deviations"].extend(list(d) for d in deviations)
    return owner_groups(facts)


_MAKER = GroupMaker(_fabric_group, _node_groups, _owner_groups)


def _key_entries(partition: Partition) -> list[tuple[Owner, tuple[str, list[object]]]]:
    """Where a partition's key is recorded: its owner's ``keys``, or both peers'.

    An additional partition is its owner's ``partitions`` entry, with its flags and members.
    """
    peering = partition.peering
    if partition.label is not None and peering is None:
        members = [[m.guid, m.full] for m in sorted(partition.members)]
        entry = [partition.label, partition.pkey, partition.qos_class]
        return [
            (partition.owner, ("partitions", [*entry, partition.ipoib, partition.index0, members]))
        ]
    if peering is None:
        return [(partition.owner, ("keys", [partition.pkey, partition.qos_class]))]
    a, b = Owner.tenant(peering.a), Owner.tenant(peering.b)
    return [
        (a, ("peering_keys", [partition.pkey, peering.b])),
        (b, ("peering_keys", [partition.pkey, peering.a])),
    ]


def _deviations(snapshot: IbSnapshot) -> dict[Owner | None, list[Deviation]]:
    """Memberships that differ from what `plan_partitions` derives, by the port's holder."""
    planned = {(p.pkey, p.owner): p for p in _replan(snapshot)}
    holder = _port_holders(snapshot)
    found: dict[Owner | None, list[Deviation]] = defaultdict(list)
    for partition in _derived(snapshot):
        expected = planned.pop((partition.pkey, partition.owner), None)
        for deviation in _member_changes(partition, expected):
            found[holder.get(deviation[2])].append(deviation)
    for leftover in planned.values():
        for member in leftover.members:
            found[holder.get(member.guid)].append(("-", leftover.pkey, member.guid, member.full))
    return found


def _replan(snapshot: IbSnapshot) -> tuple[Partition, ...]:
    tenant_keys: dict[str, tuple[int, str | None]] = {}
    service_keys: dict[str, int] = {}
    peering_keys: dict[Peering, int] = {}
    for p in _derived(snapshot):
        if p.peering is not None:
            peering_keys.setdefault(p.peering, p.pkey)
        elif p.owner.kind is OwnerKind.TENANT:
            tenant_keys.setdefault(p.owner.name, (p.pkey, p.qos_class))
        elif p.owner.kind is OwnerKind.SERVICE:
            service_keys.setdefault(p.owner.name, p.pkey)
    return plan_partitions(
        snapshot.nodes, snapshot.ports, tenant_keys, service_keys, snapshot.grants, peering_keys
    )


def _derived(snapshot: IbSnapshot) -> list[Partition]:
    """The partitions `plan_partitions` derives: all but additional ones (explicit members)."""
    return [p for p in snapshot.partitions if p.label is None or p.peering is not None]


def _member_changes(actual: Partition, expected: Partition | None) -> list[Deviation]:
    have = set(actual.members)
    want = set(expected.members) if expected is not None else set()
    extra = [("+", actual.pkey, m.guid, m.full) for m in have - want]
    missing = [("-", actual.pkey, m.guid, m.full) for m in want - have]
    return extra + missing


def _port_holders(snapshot: IbSnapshot) -> dict[int, Owner]:
    holders = {n.name: n.owners[0] for n in snapshot.nodes if n.owners}
    return {p.guid: holders[p.node] for p in snapshot.ports if p.node in holders}
