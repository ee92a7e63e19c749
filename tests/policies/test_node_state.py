"""The node state table (issue 10, item 4): every transition it allows, every one it refuses, and
which nodes are allocatable or guard their ports."""

from __future__ import annotations

import itertools

import pytest

from policies.errors import ConflictError
from policies.model import NodeRole
from policies.node_state import (
    TRANSITIONS,
    NodeEvent,
    NodeState,
    advance,
    allocatable,
    guards_its_ports,
    keeps_ports,
)

ALLOWED = {
    ("free", "hold"): "allocated",
    ("allocated", "release"): "free",
    ("allocated", "drain"): "draining",
    ("draining", "drained"): "free",
    ("free", "vanish"): "absent",
    ("absent", "reappear"): "free",
    ("allocated", "vanish"): "allocated",
    ("draining", "vanish"): "draining",
    ("absent", "vanish"): "absent",
    ("free", "reappear"): "free",
    ("allocated", "reappear"): "allocated",
    ("draining", "reappear"): "draining",
}


def test_the_table_is_exactly_the_documented_transitions():
    assert {(s.value, e.value): n.value for (s, e), n in TRANSITIONS.items()} == ALLOWED


@pytest.mark.parametrize(("state", "event"), sorted(ALLOWED))
def test_an_allowed_event_moves_the_node_to_the_tables_state(state, event):
    assert advance(state, NodeEvent(event), node="gpu0001") == ALLOWED[(state, event)]


REFUSED = sorted(
    (state.value, event.value)
    for state, event in itertools.product(NodeState, NodeEvent)
    if (state.value, event.value) not in ALLOWED
)


@pytest.mark.parametrize(("state", "event"), REFUSED)
def test_any_other_event_is_a_conflict_naming_the_node_and_its_state(state, event):
    with pytest.raises(ConflictError) as refused:
        advance(state, NodeEvent(event), node="gpu0001")

    assert refused.value.extensions == {"node": "gpu0001", "state": state}
    assert "gpu0001" in refused.value.detail


def test_an_absent_node_cannot_be_held_and_says_why():
    with pytest.raises(ConflictError, match=r"absent .*cannot be held"):
        advance("absent", NodeEvent.HOLD, node="gpu0008")


@pytest.mark.parametrize("state", list(NodeState))
@pytest.mark.parametrize("role", list(NodeRole))
def test_only_a_free_compute_node_is_allocatable(role, state):
    assert allocatable(role, state) == (role is NodeRole.COMPUTE and state is NodeState.FREE)


@pytest.mark.parametrize("state", list(NodeState))
@pytest.mark.parametrize("role", list(NodeRole))
def test_held_storage_and_management_nodes_guard_their_ports(role, state):
    expected = role is not NodeRole.COMPUTE or state in (NodeState.ALLOCATED, NodeState.DRAINING)

    assert guards_its_ports(role, state) == expected
    assert keeps_ports(state) == (state in (NodeState.ALLOCATED, NodeState.DRAINING))
