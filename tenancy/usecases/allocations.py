"""Use cases for node allocations, and the node and segment helpers shared services reuse.

These are mutations that change who can reach whom. Concurrency rule: each one takes the lock of
every fabric it changes (tenancy/store/locks.py) before it reads the nodes and segments it decides
on; the ``node_assignment`` primary key and the segment unique constraints are the backstop, and a
request that loses a race there fails with `ConflictError` having changed nothing. Each change is
verified and audited before commit (`commit_gate`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import Insert, String, bindparam, insert, null
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from policies.errors import ConflictError, NotFoundError
from policies.model import NodeRole
from policies.node_state import NodeEvent
from tenancy import models as m
from tenancy.gate.change_check import ChangeScope
from tenancy.gate.verification import commit_gate
from tenancy.record.node_states import HeldNode, advance_nodes
from tenancy.record.policy_store import current_policy
from tenancy.schemas import (
    AllocationCreate,
    AllocationView,
    Page,
    RoceSegmentView,
    SegmentView,
)
from tenancy.store.db import fetch_all
from tenancy.store.history import AllocationState, in_state, is_in_state
from tenancy.store.locks import lock_active_tenant, lock_fabric
from tenancy.store.lookups import fabric_named, fabric_with_id, node_named, tenant_named
from tenancy.store.pagination import page_rows
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.technology import technology_of
from tenancy.usecases import usage
from tenancy.usecases.default_grants import grant_defaults, pending_defaults
from tenancy.usecases.placement import hold_placed_nodes
from tenancy.usecases.quotas import ensure_tenant_within_quota, guard_quota
from tenancy.usecases.releases import release_held


def segment_view(
    session: Session,
    fabric: m.Fabric,
    *,
    tenant_id: int | None = None,
    service_id: int | None = None,
) -> SegmentView | RoceSegmentView:
    """The owner's segment on the fabric: its partition, or on RoCE its VRF segment."""
    view = technology_of(fabric.kind).segment_view
    return view(session, fabric, tenant_id=tenant_id, service_id=service_id)


def ensure_segment(
    tx: Tx, fabric: m.Fabric, *, tenant_id: int | None = None, service_id: int | None = None
) -> SegmentView | RoceSegmentView:
    """Claim the owner's segment on first use: a P_Key, or on RoCE a whole VRF segment.

    Returns the owner's segment as `segment_view` shows it.
    """
    ensure = technology_of(fabric.kind).ensure_segment
    return ensure(tx, fabric, tenant_id=tenant_id, service_id=service_id)


# --- allocations -------------------------------------------------------------------------------


def allocate(uow: UnitOfWork, *, tenant_name: str, spec: AllocationCreate) -> AllocationView:
    """Give a tenant nodes exclusively, creating its partition on the fabric on first use.

    Named nodes must exist, be compute nodes and be free; `count` picks free compute nodes in
    name order, or where the policy's leaf rule lets it (`tenancy.usecases.placement`). The result
    is verified before commit; a failure leaves nothing behind.
    """
    with uow.transaction() as tx:
        return allocate_in(tx, tenant_name=tenant_name, spec=spec)


