"""RoCE observed state: CONFIG_DB and FRR read into one shape, drift and violations vs intent.

Each drift code is produced by one literal change to the rendered leaf (leaf01 of the shared
RoCE fabric: gpu0001/gpu0002 acme on Ethernet0/8, gpu0003 globex on Ethernet16, gpu0004 free on
Ethernet24, stor01 storage on Ethernet32, uplink Ethernet248).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from policies.config_audit import observed_counterexamples
from policies.errors import InputFormatError
from policies.model import Owner
from policies.roce.observations import LeafDrift, compare_leaf
from policies.roce.observed import (
    EvpnVni,
    FrrState,
    LeafState,
    TunnelMap,
    evpn_vnis,
    intended_frr_state,
    leaf_state,
    running_frr_state,
)
from policies.roce.render_frr import render_frr_conf
from policies.roce.render_sonic import render_config_db
from policies.verdict import Counterexample, Rule
from tests.policies.roce_snapshots import roce_snapshot

LEAF = "leaf01"
SNAPSHOT = roce_snapshot()


def rendered() -> dict[str, Any]:
    return copy.deepcopy(render_config_db(SNAPSHOT, LEAF))


def vni_json(state: FrrState) -> str:
    """What bgpd prints for `state`'s VNIs, with its global members around them."""
    document: dict[str, Any] = {"advertiseAllVnis": "Enabled", "numVnis": len(state.vnis)}
    for vni in state.vnis.values():
        document[str(vni.vni)] = {
            "vni": vni.vni,
            "type": vni.kind,
            "inKernel": "True",
            "importRTs": sorted(vni.imports),
            "exportRTs": sorted(vni.exports),
        }
    return json.dumps(document)


def codes(drift: tuple[LeafDrift, ...]) -> list[tuple[str, str]]:
    return [(d.code, d.subject) for d in drift]


def violations(state: LeafState, frr: FrrState | None = None) -> tuple[Counterexample, ...]:
    imports = frr.vrf_imports if frr is not None else {}
    return observed_counterexamples(SNAPSHOT, LEAF, state.members_by_vlan(), imports)


# --- reading -----------------------------------------------------------------------------------


def test_leaf_state_reads_members_vrfs_maps_and_qos_with_list_fields_joined():
    tables: dict[str, dict[str, dict[str, Any]]] = {
        "VLAN_MEMBER": {"Vlan100|Ethernet0": {}, "Vlan101|Ethernet0": {}, "Vlan100": {}},
        "VRF": {"Vrf50001": {"vni": "50001"}, "Vrf50009": {}},
        "VXLAN_TUNNEL_MAP": {"vtep|map_10000_Vlan100": {"vni": "10000", "vlan": "Vlan100"}},
        "PORT_QOS_MAP": {"Ethernet0": {"pfc_enable": ["3", "4"], "dscp_to_tc_map": "X"}},
    }

    state = leaf_state(tables)

    assert state.vlan_members == {"Ethernet0": frozenset({"Vlan100", "Vlan101"})}
    assert state.vrfs == {"Vrf50001": 50001, "Vrf50009": None}
    assert state.tunnel_maps == frozenset(
        {TunnelMap("vtep", "map_10000_Vlan100", 10000, "Vlan100")}
    )
    assert state.port_qos == {"Ethernet0": {"pfc_enable": "3,4", "dscp_to_tc_map": "X"}}


def test_evpn_vnis_reads_bgpds_json_and_ignores_its_global_members():
    text = json.dumps(
        {
            "advertiseGatewayMacip": "Disabled",
            "numVnis": 2,
            "10000": {"vni": 10000, "type": "L2", "importRTs": ["65000:10000"], "exportRTs": []},
            "50001": {"vni": 50001, "type": "L3", "importRTs": ["RT:65000:50001"]},
        }
    )

    assert evpn_vnis(text) == {
        10000: EvpnVni(10000, "L2", frozenset({"65000:10000"}), frozenset()),
        50001: EvpnVni(50001, "L3", frozenset({"65000:50001"}), frozenset()),
    }
    assert evpn_vnis("") == {}


@pytest.mark.parametrize("text", ["% Unknown command", "[1, 2]"])
def test_evpn_vnis_refuses_what_is_not_bgpds_json_object(text):
    with pytest.raises(InputFormatError, match="evpn vni json"):
        evpn_vnis(text)


