"""Writing a node's state: every change of `Node.state` goes through here.

The transitions themselves are `policies.node_state`'s one table; this module applies them to
rows (holding and releasing nodes, an import listing or no longer listing them) and counts nodes
by state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Executable, bindparam, case, exists, func, update
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from policies.model import NodeRole
from policies.node_state import TRANSITIONS, NodeEvent, NodeState, advance
from tenancy import models as m
from tenancy.store.db import expire_loaded, fetch_all
from tenancy.store.tx_memo import memo, pending


class HeldNode(NamedTuple):
    """A node an allocation or service takes: its id and name (all its use cases need)."""

    id: int
    name: str


def hold_free_nodes(session: Session, fabric_id: int, count: int) -> list[HeldNode]:
    """Hold up to `count` allocatable nodes of the fabric, first names first (free -> allocated).

    `policies.node_state.allocatable` as one ``UPDATE ... RETURNING``: the nodes are chosen and
    marked held in the same statement. Fewer than `count` come back when fewer are free; the
    caller refuses that, and its rollback undoes the update. Sorted by name.

    A transaction that holds nodes again (a change set) resumes after the last name it held:
    no node before it is free unless this transaction freed one (`nodes_changed`). Otherwise
    PostgreSQL would walk the index entries of every node it already held (old row versions
    stay in the index until the transaction ends), a cost growing with the change set.
    """
    session.flush()  # a Core statement: this transaction's pending node changes first
    postgresql = session.get_bind().dialect.name == "postgresql"
    after = memo(session, "nodes_held_up_to")
    values = {"fabric": fabric_id, "count": count, "after": after.get(fabric_id, "")}
    rows = list(session.connection().execute(_HOLD[postgresql], values))
    nodes = sorted((HeldNode(int(row[0] or 0), row[1]) for row in rows), key=_name)
    expire_loaded(session, m.Node, [n.id for n in nodes])
    if nodes:
        # The last name in the database's order (its collation may not be Python's): SQLite
        # compares the bytes, as Python does; PostgreSQL says which (`_hold_statement`).
        after[fabric_id] = rows[0][2] if postgresql else nodes[-1].name
    return nodes


def hold_chosen_nodes(session: Session, node_ids: Sequence[int]) -> list[HeldNode]:
    """Hold the chosen nodes that are still free (free -> allocated), one statement; by name.

    A node no longer free is not held and does not come back: the caller refuses fewer nodes
    than it chose, and its rollback undoes the update.
    """
    session.flush()  # a Core statement: this transaction's pending node changes first
    rows = session.connection().execute(_HOLD_CHOSEN, {"ids": list(node_ids)})
    nodes = sorted((HeldNode(int(row[0] or 0), row[1]) for row in rows), key=_name)
    expire_loaded(session, m.Node, [n.id for n in nodes])
    return nodes


def nodes_changed(session: Session) -> None:
    """Say that this transaction changed nodes' states or roles: holding restarts from the top."""
    memo(session, "nodes_held_up_to").clear()


def _hold_statement(postgresql: bool) -> Executable:
    """`hold_free_nodes`'s statement, built once (``fabric``, ``count``, names ``after``).

    On PostgreSQL each row also carries the greatest name held, in the column's collation.
    """
    candidates = (
        select(col(m.Node.id))
        .where(
            col(m.Node.fabric_id) == bindparam("fabric"),
            col(m.Node.role) == NodeRole.COMPUTE.value,
            col(m.Node.state) == NodeState.FREE.value,
            col(m.Node.name) > bindparam("after"),
        )
        .order_by(col(m.Node.name))
        .limit(bindparam("count"))
    )
    held = update(m.Node).values(state=TRANSITIONS[NodeState.FREE, NodeEvent.HOLD].value)
    if not postgresql:
        return held.where(col(m.Node.id).in_(candidates)).returning(
            col(m.Node.id), col(m.Node.name)
        )
    # Concurrent allocators skip each other's candidate rows instead of colliding on them.
    locked = candidates.with_for_update(skip_locked=True)
    picked = (
        held.where(col(m.Node.id).in_(locked))
        .returning(col(m.Node.id), col(m.Node.name))
        .cte("held")
    )
    return select(picked.c.id, picked.c.name, func.max(picked.c.name).over())