def allocate_in(
    tx: Tx, *, tenant_name: str, spec: AllocationCreate, origin: str | None = None
) -> AllocationView:
    """`allocate` inside the caller's transaction (a change set's operation).

    `origin` marks who asked when not an operator (``orchestrator``: the UFM-compatible API).
    """
    # The tenant's lock first (lock order): an offboarding cannot commit in between and
    # leave the tenant with nodes it never saw.
    tenant = lock_active_tenant(tx.session, tenant_name)
    guard_quota(tx, tenant)  # before the fabric lock (lock order)
    fabric = lock_fabric(tx.session, fabric_named(tx.session, spec.fabric))
    defaults = pending_defaults(tx, tenant, fabric)  # before this allocation is written
    allocation = m.Allocation(
        id=str(uuid.uuid4()),
        tenant_id=m.pk(tenant),
        fabric_id=m.pk(fabric),
        created_at=tx.now,
        origin=origin,
    )
    if spec.nodes is not None:
        named = _named_free_nodes(tx.session, fabric, spec.nodes)
        segment = ensure_segment(tx, fabric, tenant_id=m.pk(tenant))
        _insert_allocation(tx, allocation)
        assign_nodes(tx.session, named, allocation_id=allocation.id)
        nodes = [HeldNode(m.pk(node), node.name) for node in named]
    else:
        policy = current_policy(tx.session)
        nodes = hold_placed_nodes(tx.session, fabric, tenant, spec.count or 0, policy)
        segment = ensure_segment(tx, fabric, tenant_id=m.pk(tenant))
        _insert_allocation(tx, allocation, nodes)
    usage.open_node_intervals(tx, tenant, fabric, nodes, allocation.id)
    ensure_tenant_within_quota(tx, tenant)  # nodes held on every fabric
    commit_gate(
        tx,
        fabric,
        "allocation.create",
        f"tenants/{tenant.name}/allocations/{allocation.id}",
        ChangeScope.tenant(tenant.name),
    )
    grant_defaults(tx, tenant, fabric, defaults)
    return _allocation_view(allocation, tenant, fabric, [n.name for n in nodes], segment)


def _named_free_nodes(session: Session, fabric: m.Fabric, names: Sequence[str]) -> list[m.Node]:
    nodes = [node_named(session, fabric, name) for name in names]
    for node in nodes:
        if node.role != NodeRole.COMPUTE:
            raise ConflictError(
                f"node '{node.name}' is a {node.role} node; only compute nodes are allocatable",
                node=node.name,
            )
        if session.get(m.NodeAssignment, node.id) is not None:
            raise ConflictError(f"node '{node.name}' is already allocated", node=node.name)
    return nodes


def _insert_allocation(tx: Tx, allocation: m.Allocation, nodes: Sequence[HeldNode] = ()) -> None:
    """Write the allocation row and its nodes' assignments (Core: two statements at most).

    The ``node_assignment`` primary key refuses a node held twice (`assign_nodes`).
    """
    connection = tx.session.connection()
    connection.execute(_INSERT_ALLOCATION, allocation.model_dump())
    if nodes:
        values = {"allocation": allocation.id, "nodes": [node.id for node in nodes]}
        connection.execute(_INSERT_ASSIGNMENTS, values)


def _insert_assignments() -> Insert:
    """The assignments of nodes (``nodes``: ids) to one allocation as one INSERT ... SELECT."""
    rows = core_select(col(m.Node.id), bindparam("allocation", type_=String()), null()).where(
        col(m.Node.id).in_(bindparam("nodes", expanding=True))
    )
    columns = ["node_id", "allocation_id", "service_id"]
    return insert(m.NodeAssignment).from_select(columns, rows)


# Built once: a statement costs more to build than a small insert takes to run.
_INSERT_ALLOCATION = insert(m.Allocation)
_INSERT_ASSIGNMENTS = _insert_assignments()


def assign_nodes(
    session: Session,
    nodes: Sequence[m.Node],
    *,
    allocation_id: str | None = None,
    service_id: int | None = None,
) -> None:
    """Record that an allocation or a service holds `nodes`; the caller has checked they are free.

    Each node's state goes ``free`` -> ``allocated`` (`policies.node_state`).

    Raises:
        ConflictError: a node is not free (absent, draining or held): nothing may hold it.
        IntegrityError: a node is held already (a concurrent writer took it): the primary key
            of ``node_assignment`` refuses it at the flush, and the unit of work turns this into
            `ConflictError` and rolls back.
    """
    advance_nodes(session, nodes, NodeEvent.HOLD)
    for node in nodes:
        session.add(
            m.NodeAssignment(node_id=m.pk(node), allocation_id=allocation_id, service_id=service_id)
        )
    session.flush()  # the node_assignment primary key refuses a node held twice


def _allocation_view(
    allocation: m.Allocation,
    tenant: m.Tenant,
    fabric: m.Fabric,
    nodes: list[str],
    segment: SegmentView | RoceSegmentView | None,
) -> AllocationView:
    return AllocationView(
        id=allocation.id,
        tenant=tenant.name,
        fabric=fabric.name,
        nodes=sorted(nodes),
        segment=segment,
        created_at=allocation.created_at,
        released_at=allocation.released_at,
    )


