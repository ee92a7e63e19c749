"""What isofabric owns on a RoCE leaf (policies/roce/ownership.py) and its ownership.json."""

from __future__ import annotations

import json

import pytest

from policies.errors import InvalidValueError, NotFoundError
from policies.roce.ownership import LeafOwnership, leaf_ownership
from tests.policies.roce_snapshots import roce_snapshot

OWNERSHIP = LeafOwnership(
    leaf="leaf01",
    vlan_range=(100, 3999),
    l2vni_range=(10000, 19999),
    l3vni_range=(50000, 59999),
    host_ports=frozenset({"Ethernet0", "Ethernet8"}),
    vtep="vtep",
)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("VRF", "Vrf50000"),
        ("VRF", "Vrf59999"),
        ("VLAN", "Vlan100"),
        ("VLAN", "Vlan3999"),
        ("VLAN_MEMBER", "Vlan100|Ethernet0"),
        ("VLAN_MEMBER", "Vlan3001|Ethernet248"),
        ("VLAN_INTERFACE", "Vlan100"),
        ("VLAN_INTERFACE", "Vlan100|10.64.0.1/24"),
        ("VXLAN_TUNNEL_MAP", "vtep|map_10000_Vlan100"),
        ("VXLAN_TUNNEL_MAP", "vtep|map_50001_Vlan3001"),
        ("SAG", "GLOBAL"),
        ("PORT_QOS_MAP", "Ethernet0"),
    ],
)
def test_the_keys_rendered_per_tenant_inside_the_pools_are_owned(table, key):
    assert OWNERSHIP.owns(table, key)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("VRF", "Vrf49999"),  # below the L3VNI range
        ("VRF", "Vrf60000"),
        ("VRF", "Vrf050000"),  # not the canonical number the renderer writes
        ("VRF", "mgmt"),
        ("VRF", "Vrf"),
        ("VLAN", "Vlan99"),
        ("VLAN", "Vlan4000"),
        ("VLAN", "Vlan+100"),
        ("VLAN", "vlan100"),
        ("VLAN_MEMBER", "Vlan10|Ethernet0"),
        ("VLAN_MEMBER", "Vlan100"),  # a member names a port
        ("VLAN_MEMBER", "Vlan100|"),
        ("VLAN_INTERFACE", "Vlan4000|10.0.0.1/24"),
        ("VLAN_INTERFACE", "Vlan100|"),
        ("VXLAN_TUNNEL_MAP", "other|map_10000_Vlan100"),  # another tunnel
        ("VXLAN_TUNNEL_MAP", "vtep|map_9999_Vlan100"),  # a VNI outside both ranges
        ("VXLAN_TUNNEL_MAP", "vtep|map_20000_Vlan100"),
        ("VXLAN_TUNNEL_MAP", "vtep|map_10000"),
        ("VXLAN_TUNNEL_MAP", "vtep|10000_Vlan100"),
        ("SAG", "OTHER"),
        ("PORT_QOS_MAP", "Ethernet248"),  # a fabric port: declared, not owned
        ("PORT_QOS_MAP", "global"),
        ("PORT", "Ethernet0"),
        ("VXLAN_TUNNEL", "vtep"),
        ("DSCP_TO_TC_MAP", "AI_FABRIC"),
        ("SCHEDULER", "scheduler.bronze"),
        ("QUEUE", "Ethernet0|1"),
        ("BUFFER_PG", "Ethernet0|3"),
    ],
)
def test_everything_else_is_not_owned(table, key):
    assert not OWNERSHIP.owns(table, key)


def test_a_leafs_ownership_is_the_fabrics_pools_and_its_cabled_host_ports():
    ownership = leaf_ownership(roce_snapshot(), "leaf01")
    assert ownership == LeafOwnership(
        leaf="leaf01",
        vlan_range=(100, 3999),
        l2vni_range=(10000, 19999),
        l3vni_range=(50000, 59999),
        # every NIC's port, the free node's (gpu0004, Ethernet24) too; not the uplink Ethernet248
        host_ports=frozenset({"Ethernet0", "Ethernet8", "Ethernet16", "Ethernet24", "Ethernet32"}),
        vtep="vtep",
    )


@pytest.mark.parametrize(("leaf", "error"), [("spine01", InvalidValueError), ("x", NotFoundError)])
def test_only_a_leaf_with_a_vtep_has_an_ownership(leaf, error):
    with pytest.raises(error):
        leaf_ownership(roce_snapshot(), leaf)


def test_ownership_json_is_sorted_indented_and_reads_back():
    text = OWNERSHIP.to_json()
    assert text == (
        "{\n"
        '  "host_ports": [\n    "Ethernet0",\n    "Ethernet8"\n  ],\n'
        '  "l2vni_range": [\n    10000,\n    19999\n  ],\n'
        '  "l3vni_range": [\n    50000,\n    59999\n  ],\n'
        '  "leaf": "leaf01",\n'
        '  "vlan_range": [\n    100,\n    3999\n  ],\n'
        '  "vtep": "vtep"\n'
        "}\n"
    )
    assert LeafOwnership.from_json(text) == OWNERSHIP


def _document(**changes: object) -> str:
    document = json.loads(OWNERSHIP.to_json())
    document.update(changes)
    return json.dumps({k: v for k, v in document.items() if v is not None})


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        "{",
        _document(leaf=None),  # a field missing
        _document(extra=1),
        _document(leaf=""),
        _document(leaf=7),
        _document(vtep=" vtep"),
        _document(vlan_range=[100]),
        _document(vlan_range=[4000, 100]),
        _document(vlan_range=[100, "3999"]),
        _document(vlan_range=[True, 3999]),
        _document(l2vni_range=[-1, 5]),
        _document(l3vni_range={"first": 1, "last": 2}),
        _document(host_ports="Ethernet0"),
        _document(host_ports=["Ethernet0", 8]),
        _document(host_ports=[""]),
    ],
)
def test_a_malformed_ownership_json_is_an_invalid_value(text):
    with pytest.raises(InvalidValueError, match=r"ownership\.json"):
        LeafOwnership.from_json(text)
