"""Use cases for a fabric's nodes: listing with filters, and setting a node's role.

A node's state changes only by `policies.node_state` (see `tenancy.record.node_states`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from sqlalchemy import func
from sqlalchemy import select as core_select
from sqlmodel import Session, col

from policies.enforcement import DrainWait
from policies.errors import ConflictError
from policies.model import NodeRole
from policies.node_state import NodeState
from tenancy import models as m
from tenancy.gate.change_check import ChangeScope
from tenancy.gate.verification import commit_gate
from tenancy.record.node_states import nodes_changed
from tenancy.record.snapshot.common import HoldersSelect, holders_query
from tenancy.schemas import DrainView, NicView, NodePatch, NodeView, Page, PortView
from tenancy.store.db import fetch_all
from tenancy.store.locks import lock_fabric
from tenancy.store.lookups import fabric_named, node_named
from tenancy.store.pagination import decode_cursor, next_cursor
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.drains import drain_waits


def _filtered(
    query: HoldersSelect,
    tenant: str | None,
    free: bool | None,
    role: str | None,
    state: str | None,
) -> HoldersSelect:
    if tenant is not None:
        query = query.where(col(m.Tenant.name) == tenant)
    if free is not None:
        # Free is the state `free`: listed by the last import and held by no one.
        is_free = col(m.Node.state) == NodeState.FREE.value
        query = query.where(is_free if free else ~is_free)
    if role is not None:
        query = query.where(col(m.Node.role) == role)
    if state is not None:
        query = query.where(col(m.Node.state) == state)
    return query


def list_nodes(
    uow: UnitOfWork,
    *,
    fabric_name: str,
    tenant: str | None = None,
    free: bool | None = None,
    role: str | None = None,
    state: str | None = None,
    limit: int = 100,
    cursor: str | None = None,
) -> Page[NodeView]:
    """Nodes of a fabric sorted by name, filtered by holder, freedom, role or state, with ports.

    `free` true is the same filter as `state` ``free``; false is every other state.
    """
    after = decode_cursor(cursor)
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        query = _filtered(holders_query(m.pk(fabric)), tenant, free, role, state)
        total = fetch_all(tx.session, core_select(func.count()).select_from(query.subquery()))
        if after is not None:
            query = query.where(col(m.Node.name) > after)
        rows = fetch_all(tx.session, query.order_by(col(m.Node.name)).limit(limit + 1))
        page = rows[:limit]
        details = _details(tx.session, fabric, page)
    return Page(
        data=[_node_view(row, details) for row in page],
        count=int(total[0][0]),
        next=next_cursor([row[1] for row in page], limit, len(rows) > limit),
    )


class _Details(NamedTuple):
    """What a page of nodes shows beside their rows: ports, NICs, and drains, by node id."""

    ports: dict[int, list[PortView]]
    nics: dict[int, list[NicView]]
    drains: dict[int, DrainWait]


def _details(session: Session, fabric: m.Fabric, rows: list[tuple[Any, ...]]) -> _Details:
    ids = [row[0] for row in rows]
    draining = [row[0] for row in rows if row[5] == NodeState.DRAINING.value]
    return _Details(
        _ports_of(session, ids), _nics_of(session, ids), drain_waits(session, fabric, draining)
    )


def _node_view(row: tuple[Any, ...], details: _Details) -> NodeView:
    node_id, name, role, tenant, service, state = row
    drain = details.drains.get(node_id)
    return NodeView(
        name=name,
        role=role,
        state=state,
        tenant=tenant,
        service=service,
        ports=details.ports[node_id],
        nics=details.nics.get(node_id),
        drain=None if drain is None else _drain_view(drain),
    )


def _drain_view(wait: DrainWait) -> DrainView:
    return DrainView(
        waiting_for=list(wait.waiting_for), untargeted=list(wait.untargeted), reason=wait.reason
    )


def _ports_of(session: Session, node_ids: list[int]) -> dict[int, list[PortView]]:
    rows = fetch_all(
        session,
        core_select(
            col(m.Port.node_id),
            col(m.Port.guid),
            col(m.Port.hca),
            col(m.Port.port_num),
            col(m.Port.switch_name),
            col(m.Port.switch_port),
        )
        .where(col(m.Port.node_id).in_(node_ids))
        .order_by(col(m.Port.hca), col(m.Port.port_num), col(m.Port.guid)),
    )
    grouped: dict[int, list[PortView]] = defaultdict(list)
    for node_id, guid, hca, port, switch, switch_port in rows:
        grouped[node_id].append(
            PortView(guid=guid, hca=hca, port=port, switch=switch, switch_port=switch_port)
        )
    return grouped


def _nics_of(session: Session, node_ids: list[int]) -> dict[int, list[NicView]]:
    rows = fetch_all(
        session,
        core_select(
            col(m.Nic.node_id), col(m.Nic.name), col(m.RoceSwitch.name), col(m.RoceSwitchPort.name)
        )
        .join(m.RoceSwitchPort, col(m.RoceSwitchPort.id) == col(m.Nic.switch_port_id))
        .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
        .where(col(m.Nic.node_id).in_(node_ids))
        .order_by(col(m.Nic.name)),
    )
    grouped: dict[int, list[NicView]] = defaultdict(list)
    for node_id, nic, switch, port in rows:
        grouped[node_id].append(NicView(name=nic, switch=switch, port=port))
    return grouped


def get_node(uow: UnitOfWork, *, fabric_name: str, node_name: str) -> NodeView:
    """One node with its state, its holder (tenant or service) and its HCA ports or NICs.

    While it drains, also what the drain waits for (`drains.drain_waits`).
    """
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        node = node_named(tx.session, fabric, node_name)
        row = fetch_all(tx.session, holders_query(m.pk(fabric)).where(col(m.Node.id) == node.id))[0]
        details = _details(tx.session, fabric, [row])
    return _node_view(row, details)


def set_node_role(
    uow: UnitOfWork, *, fabric_name: str, node_name: str, patch: NodePatch
) -> NodeView:
    """Change a node's role; a node someone holds cannot become storage or management."""
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        node = node_named(tx.session, fabric, node_name)
        held = tx.session.get(m.NodeAssignment, node.id)
        if held is not None and held.allocation_id and patch.role != NodeRole.COMPUTE.value:
            raise ConflictError(
                f"node '{node_name}' is allocated to a tenant; release it before making it "
                f"{patch.role}",
                node=node_name,
            )
        node.role = patch.role
        nodes_changed(tx.session)
        tx.session.add(node)
        target = f"fabrics/{fabric.name}/nodes/{node.name}"
        commit_gate(tx, fabric, "node.update", target, ChangeScope.of(nodes=[node.name]))
    return get_node(uow, fabric_name=fabric_name, node_name=node_name)