def _allocation_nodes(session: Session, allocation_id: str) -> list[str]:
    rows = fetch_all(
        session,
        core_select(col(m.Node.name))
        .join(m.NodeAssignment, col(m.NodeAssignment.node_id) == col(m.Node.id))
        .where(col(m.NodeAssignment.allocation_id) == allocation_id),
    )
    return sorted(row[0] for row in rows)


def list_allocations(
    uow: UnitOfWork,
    *,
    tenant_name: str,
    limit: int,
    cursor: str | None,
    fabric: str | None = None,
    state: AllocationState = "active",
) -> Page[AllocationView]:
    """The tenant's allocations in `state` (default: not released) in id order, on any fabric."""
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        query = select(m.Allocation).where(m.Allocation.tenant_id == tenant.id)
        query = in_state(query, m.Allocation.released_at, state)
        if fabric is not None:
            query = query.where(m.Allocation.fabric_id == m.pk(fabric_named(tx.session, fabric)))
        rows, total, after = page_rows(tx.session, query, col(m.Allocation.id), limit, cursor)
        return Page(data=[_view_of(tx.session, a, tenant) for a in rows], count=total, next=after)


def _released_nodes(session: Session, allocation_id: str) -> list[str]:
    # The assignments go at release; the usage intervals keep which nodes the allocation held.
    rows = fetch_all(
        session,
        core_select(col(m.UsageInterval.resource)).where(
            col(m.UsageInterval.allocation_id) == allocation_id,
            col(m.UsageInterval.resource_type) == "node",
        ),
    )
    return sorted({row[0] for row in rows})


def _view_of(session: Session, allocation: m.Allocation, tenant: m.Tenant) -> AllocationView:
    fabric = fabric_with_id(session, allocation.fabric_id)
    if allocation.released_at is not None:
        # The tenant's segment may since be released or reissued: a released allocation has none.
        nodes = _released_nodes(session, allocation.id)
        return _allocation_view(allocation, tenant, fabric, nodes, None)
    segment = segment_view(session, fabric, tenant_id=m.pk(tenant))
    return _allocation_view(
        allocation, tenant, fabric, _allocation_nodes(session, allocation.id), segment
    )


def get_allocation(
    uow: UnitOfWork, *, tenant_name: str, allocation_id: str, state: AllocationState = "active"
) -> AllocationView:
    """One of the tenant's allocations in `state`; another state or another tenant's is a 404."""
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        allocation = _allocation_of(tx.session, tenant, allocation_id, state)
        return _view_of(tx.session, allocation, tenant)


def _allocation_of(
    session: Session, tenant: m.Tenant, allocation_id: str, state: AllocationState = "active"
) -> m.Allocation:
    allocation = session.get(m.Allocation, allocation_id)
    if (
        allocation is None
        or allocation.tenant_id != tenant.id
        or not is_in_state(allocation.released_at, state)
    ):
        raise NotFoundError(
            f"tenant '{tenant.name}' has no allocation '{allocation_id}'", resource="allocation"
        )
    return allocation


def release_allocation(uow: UnitOfWork, *, tenant_name: str, allocation_id: str) -> None:
    """Free the allocation's nodes; the tenant's partition goes with its last allocation."""
    with uow.transaction() as tx:
        release_allocation_in(tx, tenant_name=tenant_name, allocation_id=allocation_id)


def release_allocation_in(tx: Tx, *, tenant_name: str, allocation_id: str) -> None:
    """`release_allocation` inside the caller's transaction (a change set's operation)."""
    tenant = tenant_named(tx.session, tenant_name)
    allocation = _allocation_of(tx.session, tenant, allocation_id)
    fabric = lock_fabric(tx.session, fabric_with_id(tx.session, allocation.fabric_id))
    release_held(tx, tenant, allocation)  # NotFoundError if it was released while we waited
    commit_gate(
        tx,
        fabric,
        "allocation.delete",
        f"tenants/{tenant.name}/allocations/{allocation.id}",
        ChangeScope.tenant(tenant.name),
    )