_HOLD = {flag: _hold_statement(flag) for flag in (False, True)}
_HOLD_CHOSEN = (
    update(m.Node)
    .where(
        col(m.Node.id).in_(bindparam("ids", expanding=True)),
        col(m.Node.state) == NodeState.FREE.value,
    )
    .values(state=TRANSITIONS[NodeState.FREE, NodeEvent.HOLD].value)
    .returning(col(m.Node.id), col(m.Node.name))
)


def _name(node: HeldNode) -> str:
    return node.name


def advance_nodes(session: Session, nodes: Iterable[m.Node], event: NodeEvent) -> None:
    """Apply `event` to each node row, or raise `ConflictError` naming the first that may not."""
    nodes_changed(session)
    for node in nodes:
        node.state = advance(node.state, event, node=node.name).value
        session.add(node)


def release_nodes(session: Session, fabric_id: int, node_ids: Sequence[int]) -> None:
    """Release the nodes an ending allocation held on the fabric (one prepared statement).

    On a fabric with deploy targets a node turns ``draining`` (its previous owner's key may still
    be programmed on its ports until every target applied the change); elsewhere ``free``.

    Raises:
        ConflictError: a node is not allocated (`policies.node_state.advance` refuses it).
    """
    if not node_ids:
        return
    session.flush()  # a Core statement: this transaction's pending node changes first
    connection = session.connection()
    rows = connection.execute(_RELEASE, {"ids": list(node_ids), "fabric": fabric_id}).all()
    if len(rows) < len(node_ids):  # some node is not allocated: the table's refusal names it
        _refuse_release(session, fabric_id, set(node_ids) - {node_id for node_id, _ in rows})
    expire_loaded(session, m.Node, node_ids)
    nodes_changed(session)
    if any(state == NodeState.DRAINING.value for _, state in rows):
        pending(session, "drains").add(fabric_id)


def _refuse_release(session: Session, fabric_id: int, node_ids: set[int]) -> None:
    """Raise `advance`'s `ConflictError` for the first of `node_ids` (none is allocated)."""
    connection = session.connection()
    deployed = connection.execute(_HAS_TARGETS, {"fabric": fabric_id}).first() is not None
    event = NodeEvent.DRAIN if deployed else NodeEvent.RELEASE
    name, state = connection.execute(_NAME_AND_STATE, {"id": min(node_ids)}).one()
    advance(state, event, node=name)


def stamp_drains(session: Session, fabric_id: int, snapshot_id: int) -> None:
    """Nodes that started draining in this transaction wait for snapshot `snapshot_id`.

    A transaction that started no drain on the fabric (`release_nodes`) has nothing to stamp:
    every other draining node was stamped by the transaction that drained it.
    """
    drains = pending(session, "drains")
    if fabric_id not in drains:
        return
    # Through the ORM session, so that Node rows it already holds see the stamp too.
    session.execute(_STAMP_DRAINS, {"fabric": fabric_id, "snapshot": snapshot_id})
    drains.discard(fabric_id)


# Built once (`release_nodes`, `stamp_drains`).
_HAS_TARGETS = (
    select(col(m.DeployTarget.id))
    .where(col(m.DeployTarget.fabric_id) == bindparam("fabric"))
    .limit(1)
)
# allocated -> draining on a fabric with deploy targets, else free (the table's two releases).
_RELEASE = (
    update(m.Node)
    .where(
        col(m.Node.id).in_(bindparam("ids", expanding=True)),
        col(m.Node.state) == NodeState.ALLOCATED.value,
    )
    .values(
        state=case(
            (exists(_HAS_TARGETS), TRANSITIONS[NodeState.ALLOCATED, NodeEvent.DRAIN].value),
            else_=TRANSITIONS[NodeState.ALLOCATED, NodeEvent.RELEASE].value,
        )
    )
    .returning(col(m.Node.id), col(m.Node.state))
)
_NAME_AND_STATE = select(col(m.Node.name), col(m.Node.state)).where(
    col(m.Node.id) == bindparam("id")
)
_STAMP_DRAINS = (
    update(m.Node)
    .where(
        col(m.Node.fabric_id) == bindparam("fabric"),
        col(m.Node.state) == NodeState.DRAINING.value,
        col(m.Node.drain_snapshot_id).is_(None),
    )
    .values(drain_snapshot_id=bindparam("snapshot"))
)


