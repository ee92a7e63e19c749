"""SONiC config_db renderer: reviewed golden file, determinism and isolation invariants."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from policies.errors import InvalidValueError, NotFoundError
from policies.model import Owner
from policies.roce.model import CNP_DSCP, CNP_TC, RoceQos
from policies.roce.render_sonic import render_config_db, render_config_db_json
from tests.golden import assert_golden
from tests.policies.roce_snapshots import BRONZE, GOLD, roce_snapshot

LEAVES = ("leaf01", "leaf02")


def test_leaf01_config_db_matches_the_reviewed_golden_file():
    assert_golden("sonic-leaf01-config_db.json", render_config_db_json(roce_snapshot(), "leaf01"))


def test_rendering_is_byte_identical_for_equal_state_and_input_order():
    snapshot = roce_snapshot()
    shuffled = dataclasses.replace(
        snapshot,
        nics=tuple(reversed(snapshot.nics)),
        segments=tuple(reversed(snapshot.segments)),
        qos_classes=tuple(reversed(snapshot.qos_classes)),
        links=tuple(reversed(snapshot.links)),
    )

    for leaf in LEAVES:
        text = render_config_db_json(snapshot, leaf)
        assert text == render_config_db_json(roce_snapshot(), leaf)
        assert text == render_config_db_json(shuffled, leaf)
        assert text.endswith("}\n")


def test_every_value_is_a_string_as_config_db_stores_it():
    config = render_config_db(roce_snapshot(), "leaf01")

    values = [v for table in config.values() for row in table.values() for v in row.values()]
    assert values
    assert all(isinstance(v, str) for v in values)


def test_unknown_leaf_and_spine_are_refused():
    with pytest.raises(NotFoundError):
        render_config_db(roce_snapshot(), "leaf99")
    with pytest.raises(InvalidValueError):
        render_config_db(roce_snapshot(), "spine01")


def _member_ports(config, vlan: int) -> set[str]:
    return {
        key.split("|")[1] for key in config.get("VLAN_MEMBER", {}) if key.startswith(f"Vlan{vlan}|")
    }


def test_a_tenant_is_only_on_the_leaves_where_it_has_ports():
    snapshot = roce_snapshot()
    # globex (gpu0003) only on rail 0: drop its leaf02 NIC.
    snapshot = dataclasses.replace(
        snapshot,
        nics=tuple(n for n in snapshot.nics if (n.node, n.switch) != ("gpu0003", "leaf02")),
    )
    globex = next(s for s in snapshot.segments if s.owner == Owner.tenant("globex"))
    leaf01 = render_config_db(snapshot, "leaf01")
    leaf02 = render_config_db(snapshot, "leaf02")

    assert _member_ports(leaf01, globex.vlan) == {"Ethernet16"}
    assert _member_ports(leaf02, globex.vlan) == set()
    assert globex.vrf in leaf01["VRF"]
    assert globex.vrf not in leaf02["VRF"]
    assert f"Vlan{globex.vlan}" not in leaf02["VLAN"]
    assert not any(str(globex.l2vni) in k for k in leaf02["VXLAN_TUNNEL_MAP"])


def test_vlan_members_are_exactly_the_owners_host_ports():
    config = render_config_db(roce_snapshot(), "leaf01")

    assert _member_ports(config, 100) == {"Ethernet0", "Ethernet8"}  # acme: gpu0001, gpu0002
    assert _member_ports(config, 101) == {"Ethernet16"}  # globex: gpu0003
    assert _member_ports(config, 102) == {"Ethernet32"}  # storage: stor01
    # gpu0004 is unallocated: its port is in no VLAN; the fabric port is never a member.
    members = {k.split("|")[1] for k in config["VLAN_MEMBER"]}
    assert "Ethernet24" not in members
    assert "Ethernet248" not in members
    assert {v["tagging_mode"] for v in config["VLAN_MEMBER"].values()} == {"untagged"}


def test_host_ports_use_their_owners_class_map_and_fabric_ports_the_fabric_map():
    config = render_config_db(roce_snapshot(), "leaf01")
    qos = config["PORT_QOS_MAP"]
    maps = config["DSCP_TO_TC_MAP"]

    assert qos["Ethernet0"]["dscp_to_tc_map"] == "TENANT_GOLD"
    assert qos["Ethernet16"]["dscp_to_tc_map"] == "TENANT_BRONZE"
    assert qos["Ethernet32"]["dscp_to_tc_map"] == "TENANT_BEST_EFFORT"  # service without class
    assert qos["Ethernet248"]["dscp_to_tc_map"] == "AI_FABRIC"
    assert qos["global"] == {"dscp_to_tc_map": "AI_FABRIC"}
    # A bronze host marking the gold DSCP still lands in the bronze TC at the first hop.
    assert maps["TENANT_BRONZE"][str(GOLD.dscp)] == str(BRONZE.tc)
    assert set(maps["TENANT_GOLD"]) == {str(d) for d in range(64)}
    assert maps["AI_FABRIC"] == {"0": "0", "10": "1", "26": "3", "28": "4", "48": "6"}


@pytest.mark.parametrize("leaf", LEAVES)
def test_cnp_is_always_48_to_6_strict_and_never_pfc(leaf: str):
    config = render_config_db(roce_snapshot(), leaf)

    for table in config["DSCP_TO_TC_MAP"].values():
        assert table[str(CNP_DSCP)] == str(CNP_TC)
    assert config["SCHEDULER"]["scheduler.cnp"] == {"type": "STRICT"}
    for key, queue in config["QUEUE"].items():
        if key.endswith(f"|{CNP_TC}"):
            assert queue == {"scheduler": "scheduler.cnp"}
    for fields in config["PORT_QOS_MAP"].values():
        assert str(CNP_TC) not in fields.get("pfc_enable", "").split(",")
        assert str(CNP_TC) not in fields.get("pfcwd_sw_enable", "").split(",")


@pytest.mark.parametrize("leaf", LEAVES)
def test_pfc_is_exactly_the_lossless_classes_with_buffers_ecn_and_watchdog(leaf: str):
    snapshot = roce_snapshot()
    lossless = sorted(c.tc for c in snapshot.qos_classes if c.lossless)
    config = render_config_db(snapshot, leaf)
    ports = [p for p in config["PORT_QOS_MAP"] if p != "global"]

    assert ports
    for port in ports:
        fields = config["PORT_QOS_MAP"][port]
        assert fields["pfc_enable"] == ",".join(map(str, lossless)) == "3,4"
        assert fields["pfcwd_sw_enable"] == fields["pfc_enable"]
        assert config["BUFFER_PG"][f"{port}|0"] == {"profile": "ingress_lossy_profile"}
        assert port in config["PFC_WD"]
        for tc in lossless:
            assert config["BUFFER_PG"][f"{port}|{tc}"]["profile"].startswith("pg_lossless_")
            wred = config["WRED_PROFILE"][config["QUEUE"][f"{port}|{tc}"]["wred_profile"]]
            assert wred["wred_green_enable"] == "true"
            assert wred["ecn"] == "ecn_all"
    pg_map = config["TC_TO_PRIORITY_GROUP_MAP"]["AI_FABRIC"]
    assert {tc for tc, pg in pg_map.items() if pg != "0"} == {str(t) for t in lossless}


def test_no_pfc_tables_without_lossless_classes():
    snapshot = dataclasses.replace(roce_snapshot(), qos_classes=(BRONZE,))
    snapshot = dataclasses.replace(
        snapshot,
        segments=tuple(dataclasses.replace(s, qos_class="bronze") for s in snapshot.segments),
    )
    config = render_config_db(snapshot, "leaf01")

    assert "PFC_WD" not in config
    assert all("pfc_enable" not in f for f in config["PORT_QOS_MAP"].values())
    assert "WRED_PROFILE" not in config


@pytest.mark.parametrize("leaf", LEAVES)
def test_every_vrf_has_its_l3vni_tunnel_map_and_an_ip_less_svi(leaf: str):
    config = render_config_db(roce_snapshot(), leaf)
    snapshot = roce_snapshot()

    assert config["VRF"]
    for vrf, fields in config["VRF"].items():
        segment = next(s for s in snapshot.segments if s.vrf == vrf)
        vlan = f"Vlan{segment.l3vni_vlan}"
        tunnel = config["VXLAN_TUNNEL_MAP"][f"vtep|map_{segment.l3vni}_{vlan}"]
        assert fields == {"vni": str(segment.l3vni)}
        assert tunnel == {"vlan": vlan, "vni": str(segment.l3vni)}
        assert config["VLAN_INTERFACE"][vlan] == {"vrf_name": vrf}
        assert not any(k.startswith(f"{vlan}|") for k in config["VLAN_INTERFACE"])
        gateway = f"Vlan{segment.vlan}|{segment.gateway}"
        assert gateway in config["VLAN_INTERFACE"]


_KEY_PARTS = {
    "PORT": r"(?P<port>.+)",
    "VLAN_MEMBER": r"(?P<vlan>.+)\|(?P<port>.+)",
    "QUEUE": r"(?P<port>.+)\|[0-7]",
    "BUFFER_PG": r"(?P<port>.+)\|[0-7]",
    "PFC_WD": r"(?P<port>.+)",
    "PORT_QOS_MAP": r"(?P<port>.+)",
    "INTERFACE": r"(?P<port>.+)",
    "VLAN": r"(?P<vlan>.+)",
    "VLAN_INTERFACE": r"(?P<vlan>[^|]+)(\|.+)?",
    "VRF": r"(?P<vrf>.+)",
    "VXLAN_TUNNEL_MAP": r"vtep\|map_(?P<vni>[0-9]+)_(?P<vlan>.+)",
}


@pytest.mark.parametrize("leaf", LEAVES)
def test_keys_only_name_ports_vlans_vrfs_and_vnis_of_the_snapshot(leaf: str):
    snapshot = roce_snapshot()
    switch = next(s for s in snapshot.switches if s.name == leaf)
    allowed = {
        "port": {p.name for p in switch.ports} | {"global", "GLOBAL"},
        "vlan": {f"Vlan{v}" for s in snapshot.segments for v in (s.vlan, s.l3vni_vlan)},
        "vrf": {s.vrf for s in snapshot.segments},
        "vni": {str(v) for s in snapshot.segments for v in (s.l2vni, s.l3vni)},
    }
    config = render_config_db(snapshot, leaf)

    for table, pattern in _KEY_PARTS.items():
        for key in config.get(table, {}):
            match = re.fullmatch(pattern, key)
            assert match, (table, key)
            for part, value in match.groupdict().items():
                if value is not None:
                    assert value in allowed[part], (table, key)


def test_json_round_trips_to_the_dict():
    snapshot = roce_snapshot()

    assert json.loads(render_config_db_json(snapshot, "leaf02")) == render_config_db(
        snapshot, "leaf02"
    )


@pytest.mark.parametrize(
    "bad",
    [
        RoceQos("cnp", dscp=CNP_DSCP, tc=2, lossless=False, ets_weight=10),
        RoceQos("strict", dscp=30, tc=CNP_TC, lossless=False, ets_weight=10),
        RoceQos("pg0", dscp=30, tc=0, lossless=True, ets_weight=10),
        RoceQos("copy", dscp=GOLD.dscp, tc=2, lossless=False, ets_weight=10),
        RoceQos("x" * 30, dscp=30, tc=2, lossless=False, ets_weight=10),
    ],
    ids=["cnp-dscp", "cnp-tc", "lossless-pg0", "duplicate-dscp", "name-too-long"],
)
def test_classes_sonic_cannot_express_are_refused(bad: RoceQos):
    snapshot = roce_snapshot()
    snapshot = dataclasses.replace(snapshot, qos_classes=(*snapshot.qos_classes, bad))

    with pytest.raises(InvalidValueError):
        render_config_db(snapshot, "leaf01")


def test_a_node_with_two_owners_is_refused():
    snapshot = roce_snapshot()
    nodes = tuple(
        dataclasses.replace(n, owners=(Owner.tenant("acme"), Owner.tenant("globex")))
        if n.name == "gpu0001"
        else n
        for n in snapshot.nodes
    )

    with pytest.raises(InvalidValueError, match="gpu0001"):
        render_config_db(dataclasses.replace(snapshot, nodes=nodes), "leaf01")
