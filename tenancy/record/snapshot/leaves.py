"""The leaf neighbours of a change: who else is cabled to the leaves it touches.

Under ``dedicated_leaf`` a change to a tenant can break the rule on any leaf its ports are cabled
to, together with another tenant's port there (policies.policy_rules.dedicated_leaf_violations).
A scoped verdict must therefore hold those other tenants too: all tenants on the leaves of a
touched tenant whose kind is dedicated, and the dedicated tenants on the leaves of any other
touched tenant. A counterexample between two untouched tenants cannot appear (the committed
state held), so their other leaves need not be read. Every statement here follows an index:
the touched tenants' allocations, then the ports (InfiniBand: by fabric and switch name) or the
switch ports and NICs (RoCE) of those leaves.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Select, bindparam, join, select
from sqlmodel import Session, col

from policies.model import FabricKind
from policies.policy import Isolation, Policy, TenantKind
from tenancy import models as m

# (leaf, tenant name, tenant id, tenant kind) rows.
Rows = Collection[tuple[Any, str, int, str]]
_Queries = tuple[Select[Any, str, int, str], Select[Any, str, int, str]]


def leaf_neighbours(
    session: Session, fabric: m.Fabric, policy: Policy, tenant_ids: Collection[int]
) -> dict[str, int]:
    """The tenants (name -> id) a change of `tenant_ids` must be verified with, on its leaves.

    Empty unless some kind of `policy` is on dedicated leaves.
    """
    dedicated = {k.value for k in TenantKind if policy.for_tenant_kind(k).isolation is _DEDICATED}
    if not dedicated or not tenant_ids:
        return {}
    touched_query, neighbours_query = _QUERIES[FabricKind(fabric.kind)]
    connection, fabric_id = session.connection(), m.pk(fabric)
    touched = connection.execute(touched_query, {"fabric": fabric_id, "ids": sorted(tenant_ids)})
    every_tenant, dedicated_only = _leaves(touched.all(), dedicated)
    leaves = sorted(every_tenant | dedicated_only, key=str)
    if not leaves:
        return {}
    found = connection.execute(neighbours_query, {"fabric": fabric_id, "leaves": leaves})
    return {
        name: tenant_id
        for leaf, name, tenant_id, kind in found
        if leaf in every_tenant or kind in dedicated
    }


def _leaves(rows: Rows, dedicated: set[str]) -> tuple[set[Any], set[Any]]:
    """Leaves of the touched dedicated tenants, and the other touched tenants' leaves."""
    every_tenant = {leaf for leaf, _, _, kind in rows if kind in dedicated}
    return every_tenant, {leaf for leaf, _, _, _ in rows} - every_tenant


_DEDICATED = Isolation.DEDICATED_LEAF


def _holders(leaf: Any, ports: Any, node_of_port: Any) -> Select[Any, str, int, str]:
    """(leaf, tenant name, id, kind) over the `ports` of nodes tenants hold.

    Joined in order (port, assignment, allocation, tenant): PostgreSQL refuses an ON clause
    that names a table joined later, SQLite does not.
    """
    return (
        select(leaf, col(m.Tenant.name), col(m.Tenant.id), col(m.Tenant.kind))
        .select_from(ports)
        .join(m.NodeAssignment, col(m.NodeAssignment.node_id) == node_of_port)
        .join(m.Allocation, col(m.Allocation.id) == col(m.NodeAssignment.allocation_id))
        .join(m.Tenant, col(m.Tenant.id) == col(m.Allocation.tenant_id))
        .distinct()
    )


def _ib_queries() -> _Queries:
    """InfiniBand: a leaf is the switch (by name) an HCA port is cabled to."""
    leaf = col(m.Port.switch_name)
    base = _holders(leaf, m.Port, col(m.Port.node_id))
    on_fabric = col(m.Port.fabric_id) == bindparam("fabric")
    touched = base.where(
        on_fabric,
        col(m.Allocation.tenant_id).in_(bindparam("ids", expanding=True)),
        leaf.is_not(None),
    )
    return touched, base.where(on_fabric, leaf.in_(bindparam("leaves", expanding=True)))


def _roce_queries() -> _Queries:
    """RoCE: a leaf is the switch (by id) of the port a NIC is cabled to."""
    leaf = col(m.RoceSwitchPort.switch_id)
    nics = join(m.Nic, m.RoceSwitchPort, col(m.RoceSwitchPort.id) == col(m.Nic.switch_port_id))
    base = _holders(leaf, nics, col(m.Nic.node_id))
    touched = base.where(
        col(m.Allocation.fabric_id) == bindparam("fabric"),
        col(m.Allocation.tenant_id).in_(bindparam("ids", expanding=True)),
    )
    # A switch belongs to one fabric: its ports need no fabric filter.
    return touched, base.where(leaf.in_(bindparam("leaves", expanding=True)))


# Built once: a change under a dedicated-leaf policy runs two prepared statements.
_QUERIES: dict[FabricKind, _Queries] = {
    FabricKind.INFINIBAND: _ib_queries(),
    FabricKind.ROCE: _roce_queries(),
}