# --- no drift ----------------------------------------------------------------------------------


def test_the_rendered_leaf_and_its_running_frr_show_no_drift():
    intended = intended_frr_state(SNAPSHOT, LEAF)
    frr = running_frr_state(render_frr_conf(SNAPSHOT, LEAF), vni_json(intended))

    drift = compare_leaf(SNAPSHOT, LEAF, leaf_state(rendered()), frr)

    assert drift == ()
    assert violations(leaf_state(rendered()), frr) == ()
    assert set(frr.vnis) == {10000, 10001, 10002, 50000, 50001, 50002}


def test_keys_the_operator_owns_are_not_drift():
    tables = rendered()
    tables["VLAN_MEMBER"]["Vlan4000|Ethernet248"] = {"tagging_mode": "tagged"}  # not a tenant's
    tables["VRF"]["mgmt"] = {}
    tables["VXLAN_TUNNEL_MAP"]["vtep|map_7_Vlan7"] = {"vni": "7", "vlan": "Vlan7"}

    assert compare_leaf(SNAPSHOT, LEAF, leaf_state(tables)) == ()


# --- VLAN members --------------------------------------------------------------------------------


def test_another_tenants_port_in_a_vlan_is_unexpected_and_a_violation():
    tables = rendered()
    tables["VLAN_MEMBER"]["Vlan100|Ethernet16"] = {"tagging_mode": "untagged"}  # globex in acme's

    drift = compare_leaf(SNAPSHOT, LEAF, leaf_state(tables))

    [found] = drift
    assert (found.code, found.subject, found.node) == (
        "vlan-member-unexpected",
        "Ethernet16",
        "gpu0003",
    )
    assert found.owner == Owner.tenant("globex")
    assert (found.expected, found.observed) == (("Vlan101",), ("Vlan100", "Vlan101"))
    [violation] = violations(leaf_state(tables))
    assert violation.rule is Rule.CROSS_TENANT


def test_a_port_missing_from_its_vlan_is_drift_but_no_violation():
    tables = rendered()
    del tables["VLAN_MEMBER"]["Vlan100|Ethernet8"]

    drift = compare_leaf(SNAPSHOT, LEAF, leaf_state(tables))

    assert codes(drift) == [("vlan-member-missing", "Ethernet8")]
    assert drift[0].message == "Ethernet8 (gpu0002) is missing from Vlan100"
    assert violations(leaf_state(tables)) == ()


def test_an_uplink_in_a_tenant_vlan_is_unexpected():
    tables = rendered()
    tables["VLAN_MEMBER"]["Vlan101|Ethernet248"] = {"tagging_mode": "tagged"}

    assert codes(compare_leaf(SNAPSHOT, LEAF, leaf_state(tables))) == [
        ("vlan-member-unexpected", "Ethernet248")
    ]


# --- drain before reuse ------------------------------------------------------------------------


def test_a_draining_nodes_port_in_a_tenant_vlan_is_a_finding_on_that_node():
    tables = rendered()
    tables["VLAN_MEMBER"]["Vlan101|Ethernet24"] = {"tagging_mode": "untagged"}  # gpu0004's

    drift = compare_leaf(SNAPSHOT, LEAF, leaf_state(tables), draining={"gpu0004"})

    drain = [d for d in drift if d.code == "draining-port-in-tenant-vlan"]
    assert [(d.node, d.subject, d.observed) for d in drain] == [
        ("gpu0004", "Ethernet24", ("Vlan101",))
    ]
    assert "may not be reused" in drain[0].message


def test_a_draining_node_whose_port_left_every_tenant_vlan_has_no_finding():
    drift = compare_leaf(SNAPSHOT, LEAF, leaf_state(rendered()), draining={"gpu0004"})

    assert drift == ()


# --- VRFs, tunnel maps, QoS ----------------------------------------------------------------------


def test_vrf_drift_unexpected_missing_and_wrong_vni():
    tables = rendered()
    tables["VRF"]["Vrf50009"] = {"vni": "50009"}
    del tables["VRF"]["Vrf50000"]
    tables["VRF"]["Vrf50001"] = {"vni": "50002"}

    drift = compare_leaf(SNAPSHOT, LEAF, leaf_state(tables))

    assert codes(drift) == [
        ("vrf-missing", "Vrf50000"),
        ("vrf-vni", "Vrf50001"),
        ("vrf-unexpected", "Vrf50009"),
    ]
    assert drift[1].observed == ("50002",)


