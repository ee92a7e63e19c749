"""Which free nodes a `count` allocation holds: what `policies.placement` needs, loaded.

Under a policy with no kind on `dedicated_leaf` (the default) nothing is read but the policy
(once per transaction, `current_policy`) and what was read before policies existed: the first
free compute nodes by name, chosen and held in one statement (`hold_free_nodes`). Otherwise
one statement loads the free compute nodes with the leaves their ports are cabled to, and one
the tenants holding ports on those leaves (no other leaf can matter: it blocks no candidate and
ranks none); `place` picks, and one statement holds. On RoCE the second goes from each leaf
down its ports by index; on InfiniBand it reads the fabric's ports, as ``port`` has no index
by switch (one would cost every topology import).
Concurrency: the caller holds the fabric's lock (tenancy/usecases/allocations.py), so the occupancy
read stays true until commit; the ``node_assignment`` primary key is the backstop.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Select, bindparam
from sqlalchemy import select as core_select
from sqlmodel import Session, col

from policies.errors import ConflictError
from policies.model import FabricKind, NodeRole
from policies.node_state import NodeState
from policies.placement import Candidate, Occupancy, place
from policies.policy import Isolation, Policy
from tenancy import models as m
from tenancy.record.node_states import HeldNode, hold_chosen_nodes, hold_free_nodes

__all__ = ["hold_placed_nodes"]

AnySelect = Select[*tuple[Any, ...]]


def hold_placed_nodes(
    session: Session, fabric: m.Fabric, tenant: m.Tenant, count: int, policy: Policy
) -> list[HeldNode]:
    """Hold `count` free compute nodes of the fabric for `tenant` where `policy` lets it have them.

    Sorted by name. Under the default policy, and whenever no kind is on `dedicated_leaf`, the
    first free compute nodes by name (as before policies existed); otherwise `place`'s choice.

    Raises:
        ConflictError: fewer than `count` compute nodes are free.
        NoPlacementError: enough are free, but too few avoid the leaves the policy keeps apart.
    """
    if not policy.uses_dedicated_leaves:
        return _hold_first_free(session, fabric, count)
    statements = _STATEMENTS[FabricKind(fabric.kind)]
    candidates = _candidates(session, statements[0], m.pk(fabric))
    leaves = sorted({leaf for candidate in candidates.values() for leaf in candidate.leaves})
    names = place(
        count,
        candidates.values(),
        tenant=tenant.name,
        isolation=policy.for_tenant_kind(tenant.kind).isolation,
        occupancy=_occupancy(session, statements[1], m.pk(fabric), leaves, policy),
        fabric=fabric.name,
    )
    ids = {candidate.node: node_id for node_id, candidate in candidates.items()}
    return _hold_chosen(session, fabric, [ids[name] for name in names])


def _hold_first_free(session: Session, fabric: m.Fabric, count: int) -> list[HeldNode]:
    """`count` free compute nodes in name order, held from now on (refused if fewer are free)."""
    nodes = hold_free_nodes(session, m.pk(fabric), count)
    if len(nodes) < count:
        raise ConflictError(
            f"fabric '{fabric.name}' has {len(nodes)} free compute node(s), {count} requested",
            available=len(nodes),
        )
    return nodes


def _hold_chosen(session: Session, fabric: m.Fabric, node_ids: list[int]) -> list[HeldNode]:
    nodes = hold_chosen_nodes(session, node_ids)
    if len(nodes) < len(node_ids):  # the fabric's lock makes this a concurrent writer's bug
        raise ConflictError(
            f"fabric '{fabric.name}': a node placed for the allocation is no longer free",
            available=len(nodes),
        )
    return nodes


def _candidates(session: Session, statement: AnySelect, fabric_id: int) -> dict[int, Candidate]:
    """The fabric's free compute nodes by id, each with the leaves its ports are cabled to."""
    names: dict[int, str] = {}
    leaves: dict[int, set[str]] = defaultdict(set)
    for node_id, name, leaf in session.connection().execute(statement, {"fabric": fabric_id}):
        names[node_id] = name
        if leaf is not None:  # an uncabled port reaches no leaf
            leaves[node_id].add(leaf)
    return {
        node_id: Candidate(name, frozenset(leaves.get(node_id, ())))
        for node_id, name in names.items()
    }


