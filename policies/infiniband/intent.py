"""The partitions intent asks for on InfiniBand, derived from ownership and grants.

The memberships follow reference/infiniband.md §1.3: a tenant's ports are full members of the
tenant's partition; a shared service's ports are full members of the service partition, and the
ports of every tenant granted that service are limited members of it (limited talks only to full,
so two granted tenants still cannot reach each other through the service partition).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from policies.infiniband.model import IbPort, Member, Partition
from policies.model import Grant, Node, Owner


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
) -> tuple[Partition, ...]:
    """Derive every tenant and service partition with its members from ownership and grants.

    Args:
        nodes: hosts with their owners.
        ports: HCA ports of those hosts.
        tenant_keys: tenant name -> (P_Key, QoS class name) for tenants holding a partition.
        service_keys: service name -> P_Key.
        grants: which tenants may reach which services.

    Returns:
        Partitions sorted by key; members sorted by GUID. Tenants and services without a key get
        no partition (their ports stay in the default partition only).
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
    return tuple(sorted(partitions, key=lambda p: p.pkey))


def _members(guids: Iterable[int], *, full: bool) -> tuple[Member, ...]:
    return tuple(Member(guid, full) for guid in sorted(guids))