def test_tunnel_map_drift_unexpected_and_missing():
    tables = rendered()
    tables["VXLAN_TUNNEL_MAP"]["vtep|map_10005_Vlan105"] = {"vni": "10005", "vlan": "Vlan105"}
    del tables["VXLAN_TUNNEL_MAP"]["vtep|map_10001_Vlan101"]

    assert codes(compare_leaf(SNAPSHOT, LEAF, leaf_state(tables))) == [
        ("tunnel-map-unexpected", "vtep|map_10005_Vlan105"),
        ("tunnel-map-missing", "vtep|map_10001_Vlan101"),
    ]


def test_a_bronze_port_bound_to_the_gold_map_is_port_qos_drift():
    tables = rendered()
    tables["PORT_QOS_MAP"]["Ethernet16"]["dscp_to_tc_map"] = "TENANT_GOLD"

    [drift] = compare_leaf(SNAPSHOT, LEAF, leaf_state(tables))

    assert (drift.code, drift.subject) == ("port-qos", "Ethernet16")
    assert "dscp_to_tc_map=TENANT_GOLD" in drift.observed
    assert "dscp_to_tc_map=TENANT_BRONZE" in drift.expected


# --- FRR -----------------------------------------------------------------------------------------


def frr_with(running: str, vnis: dict[int, EvpnVni] | None = None) -> FrrState:
    intended = intended_frr_state(SNAPSHOT, LEAF)
    return running_frr_state(running, vni_json(FrrState(vnis or dict(intended.vnis), {})))


def test_an_import_the_model_does_not_have_is_a_leak_and_a_violation():
    running = render_frr_conf(SNAPSHOT, LEAF).replace(
        "  route-target import 65000:50002\n",
        "  route-target import 65000:50002\n  route-target import 65000:50001\n",
    )

    frr = frr_with(running)
    drift = compare_leaf(SNAPSHOT, LEAF, leaf_state(rendered()), frr)

    assert codes(drift) == [("route-target-leak", "Vrf50002")]
    assert drift[0].message == "Vrf50002 imports 65000:50001, which the model does not"
    [violation] = violations(leaf_state(rendered()), frr)
    assert violation.rule is Rule.CROSS_TENANT


def test_a_revoked_grants_import_left_behind_is_a_leak():
    revoked = roce_snapshot(grants=())
    running = render_frr_conf(SNAPSHOT, LEAF)  # still the granted state
    intended = intended_frr_state(revoked, LEAF)
    frr = running_frr_state(running, vni_json(intended))

    drift = compare_leaf(revoked, LEAF, leaf_state(render_config_db(revoked, LEAF)), frr)

    assert codes(drift) == [("route-target-leak", "Vrf50000"), ("route-target-leak", "Vrf50001")]


def test_a_missing_import_and_a_stale_vrf_instance():
    text = render_frr_conf(SNAPSHOT, LEAF)
    running = text.replace(
        "  route-target import 65000:50000\n  route-target export", "  route-target export"
    )
    running += (
        "router bgp 65101 vrf Vrf50007\n address-family l2vpn evpn\n"
        "  route-target import 65000:50007\n exit-address-family\nexit\n"
    )

    drift = compare_leaf(SNAPSHOT, LEAF, leaf_state(rendered()), frr_with(running))

    assert codes(drift) == [
        ("route-target-import-missing", "Vrf50001"),
        ("frr-vrf-unexpected", "Vrf50007"),
    ]


def test_vni_drift_wrong_targets_unexpected_and_missing():
    vnis = dict(intended_frr_state(SNAPSHOT, LEAF).vnis)
    vnis[10001] = EvpnVni(10001, "L2", frozenset({"65000:10000"}), frozenset({"65000:10001"}))
    vnis[10009] = EvpnVni(10009, "L2", frozenset(), frozenset())
    del vnis[10002]
    del vnis[50002]  # an L3VNI bgpd does not list (no VRF device): not drift

    drift = compare_leaf(
        SNAPSHOT, LEAF, leaf_state(rendered()), frr_with(render_frr_conf(SNAPSHOT, LEAF), vnis)
    )

    assert codes(drift) == [
        ("vni-route-targets", "10001"),
        ("vni-missing", "10002"),
        ("vni-unexpected", "10009"),
    ]
    assert drift[0].observed == ("export 65000:10001", "import 65000:10000")