def _occupancy(
    session: Session, statement: AnySelect, fabric_id: int, leaves: list[str], policy: Policy
) -> Occupancy:
    """The tenants holding ports on `leaves`, and which of them are on dedicated leaves."""
    holders: dict[str, set[str]] = defaultdict(set)
    dedicated: set[str] = set()
    rows: Iterable[Any] = ()
    if leaves:
        rows = session.connection().execute(statement, {"fabric": fabric_id, "leaves": leaves})
    for leaf, tenant, kind in rows:
        holders[leaf].add(tenant)
        if policy.for_tenant_kind(kind).isolation is Isolation.DEDICATED_LEAF:
            dedicated.add(tenant)
    return Occupancy({leaf: frozenset(t) for leaf, t in holders.items()}, frozenset(dedicated))


# --- statements, built once: (free candidates with leaves, tenants per leaf) per technology ---

_FREE_COMPUTE = (
    col(m.Node.fabric_id) == bindparam("fabric"),
    col(m.Node.state) == NodeState.FREE.value,
    col(m.Node.role) == NodeRole.COMPUTE.value,
)


def _tenants_of_nodes(statement: AnySelect, node_id: Any) -> AnySelect:
    """`statement` joined to the tenant whose active allocation holds node `node_id`."""
    return (
        statement.join(m.NodeAssignment, col(m.NodeAssignment.node_id) == node_id)
        .join(m.Allocation, col(m.Allocation.id) == col(m.NodeAssignment.allocation_id))
        .join(m.Tenant, col(m.Tenant.id) == col(m.Allocation.tenant_id))
        .distinct()
    )


def _ib_statements() -> tuple[AnySelect, AnySelect]:
    """InfiniBand: a port's leaf is the switch its HCA port is cabled to (`IbPort.switch`)."""
    free = (
        core_select(col(m.Node.id), col(m.Node.name), col(m.Port.switch_name))
        .outerjoin(m.Port, col(m.Port.node_id) == col(m.Node.id))
        .where(*_FREE_COMPUTE)
    )
    held = core_select(col(m.Port.switch_name), col(m.Tenant.name), col(m.Tenant.kind)).where(
        col(m.Port.fabric_id) == bindparam("fabric"),
        col(m.Port.switch_name).in_(bindparam("leaves", expanding=True)),
    )
    return free, _tenants_of_nodes(held, col(m.Port.node_id))


def _roce_statements() -> tuple[AnySelect, AnySelect]:
    """RoCE: a NIC's leaf is the switch of the port it is cabled to (`Nic.switch`)."""
    free = (
        core_select(col(m.Node.id), col(m.Node.name), col(m.RoceSwitch.name))
        .outerjoin(m.Nic, col(m.Nic.node_id) == col(m.Node.id))
        .outerjoin(m.RoceSwitchPort, col(m.RoceSwitchPort.id) == col(m.Nic.switch_port_id))
        .outerjoin(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
        .where(*_FREE_COMPUTE)
    )
    # From the leaf by name (unique per fabric) down its ports to their NICs: indexed all the way.
    held = (
        core_select(col(m.RoceSwitch.name), col(m.Tenant.name), col(m.Tenant.kind))
        .join(m.RoceSwitchPort, col(m.RoceSwitchPort.switch_id) == col(m.RoceSwitch.id))
        .join(m.Nic, col(m.Nic.switch_port_id) == col(m.RoceSwitchPort.id))
        .where(
            col(m.RoceSwitch.fabric_id) == bindparam("fabric"),
            col(m.RoceSwitch.name).in_(bindparam("leaves", expanding=True)),
        )
    )
    return free, _tenants_of_nodes(held, col(m.Nic.node_id))


_STATEMENTS = {FabricKind.INFINIBAND: _ib_statements(), FabricKind.ROCE: _roce_statements()}
