"""Writing a node's state: every change of `Node.state` goes through here.

The transitions themselves are `policies.node_state`'s one table; this module applies them to
rows (holding and releasing nodes, an import listing or no longer listing them) and counts nodes
by state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from sqlalchemy import func, update
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from policies.node_state import NodeEvent, NodeState, advance
from tenancy import models as m
from tenancy.db import fetch_all


def advance_nodes(session: Session, nodes: Iterable[m.Node], event: NodeEvent) -> None:
    """Apply `event` to each node row, or raise `ConflictError` naming the first that may not."""
    for node in nodes:
        node.state = advance(node.state, event, node=node.name).value
        session.add(node)


def release_nodes(session: Session, node_ids: Sequence[int]) -> None:
    """Apply ``release`` to the nodes an ending allocation held (call before the flush)."""
    if node_ids:
        rows = session.exec(select(m.Node).where(col(m.Node.id).in_(node_ids)))
        advance_nodes(session, list(rows), NodeEvent.RELEASE)


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
    changed: dict[NodeState, list[int]] = defaultdict(list)
    gone = []
    for node_id, name, state in rows:
        event = NodeEvent.REAPPEAR if name in listed else NodeEvent.VANISH
        following = advance(state, event, node=name)
        if following != state:
            changed[following].append(node_id)
        gone += [name] if following is NodeState.ABSENT else []
    for state, node_ids in changed.items():
        # Through the ORM session, so that Node rows it already holds see the new state too.
        session.exec(update(m.Node).where(col(m.Node.id).in_(node_ids)).values(state=state.value))
    return sorted(gone)


def count_listed_nodes(session: Session, fabric_id: int) -> int:
    """Nodes of the fabric that are not absent: those the last import listed, and held ones."""
    query = (
        core_select(func.count())
        .select_from(m.Node)
        .where(col(m.Node.fabric_id) == fabric_id, col(m.Node.state) != NodeState.ABSENT.value)
    )
    return int(fetch_all(session, query)[0][0])
