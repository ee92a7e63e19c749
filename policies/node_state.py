"""A node's state next to its role: the one table of state transitions, and who may hold it.

The role says what a host is for (compute, storage, management); the state says where it is in
its life on the fabric. Every change of state goes through `advance`, which knows only the
transitions of this table and refuses any other:

    ==========  ==========  ==========  =========================================================
    state       event       next        when
    ==========  ==========  ==========  =========================================================
    free        hold        allocated   a tenant's allocation or a shared service takes the node
    allocated   release     free        its allocation is released (or its tenant offboarded)
    allocated   drain       draining    released, the old owner's segment still deployed (deploy)
    draining    drained     free        the observed fabric shows the old segment gone (deploy)
    free        vanish      absent      a topology import no longer lists the node
    absent      reappear    free        a topology import lists the node again
    allocated   vanish      allocated   held: its ports are kept, a holder never loses them
    draining    vanish      draining    still owes its drain; its ports are kept
    absent      vanish      absent      still missing
    free        reappear    free        (still listed: nothing happens)
    allocated   reappear    allocated
    draining    reappear    draining
    ==========  ==========  ==========  =========================================================

``allocated`` means held by a tenant's allocation or by a shared service. An ``absent`` node keeps
its record and role but no ports, and nothing may hold it until it reappears. Roles add one rule
of their own: only a ``compute`` node is ever allocated to a tenant, and management nodes are
never held at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from policies.errors import ConflictError
from policies.model import NodeRole

__all__ = [
    "TRANSITIONS",
    "NodeEvent",
    "NodeState",
    "advance",
    "allocatable",
    "guards_its_ports",
    "keeps_ports",
]


class NodeState(StrEnum):
    """Where a node is in its life on the fabric (see the module's table)."""

    FREE = "free"
    ALLOCATED = "allocated"
    ABSENT = "absent"
    DRAINING = "draining"


class NodeEvent(StrEnum):
    """What happens to a node: the use cases' vocabulary for the transitions of the table."""

    HOLD = "hold"
    RELEASE = "release"
    DRAIN = "drain"
    DRAINED = "drained"
    VANISH = "vanish"
    REAPPEAR = "reappear"


_S, _E = NodeState, NodeEvent
TRANSITIONS: Mapping[tuple[NodeState, NodeEvent], NodeState] = MappingProxyType(
    {
        (_S.FREE, _E.HOLD): _S.ALLOCATED,
        (_S.ALLOCATED, _E.RELEASE): _S.FREE,
        (_S.ALLOCATED, _E.DRAIN): _S.DRAINING,
        (_S.DRAINING, _E.DRAINED): _S.FREE,
        (_S.FREE, _E.VANISH): _S.ABSENT,
        (_S.ABSENT, _E.REAPPEAR): _S.FREE,
        (_S.ALLOCATED, _E.VANISH): _S.ALLOCATED,
        (_S.DRAINING, _E.VANISH): _S.DRAINING,
        (_S.ABSENT, _E.VANISH): _S.ABSENT,
        (_S.FREE, _E.REAPPEAR): _S.FREE,
        (_S.ALLOCATED, _E.REAPPEAR): _S.ALLOCATED,
        (_S.DRAINING, _E.REAPPEAR): _S.DRAINING,
    }
)

# What a refused event would have done, as the caller reads it.
_ACTIONS = {
    NodeEvent.HOLD: "be held",
    NodeEvent.RELEASE: "be released",
    NodeEvent.DRAIN: "start draining",
    NodeEvent.DRAINED: "finish draining",
    NodeEvent.VANISH: "vanish",
    NodeEvent.REAPPEAR: "reappear",
}
# Why a refused event cannot happen in a state, as the caller reads it.
_REFUSALS = {
    NodeState.ABSENT: "is absent (the last topology import did not list it)",
    NodeState.ALLOCATED: "is already allocated",
    NodeState.DRAINING: "is draining (its previous owner's segment may still be deployed)",
    NodeState.FREE: "is free",
}


def advance(state: str, event: NodeEvent, *, node: str) -> NodeState:
    """The state of node `node` after `event`, by the module's table.

    Raises:
        ConflictError: the table has no transition for `event` in `state` (e.g. holding an
            absent or an allocated node); the extension names the node and its state.
    """
    current = NodeState(state)
    following = TRANSITIONS.get((current, event))
    if following is None:
        raise ConflictError(
            f"node '{node}' {_REFUSALS[current]}; it cannot {_ACTIONS[event]}",
            node=node,
            state=current.value,
        )
    return following


def allocatable(role: str, state: str) -> bool:
    """True when a tenant may be given the node: a free compute node, never anything else."""
    return NodeRole(role) is NodeRole.COMPUTE and NodeState(state) is NodeState.FREE


def keeps_ports(state: str) -> bool:
    """True when an import keeps the node's ports that it no longer lists (and the node's state).

    An allocated node's owner, or a draining node's drain, depends on them: they go only when
    the node is free (or when an import lists a correction in their place).
    """
    return NodeState(state) in (NodeState.ALLOCATED, NodeState.DRAINING)


def guards_its_ports(role: str, state: str) -> bool:
    """True when the node's ports may not change host silently (tenancy/record/port_identity.py).

    A held node (allocated or draining) has an owner whose isolation depends on its ports; a
    storage or management node serves everyone, whatever its state.
    """
    return NodeRole(role) in (NodeRole.STORAGE, NodeRole.MANAGEMENT) or keeps_ports(state)
