"""CONFIG_DB patches restricted by ownership (policies/roce/patch.py).

Properties over generated running/target documents (owned, declared and foreign keys, keys with
``/`` and ``~``), then worked examples: escaping, whole-table adds and removals, refusals.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.errors import ConflictError, PatchRefusedError
from policies.roce.patch import (
    ConfigDb,
    LeafPatch,
    access_removals,
    apply_patch,
    check_patch,
    leaf_patch,
    owned_entries,
)
from tests.policies.test_roce_ownership import OWNERSHIP

# Keys per table; owned ones by OWNERSHIP, the rest declared when the target holds them.
KEYS = {
    "VRF": ["Vrf50001", "Vrf50002", "mgmt"],
    "VLAN": ["Vlan100", "Vlan101", "Vlan10"],
    "VLAN_MEMBER": ["Vlan100|Ethernet0", "Vlan101|Ethernet8", "Vlan10|Ethernet0"],
    "VLAN_INTERFACE": ["Vlan100", "Vlan100|10.64.0.1/24", "Vlan10|192.0.2.1/24"],
    "PORT_QOS_MAP": ["Ethernet0", "Ethernet8", "Ethernet248", "global"],
    "SCHEDULER": ["scheduler.gold", "scheduler.bronze"],
    "ODD~TABLE/X": ["a/b", "c~d", "~1"],
}
FOREIGN_ONLY_TABLES = ("ODD~TABLE/X",)
fields = st.dictionaries(
    st.sampled_from(["mtu", "vlanid", "a/b", "x~y"]), st.sampled_from(["1", "2", "up"]), max_size=3
)


@st.composite
def documents(draw: Any, *, with_foreign_tables: bool) -> ConfigDb:
    document: ConfigDb = {}
    for table, keys in KEYS.items():
        if table in FOREIGN_ONLY_TABLES and not with_foreign_tables:
            continue
        chosen = draw(st.lists(st.sampled_from(keys), unique=True))
        if chosen or draw(st.booleans()):
            document[table] = {key: draw(fields) for key in chosen}
    return document


def targets() -> Any:
    """A target holds only owned and declared keys: nothing foreign by definition."""
    return documents(with_foreign_tables=False)


def _declared(target: ConfigDb) -> list[tuple[str, str]]:
    return [(t, k) for t, keys in target.items() for k in keys if not OWNERSHIP.owns(t, k)]


def _foreign(running: ConfigDb, target: ConfigDb) -> list[tuple[str, str]]:
    return [
        (t, k)
        for t, keys in running.items()
        for k in keys
        if not OWNERSHIP.owns(t, k) and k not in target.get(t, {})
    ]


def full(running: ConfigDb, target: ConfigDb) -> list[dict[str, Any]]:
    return leaf_patch(running, target, OWNERSHIP).operations(allow_disruptive=True)


def check(operations: Any, running: ConfigDb, target: ConfigDb, *, allow: bool) -> None:
    check_patch(operations, running, target, OWNERSHIP, allow_disruptive=allow)


@settings(max_examples=150, deadline=None)
@given(documents(with_foreign_tables=True), targets())
def test_the_full_patch_makes_owned_keys_exact_merges_declared_and_leaves_foreign(running, target):
    before = copy.deepcopy(running)
    result = apply_patch(
        running, leaf_patch(running, target, OWNERSHIP).operations(allow_disruptive=True)
    )
    assert running == before, "apply_patch returns a new document"
    assert owned_entries(result, OWNERSHIP) == owned_entries(target, OWNERSHIP)
    for table, key in _declared(target):
        assert target[table][key].items() <= result[table][key].items()
        assert running.get(table, {}).get(key, {}).keys() <= result[table][key].keys()
    for table, key in _foreign(running, target):
        assert result[table][key] == running[table][key]
    # SONiC GCU refuses a patch that leaves an empty table: only running's empty ones stay.
    assert {t for t, keys in result.items() if not keys} <= {t for t, k in running.items() if not k}
    assert leaf_patch(result, target, OWNERSHIP) == LeafPatch((), ()), "nothing left to do"


def _unowned(document: ConfigDb) -> ConfigDb:
    unowned = {
        table: {key: entry for key, entry in entries.items() if not OWNERSHIP.owns(table, key)}
        for table, entries in document.items()
    }
    return {table: entries for table, entries in unowned.items() if entries}


@settings(max_examples=100, deadline=None)
@given(documents(with_foreign_tables=True), targets())
def test_the_owned_patch_changes_only_owned_keys(running, target):
    result = apply_patch(
        running, leaf_patch(running, target, OWNERSHIP).operations(allow_disruptive=False)
    )
    assert owned_entries(result, OWNERSHIP) == owned_entries(target, OWNERSHIP)
    unowned = {
        t: {k: v for k, v in keys.items() if not OWNERSHIP.owns(t, k)} for t, keys in result.items()
    }
    expected = {
        t: {k: v for k, v in keys.items() if not OWNERSHIP.owns(t, k)}
        for t, keys in running.items()
    }
    assert {t: k for t, k in unowned.items() if k} == {t: k for t, k in expected.items() if k}


@settings(max_examples=100, deadline=None)
@given(documents(with_foreign_tables=True), targets())
def test_own_patches_pass_the_check_and_are_deterministic(running, target):
    patch = leaf_patch(running, target, OWNERSHIP)
    check_patch(
        patch.operations(allow_disruptive=False), running, target, OWNERSHIP, allow_disruptive=False
    )
    check_patch(
        patch.operations(allow_disruptive=True), running, target, OWNERSHIP, allow_disruptive=True
    )
    reordered = {t: dict(reversed(keys.items())) for t, keys in reversed(running.items())}
    assert leaf_patch(reordered, target, OWNERSHIP) == patch
    assert all(op["op"] != "remove" for op in patch.disruptive), "declared keys are never removed"
    if patch.disruptive:
        with pytest.raises(PatchRefusedError, match="disruptive"):
            check_patch(
                patch.operations(allow_disruptive=True),
                running,
                target,
                OWNERSHIP,
                allow_disruptive=False,
            )


def test_a_key_with_a_slash_or_a_tilde_is_escaped_in_the_path():
    target: ConfigDb = {
        "VLAN_INTERFACE": {"Vlan100|10.64.0.1/24": {}},
        "ODD~T": {"a/b~c": {"f/g": "1"}},
    }
    running: ConfigDb = {"VLAN_INTERFACE": {"Vlan100": {}}, "ODD~T": {"a/b~c": {}}}
    patch = leaf_patch(running, target, OWNERSHIP)
    assert patch.owned == (
        {"op": "remove", "path": "/VLAN_INTERFACE/Vlan100"},
        {"op": "add", "path": "/VLAN_INTERFACE/Vlan100|10.64.0.1~124", "value": {}},
    )
    assert patch.disruptive == ({"op": "add", "path": "/ODD~0T/a~1b~0c/f~1g", "value": "1"},)
    result = apply_patch(running, patch.operations(allow_disruptive=True))
    assert result == target


def test_a_table_the_switch_lacks_is_added_whole_and_a_table_left_empty_is_removed():
    running: ConfigDb = {"VRF": {"Vrf50001": {"vni": "50001"}}, "PORT": {"Ethernet0": {}}}
    target: ConfigDb = {
        "PORT": {"Ethernet0": {}},
        "VLAN": {"Vlan100": {"vlanid": "100"}, "Vlan101": {"vlanid": "101"}},
        "PORT_QOS_MAP": {"Ethernet0": {"tc_to_queue_map": "AI"}, "global": {"dscp": "AI"}},
    }
    patch = leaf_patch(running, target, OWNERSHIP)
    assert patch.owned == (
        {"op": "remove", "path": "/VRF"},
        {"op": "add", "path": "/PORT_QOS_MAP", "value": {"Ethernet0": {"tc_to_queue_map": "AI"}}},
        {"op": "add", "path": "/VLAN", "value": target["VLAN"]},
    )
    # `global` is declared: it joins the table the owned add creates.
    assert patch.disruptive == (
        {"op": "add", "path": "/PORT_QOS_MAP/global", "value": {"dscp": "AI"}},
    )
    assert apply_patch(running, patch.operations(allow_disruptive=True)) == target


def test_declared_keys_of_a_table_the_owned_ops_remove_come_back_as_a_whole_table():
    running: ConfigDb = {"PORT_QOS_MAP": {"Ethernet0": {"a": "1"}}}
    target: ConfigDb = {"PORT_QOS_MAP": {"global": {"dscp": "AI"}}}
    patch = leaf_patch(running, target, OWNERSHIP)
    assert patch.owned == ({"op": "remove", "path": "/PORT_QOS_MAP"},)
    whole = {"op": "add", "path": "/PORT_QOS_MAP", "value": target["PORT_QOS_MAP"]}
    assert patch.disruptive == (whole,)
    assert apply_patch(running, patch.operations(allow_disruptive=True)) == target
    assert apply_patch(running, patch.operations(allow_disruptive=False)) == {}


def test_declared_entries_change_field_by_field_and_keep_running_extras():
    running: ConfigDb = {"PORT": {"Ethernet0": {"mtu": "1500", "fec": "rs", "speed": "400000"}}}
    target: ConfigDb = {"PORT": {"Ethernet0": {"mtu": "9000", "speed": "400000", "lanes": "0"}}}
    patch = leaf_patch(running, target, OWNERSHIP)
    assert patch.owned == ()
    assert patch.disruptive == (
        {"op": "add", "path": "/PORT/Ethernet0/lanes", "value": "0"},
        {"op": "replace", "path": "/PORT/Ethernet0/mtu", "value": "9000"},
    )
    result = apply_patch(running, patch.operations(allow_disruptive=True))
    merged = {"mtu": "9000", "fec": "rs", "speed": "400000", "lanes": "0"}
    assert result["PORT"]["Ethernet0"] == merged


RUNNING: ConfigDb = {
    "VLAN": {"Vlan100": {"vlanid": "100"}, "Vlan10": {"vlanid": "10"}},
    "VRF": {"Vrf50001": {"vni": "50001"}},
    "PORT": {"Ethernet0": {"mtu": "9000"}},
    "ACL_TABLE": {"DATAACL": {"type": "L3"}},
}
TARGET: ConfigDb = {"VLAN": {"Vlan100": {"vlanid": "100"}}, "PORT": {"Ethernet0": {"mtu": "9100"}}}


@pytest.mark.parametrize(
    ("operation", "reason"),
    [
        ({"op": "remove", "path": "/VLAN/Vlan10"}, "foreign"),
        ({"op": "replace", "path": "/VLAN/Vlan10/vlanid", "value": "11"}, "foreign"),
        ({"op": "add", "path": "/ACL_TABLE/DATAACL/type", "value": "L2"}, "foreign"),
        ({"op": "remove", "path": "/VLAN"}, "foreign"),  # it holds Vlan10
        ({"op": "add", "path": "/VLAN", "value": {"Vlan100": {}}}, "foreign"),  # replaces it
        ({"op": "add", "path": "/NEW", "value": {"k": {}}}, "foreign"),
        ({"op": "move", "from": "/VLAN/Vlan10", "path": "/VLAN/Vlan101"}, "foreign"),
        ({"op": "replace", "path": "/PORT/Ethernet0/mtu", "value": "9100"}, "disruptive"),
        ({"op": "remove", "path": "/PORT/Ethernet0"}, "disruptive"),
        ({"op": "remove", "path": ""}, "invalid"),
        ({"op": "add", "path": "/VLAN", "value": "not a table"}, "invalid"),
        ({"op": "copy", "from": "/VLAN", "path": "/VRF"}, "invalid"),
        ({"op": "merge", "path": "/VLAN/Vlan100"}, "invalid"),
        ({"op": "remove", "path": "VLAN/Vlan100"}, "invalid"),  # not a JSON Pointer
        ("remove /VLAN", "invalid"),
    ],
)
def test_a_crafted_operation_is_refused_naming_its_path_and_reason(operation, reason):
    with pytest.raises(PatchRefusedError) as refused:
        check_patch([operation], RUNNING, TARGET, OWNERSHIP, allow_disruptive=False)
    (entry,) = refused.value.extensions["refused"]
    assert entry["reason"] == reason
    assert f"({reason})" in refused.value.detail


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "remove", "path": "/VRF"},  # every key of running's VRF is owned
        {"op": "remove", "path": "/VLAN/Vlan100"},
        {"op": "add", "path": "/VLAN/Vlan200", "value": {}},
        {"op": "copy", "from": "/VLAN/Vlan10", "path": "/VLAN/Vlan200"},
        {"op": "test", "path": "/ACL_TABLE/DATAACL/type", "value": "L3"},
    ],
)
def test_operations_on_owned_keys_pass(operation):
    check_patch([operation], RUNNING, TARGET, OWNERSHIP, allow_disruptive=False)


def test_a_declared_change_passes_only_with_the_flag_and_every_offender_is_named():
    declared = {"op": "replace", "path": "/PORT/Ethernet0/mtu", "value": "9100"}
    check_patch([declared], RUNNING, TARGET, OWNERSHIP, allow_disruptive=True)
    foreign = {"op": "remove", "path": "/ACL_TABLE/DATAACL"}
    with pytest.raises(PatchRefusedError) as refused:
        check_patch([declared, foreign], RUNNING, TARGET, OWNERSHIP, allow_disruptive=False)
    assert refused.value.extensions["refused"] == [
        {"op": "replace", "path": "/PORT/Ethernet0/mtu", "reason": "disruptive"},
        {"op": "remove", "path": "/ACL_TABLE/DATAACL", "reason": "foreign"},
    ]


def test_a_patch_that_does_not_fit_the_document_is_a_conflict():
    with pytest.raises(ConflictError, match="does not apply"):
        apply_patch(RUNNING, [{"op": "remove", "path": "/VLAN/Vlan999"}])


def test_access_removals_remove_only_owned_members_the_target_lacks():
    running: ConfigDb = {
        "VLAN_MEMBER": {
            "Vlan100|Ethernet0": {},
            "Vlan101|Ethernet8": {},
            "Vlan10|Ethernet0": {},  # foreign: outside the VLAN range
        },
        "VRF": {"Vrf50001": {}},
    }
    target: ConfigDb = {"VLAN_MEMBER": {"Vlan100|Ethernet0": {}}}
    assert access_removals(running, target, OWNERSHIP) == [
        {"op": "remove", "path": "/VLAN_MEMBER/Vlan101|Ethernet8"}
    ]
    del running["VLAN_MEMBER"]["Vlan10|Ethernet0"]
    assert access_removals(running, {}, OWNERSHIP) == [{"op": "remove", "path": "/VLAN_MEMBER"}]
    assert access_removals(running, running, OWNERSHIP) == []
    assert access_removals({}, target, OWNERSHIP) == []


def test_owned_entries_are_copies_of_the_owned_keys_only():
    owned = owned_entries(RUNNING, OWNERSHIP)
    assert owned == {"VLAN": {"Vlan100": {"vlanid": "100"}}, "VRF": {"Vrf50001": {"vni": "50001"}}}
    owned["VLAN"]["Vlan100"]["vlanid"] = "7"
    assert RUNNING["VLAN"]["Vlan100"] == {"vlanid": "100"}
