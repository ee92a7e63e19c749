"""The partitions intent asks for on InfiniBand, derived from ownership and grants.

The memberships follow docs/facts/infiniband.md §1.3: a tenant's ports are full members of the
tenant's partition; a shared service's ports are full members of the service partition, and the
ports of every tenant granted that service are limited members of it (limited talks only to full,
so two granted tenants still cannot reach each other through the service partition). An accepted
peering with a key is a shared partition in which the ports of both tenants are full members.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from policies.infiniband.model import IbPort, Member, Partition
from policies.model import Grant, Node, Owner
from policies.policy import Peering


def ports_by_owner(nodes: Iterable[Node], ports: Iterable[IbPort]) -> dict[Owner, list[int]]:
    """Group port GUIDs by every owner of their node (a shared node counts for each owner)."""
    owners_of_node = {node.name: node.owners for node in nodes}
    grouped: dict[Owner, list[int]] = defaultdict(list)
    for port in ports:
        for owner in owners_of_node.get(port.node, ()):
            grouped[owner].append(port.guid)
    return grouped


def plan_partitions(
    nodes: Iterable[Node],
    ports: Iterable[IbPort],
    tenant_keys: Mapping[str, tuple[int, str | None]],
    service_keys: Mapping[str, int],
    grants: Iterable[Grant],
    peering_keys: Mapping[Peering, int] | None = None,
) -> tuple[Partition, ...]:
    """Derive every tenant and service partition with its members from ownership and grants.

    Args:
        nodes: hosts with their owners.
        ports: HCA ports of those hosts.
        tenant_keys: tenant name -> (P_Key, QoS class name) for tenants holding a partition.
        service_keys: service name -> P_Key.
        grants: which tenants may reach which services.
        peering_keys: accepted peering -> the P_Key of its shared partition (owned by the
            peering's first tenant, no QoS class).

    Returns:
        Partitions sorted by key; members sorted by GUID. Tenants, services and peerings without
        a key get no partition (their ports stay in the default partition only).
    """
    owned = ports_by_owner(nodes, ports)
    granted: dict[str, list[str]] = defaultdict(list)
    for grant in grants:
        granted[grant.service].append(grant.tenant)
    partitions = [
        Partition(pkey, Owner.tenant(name), _members(owned[Owner.tenant(name)], full=True), qos)
        for name, (pkey, qos) in tenant_keys.items()
    ]
    for name, pkey in service_keys.items():
        members = _members(owned[Owner.service(name)], full=True)
        for tenant in granted[name]:
            members += _members(owned[Owner.tenant(tenant)], full=False)
        partitions.append(Partition(pkey, Owner.service(name), tuple(sorted(members))))
    for peering, pkey in (peering_keys or {}).items():
        partitions.append(_peering_partition(owned, peering, pkey))
    return tuple(sorted(partitions, key=lambda p: p.pkey))


def _peering_partition(owned: Mapping[Owner, list[int]], peering: Peering, pkey: int) -> Partition:
    # docs/facts/infiniband.md §1.3: full members reach each other, so both sides are full.
    guids = {*owned.get(Owner.tenant(peering.a), ()), *owned.get(Owner.tenant(peering.b), ())}
    members = _members(guids, full=True)
    return Partition(pkey, Owner.tenant(peering.a), members, peering=peering)


def _members(guids: Iterable[int], *, full: bool) -> tuple[Member, ...]:
    return tuple(Member(guid, full) for guid in sorted(guids))
