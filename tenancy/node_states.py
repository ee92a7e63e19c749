"""Writing a node's state: every change of `Node.state` goes through here.

The transitions themselves are `policies.node_state`'s one table; this module applies them to
rows (holding and releasing nodes, an import listing or no longer listing them) and counts nodes
by state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, update
from sqlalchemy import select as core_select
from sqlalchemy.orm.util import identity_key
from sqlalchemy.sql.dml import ReturningUpdate
from sqlmodel import Session, col, select

from policies.model import NodeRole
from policies.node_state import TRANSITIONS, NodeEvent, NodeState, advance
from tenancy import models as m
from tenancy.db import fetch_all


class HeldNode(NamedTuple):
    """A node an allocation or service takes: its id and name (all its use cases need)."""

    id: int
    name: str


def hold_free_nodes(session: Session, fabric_id: int, count: int) -> list[HeldNode]:
    """Hold up to `count` allocatable nodes of the fabric, first names first (free -> allocated).

    `policies.node_state.allocatable` as one ``UPDATE ... RETURNING``: the nodes are chosen and
    marked held in the same statement. Fewer than `count` come back when fewer are free; the
    caller refuses that, and its rollback undoes the update. Sorted by name.
    """
    session.flush()  # a Core statement: this transaction's pending node changes first
    postgresql = session.get_bind().dialect.name == "postgresql"
    statement = _HOLD_SKIPPING_LOCKED if postgresql else _HOLD
    rows = session.connection().execute(statement, {"fabric": fabric_id, "count": count})
    nodes = sorted((HeldNode(int(node_id or 0), name) for node_id, name in rows), key=_name)
    _expire_loaded(session, [n.id for n in nodes])
    return nodes


def _hold_statement(skip_locked: bool) -> ReturningUpdate[int | None, str]:
    """`hold_free_nodes`'s statement, built once (parameters ``fabric`` and ``count``)."""
    candidates = (
        select(col(m.Node.id))
        .where(
            col(m.Node.fabric_id) == bindparam("fabric"),
            col(m.Node.role) == NodeRole.COMPUTE.value,
            col(m.Node.state) == NodeState.FREE.value,
        )
        .order_by(col(m.Node.name))
        .limit(bindparam("count"))
    )
    if skip_locked:
        # Concurrent allocators skip each other's candidate rows instead of colliding on them.
        candidates = candidates.with_for_update(skip_locked=True)
    return (
        update(m.Node)
        .where(col(m.Node.id).in_(candidates))
        .values(state=TRANSITIONS[NodeState.FREE, NodeEvent.HOLD].value)
        .returning(col(m.Node.id), col(m.Node.name))
    )


_HOLD, _HOLD_SKIPPING_LOCKED = _hold_statement(False), _hold_statement(True)


def _name(node: HeldNode) -> str:
    return node.name


def _expire_loaded(session: Session, node_ids: Iterable[int]) -> None:
    """Node rows this session loaded before a Core update changed them re-read their state."""
    for node_id in node_ids:
        node = session.identity_map.get(identity_key(m.Node, node_id))
        if node is not None:
            session.expire(node)


def advance_nodes(session: Session, nodes: Iterable[m.Node], event: NodeEvent) -> None:
    """Apply `event` to each node row, or raise `ConflictError` naming the first that may not."""
    for node in nodes:
        node.state = advance(node.state, event, node=node.name).value
        session.add(node)


def release_nodes(session: Session, node_ids: Sequence[int]) -> None:
    """Release the nodes an ending allocation held (call before the flush).

    On a fabric with deploy targets a node turns ``draining`` (its previous owner's key may still
    be programmed on its ports until every target applied the change); elsewhere ``free``.
    """
    if not node_ids:
        return
    rows = list(session.exec(select(m.Node).where(col(m.Node.id).in_(node_ids))))
    deployed = _fabrics_with_targets(session, {n.fabric_id for n in rows})
    for node in rows:
        event = NodeEvent.DRAIN if node.fabric_id in deployed else NodeEvent.RELEASE
        advance_nodes(session, [node], event)


def _fabrics_with_targets(session: Session, fabric_ids: set[int]) -> set[int]:
    query = select(m.DeployTarget.fabric_id).where(col(m.DeployTarget.fabric_id).in_(fabric_ids))
    return set(session.exec(query))


def stamp_drains(session: Session, fabric_id: int, snapshot_id: int) -> None:
    """Nodes that started draining in this transaction wait for snapshot `snapshot_id`."""
    session.exec(
        update(m.Node)
        .where(
            col(m.Node.fabric_id) == fabric_id,
            col(m.Node.state) == NodeState.DRAINING.value,
            col(m.Node.drain_snapshot_id).is_(None),
        )
        .values(drain_snapshot_id=snapshot_id)
    )


def finish_drains(session: Session, fabric_id: int, *, applied_everywhere: int | None) -> list[str]:
    """Free the draining nodes whose snapshot every target applied (`applied_everywhere` or older).

    `applied_everywhere` is the oldest snapshot id among the targets' last applied ones (None:
    some target has applied nothing yet, so no drain can finish). Returns the freed node names.
    """
    if applied_everywhere is None:
        return []
    query = select(m.Node).where(
        m.Node.fabric_id == fabric_id,
        m.Node.state == NodeState.DRAINING.value,
        col(m.Node.drain_snapshot_id) <= applied_everywhere,
    )
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