def finish_drains(
    session: Session,
    fabric_id: int,
    *,
    applied_everywhere: int | None,
    waiting: Collection[int] = (),
) -> list[str]:
    """Free the draining nodes whose snapshot every target applied (`applied_everywhere` or older).

    `applied_everywhere` is the oldest snapshot id among the targets' last applied ones (None:
    some target has applied nothing yet, so no drain can finish); the nodes of `waiting` (ids)
    stay draining whatever it is. Returns the freed node names.
    """
    if applied_everywhere is None:
        return []
    query = select(m.Node).where(
        m.Node.fabric_id == fabric_id,
        m.Node.state == NodeState.DRAINING.value,
        col(m.Node.drain_snapshot_id) <= applied_everywhere,
    )
    if waiting:
        query = query.where(col(m.Node.id).not_in(list(waiting)))
    return free_drained(session, list(session.exec(query)))


def free_drained(session: Session, nodes: Sequence[m.Node]) -> list[str]:
    """Apply ``drained`` to each node (draining -> free) and forget its drain snapshot."""
    advance_nodes(session, nodes, NodeEvent.DRAINED)
    for node in nodes:
        node.drain_snapshot_id = None
    return sorted(node.name for node in nodes)


def mark_presence(session: Session, fabric_id: int, listed: set[str]) -> list[str]:
    """After an import: nodes it lists ``reappear``, the others ``vanish``.

    Returns the names of the nodes now absent (newly or still), sorted. Held nodes stay as they
    are (the table keeps them), and the import keeps their vanished ports.
    """
    nodes_changed(session)
    rows = fetch_all(
        session,
        core_select(col(m.Node.id), col(m.Node.name), col(m.Node.state)).where(
            col(m.Node.fabric_id) == fabric_id
        ),
    )
    changed, gone = _presence(rows, listed)
    for state, node_ids in changed.items():
        for start in range(0, len(node_ids), _IDS_PER_UPDATE):
            # Through the ORM session, so that Node rows it already holds see the new state too.
            chosen = col(m.Node.id).in_(node_ids[start : start + _IDS_PER_UPDATE])
            session.exec(update(m.Node).where(chosen).values(state=state.value))
    return sorted(gone)


# Node ids per UPDATE ... IN (...): far below SQLite's and PostgreSQL's parameter limits.
_IDS_PER_UPDATE = 5_000


def _presence(
    rows: Iterable[tuple[Any, ...]], listed: set[str]
) -> tuple[dict[NodeState, list[int]], list[str]]:
    """The node ids whose state changes, by new state, and the names of the absent nodes."""
    changed: dict[NodeState, list[int]] = defaultdict(list)
    gone = []
    # The table by (state, event), asked once per pair: a fabric has 10k nodes, and a refused
    # transition still names the first node that asked for it.
    transitions: dict[tuple[str, NodeEvent], NodeState] = {}
    for node_id, name, state in rows:
        event = NodeEvent.REAPPEAR if name in listed else NodeEvent.VANISH
        following = transitions.get((state, event))
        if following is None:
            following = transitions[state, event] = advance(state, event, node=name)
        if following != state:
            changed[following].append(node_id)
        gone += [name] if following is NodeState.ABSENT else []
    return changed, gone


def count_listed_nodes(session: Session, fabric_id: int) -> int:
    """Nodes of the fabric that are not absent: those the last import listed, and held ones."""
    query = (
        core_select(func.count())
        .select_from(m.Node)
        .where(col(m.Node.fabric_id) == fabric_id, col(m.Node.state) != NodeState.ABSENT.value)
    )
    return int(fetch_all(session, query)[0][0])
