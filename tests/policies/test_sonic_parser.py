"""parse_config_db: what the engine reads from a leaf's config_db.json, and each finding."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.errors import InputFormatError
from policies.findings import Finding, Severity
from policies.roce.parse_config_db import (
    PortQos,
    QueueConfig,
    TunnelMap,
    VlanInterface,
    VlanMember,
    WredProfile,
    parse_config_db,
)

# docs/facts/roce.md §1 and §2: one tenant (L2VNI 10000 on Vlan100, L3VNI 50001 on Vlan3001)
# and the RoCE QoS block (26 -> TC3 lossless with ECN, 48 -> TC6 strict).
LEAF: dict[str, Any] = {
    "DEVICE_METADATA": {"localhost": {"hostname": "leaf01", "bgp_asn": "65101"}},
    "VRF": {"Vrf50001": {"vni": "50001"}},
    "VLAN": {"Vlan100": {"vlanid": "100"}, "Vlan3001": {"vlanid": "3001"}},
    "VLAN_MEMBER": {"Vlan100|Ethernet0": {"tagging_mode": "untagged"}},
    "VXLAN_TUNNEL_MAP": {
        "vtep1|map_10000_Vlan100": {"vlan": "Vlan100", "vni": "10000"},
        "vtep1|map_50001_Vlan3001": {"vlan": "Vlan3001", "vni": "50001"},
    },
    "VLAN_INTERFACE": {
        "Vlan100": {"vrf_name": "Vrf50001", "static_anycast_gateway": "true"},
        "Vlan100|10.64.0.1/24": {},
        "Vlan3001": {"vrf_name": "Vrf50001"},
    },
    "DSCP_TO_TC_MAP": {"ROCE": {"0": "0", "26": "3", "48": "6"}},
    "PORT_QOS_MAP": {
        "global": {"dscp_to_tc_map": "ROCE"},
        "Ethernet0": {"dscp_to_tc_map": "ROCE", "pfc_enable": "3"},
    },
    "SCHEDULER": {
        "scheduler.lossy": {"type": "DWRR", "weight": "50"},
        "scheduler.roce": {"type": "DWRR", "weight": "50"},
        "scheduler.cnp": {"type": "STRICT"},
    },
    "WRED_PROFILE": {
        "ROCE_LOSSLESS": {
            "ecn": "ecn_all",
            "wred_green_enable": "true",
            "green_min_threshold": "153600",
            "green_max_threshold": "1536000",
        }
    },
    "QUEUE": {
        "Ethernet0|0-2": {"scheduler": "scheduler.lossy"},
        "Ethernet0|3": {"scheduler": "scheduler.roce", "wred_profile": "ROCE_LOSSLESS"},
        "Ethernet0|6": {"scheduler": "scheduler.cnp"},
    },
    "PFC_WD": {
        "GLOBAL": {"POLL_INTERVAL": "200"},
        "Ethernet0": {"action": "drop", "detection_time": "200", "restoration_time": "200"},
    },
}


def leaf(**tables: dict[str, Any]) -> str:
    """The literal leaf with some tables replaced, as config_db.json text."""
    return json.dumps({**LEAF, **tables}, indent=2)


def codes(text: str) -> list[str]:
    return [f.code for f in parse_config_db(text).findings]


def only(text: str, code: str) -> Finding:
    [finding] = [f for f in parse_config_db(text).findings if f.code == code]
    return finding


def test_a_well_formed_leaf_parses_without_findings():
    parsed = parse_config_db(leaf())

    assert parsed.findings == ()
    assert parsed.hostname == "leaf01"
    assert parsed.vrfs == {"Vrf50001": 50001}
    assert parsed.vlans == (100, 3001)
    assert parsed.vlan_members == (VlanMember(100, "Ethernet0", "untagged"),)
    assert parsed.tunnel_maps == (
        TunnelMap("vtep1|map_10000_Vlan100", 10000, 100),
        TunnelMap("vtep1|map_50001_Vlan3001", 50001, 3001),
    )
    assert parsed.vlan_interfaces == (
        VlanInterface(100, "Vrf50001", ("10.64.0.1/24",)),
        VlanInterface(3001, "Vrf50001"),
    )
    assert parsed.port_qos == (PortQos("Ethernet0", "ROCE", (3,)), PortQos("global", "ROCE", ()))
    assert parsed.dscp_to_tc_maps == {"ROCE": {0: 0, 26: 3, 48: 6}}
    assert parsed.schedulers["scheduler.cnp"] == "STRICT"
    assert parsed.wred_profiles == {"ROCE_LOSSLESS": WredProfile("ROCE_LOSSLESS", "ecn_all", True)}
    assert [(q.queue, q.scheduler) for q in parsed.queues] == [
        (0, "scheduler.lossy"),
        (1, "scheduler.lossy"),
        (2, "scheduler.lossy"),
        (3, "scheduler.roce"),
        (6, "scheduler.cnp"),
    ]


def test_an_empty_document_parses_to_nothing():
    parsed = parse_config_db("{}")

    assert (parsed.hostname, parsed.vrfs, parsed.vlans, parsed.findings) == (None, {}, (), ())


def test_queue_and_port_qos_keys_with_port_lists_expand_per_port():
    text = leaf(
        PORT_QOS_MAP={"Ethernet0,Ethernet8": {"pfc_enable": "3"}},
        QUEUE={
            "Ethernet0,Ethernet8|3": {"wred_profile": "ROCE_LOSSLESS"},
            "Ethernet0,Ethernet8|6": {"scheduler": "scheduler.cnp"},
        },
        PFC_WD={"Ethernet0": {"action": "drop"}, "Ethernet8": {"action": "drop"}},
    )

    parsed = parse_config_db(text)

    assert [e.port for e in parsed.port_qos] == ["Ethernet0", "Ethernet8"]
    assert QueueConfig("Ethernet8", 3, None, "ROCE_LOSSLESS") in parsed.queues
    assert parsed.findings == ()


def test_voq_queue_keys_keep_the_port_and_queue_parts():
    parsed = parse_config_db(leaf(QUEUE={"host1|asic0|Ethernet0|6": {"scheduler": "s"}}))

    assert parsed.queues == (QueueConfig("Ethernet0", 6, "s", None),)


# --- findings -------------------------------------------------------------------------------------


def test_a_vrf_vni_without_a_tunnel_map_is_refused_by_sonic():
    text = leaf(VXLAN_TUNNEL_MAP={"vtep1|map_10000_Vlan100": {"vlan": "Vlan100", "vni": "10000"}})

    finding = only(text, "vrf-vni-unmapped")

    assert (finding.severity, finding.key) == (Severity.CRITICAL, "VRF|Vrf50001")
    assert "50001" in finding.message


def test_a_vrf_without_vni_needs_no_tunnel_map():
    assert codes(leaf(VRF={"Vrf50001": {}, "VrfMgmt": {"vni": "0"}})) == []


def test_a_tunnel_map_to_a_missing_vlan():
    text = leaf(VLAN={"Vlan100": {"vlanid": "100"}})

    finding = only(text, "tunnel-map-missing-vlan")

    assert finding.key == "VXLAN_TUNNEL_MAP|vtep1|map_50001_Vlan3001"
    assert "Vlan3001" in finding.message


def test_one_vni_mapped_to_two_vlans():
    maps = {
        **LEAF["VXLAN_TUNNEL_MAP"],
        "vtep1|map_10000_Vlan3001": {"vlan": "Vlan3001", "vni": "10000"},
    }

    finding = only(leaf(VXLAN_TUNNEL_MAP=maps), "vni-mapped-twice")

    assert finding.key == "VXLAN_TUNNEL_MAP|vtep1|map_10000_Vlan3001"
    assert "VNI 10000 is mapped to Vlan100 and Vlan3001" in finding.message


def test_a_port_untagged_in_two_vlans():
    members = {
        "Vlan100|Ethernet0": {"tagging_mode": "untagged"},
        "Vlan3001|Ethernet0": {"tagging_mode": "untagged"},
        "Vlan3001|Ethernet8": {"tagging_mode": "tagged"},
    }

    finding = only(leaf(VLAN_MEMBER=members), "port-untagged-twice")

    assert finding.key == "VLAN_MEMBER|Vlan3001|Ethernet0"


def test_a_member_without_tagging_mode_is_untagged_like_sonic_reads_it():
    members = {"Vlan100|Ethernet0": {}, "Vlan3001|Ethernet0": {"tagging_mode": "untagged"}}

    parsed = parse_config_db(leaf(VLAN_MEMBER=members))

    assert parsed.vlan_members[0] == VlanMember(100, "Ethernet0", "untagged")
    assert [f.code for f in parsed.findings] == ["port-untagged-twice", "tagging-mode-missing"]


@pytest.mark.parametrize(
    "queue_3",
    [
        {"scheduler": "scheduler.roce"},
        {"scheduler": "scheduler.roce", "wred_profile": "NO_SUCH_PROFILE"},
        {"scheduler": "scheduler.roce", "wred_profile": "NO_ECN"},
        {"scheduler": "scheduler.roce", "wred_profile": "NO_GREEN"},
    ],
)
def test_pfc_on_a_queue_without_ecn_marking(queue_3: dict[str, str]):
    profiles = {
        "NO_ECN": {"ecn": "ecn_none", "wred_green_enable": "true"},
        "NO_GREEN": {"ecn": "ecn_all"},  # wred_green_enable defaults to false
    }
    queues = {**LEAF["QUEUE"], "Ethernet0|3": queue_3}

    finding = only(leaf(WRED_PROFILE=profiles, QUEUE=queues), "pfc-without-ecn")

    assert (finding.severity, finding.key) == (Severity.WARNING, "QUEUE|Ethernet0|3")


def test_pfc_on_the_cnp_priority():
    text = leaf(PORT_QOS_MAP={"Ethernet0": {"pfc_enable": "3,6"}})

    assert codes(text) == ["pfc-on-cnp", "pfc-without-ecn"]
    assert only(text, "pfc-on-cnp").key == "PORT_QOS_MAP|Ethernet0"


@pytest.mark.parametrize("queue_6", [None, "scheduler.lossy", "scheduler.untyped"])
def test_a_cnp_queue_that_is_not_strict(queue_6: str | None):
    queues = {k: v for k, v in LEAF["QUEUE"].items() if k != "Ethernet0|6"}
    if queue_6:
        queues["Ethernet0|6"] = {"scheduler": queue_6}
    schedulers = {**LEAF["SCHEDULER"], "scheduler.untyped": {"weight": "10"}}

    finding = only(leaf(QUEUE=queues, SCHEDULER=schedulers), "cnp-queue-not-strict")

    assert finding.key == "QUEUE|Ethernet0|6"


# --- malformed input ------------------------------------------------------------------------------


def test_malformed_json_names_the_line():
    text = '{\n  "VRF": {\n    "Vrf50001": {"vni": "50001"},\n  }\n}\n'

    with pytest.raises(InputFormatError) as raised:
        parse_config_db(text)

    assert raised.value.line == 4
    assert raised.value.detail.startswith("line 4: not valid JSON")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[]", "JSON object"),
        ('{"VRF": []}', "table VRF"),
        ('{"VRF": {"Vrf1": "50001"}}', "table VRF"),
        ('{"VRF": {"Vrf1": {"vni": "5e4"}}}', "VRF|Vrf1"),
        ('{"VLAN": {"vlan100": {}}}', "VLAN|vlan100"),
        ('{"VLAN_MEMBER": {"Ethernet0": {}}}', "VLAN_MEMBER|Ethernet0"),
        ('{"VXLAN_TUNNEL_MAP": {"vtep1|m": {"vni": "1"}}}', "mandatory"),
        ('{"QUEUE": {"Ethernet0|3-x": {}}}', "QUEUE|Ethernet0|3-x"),
    ],
)
def test_documents_of_the_wrong_shape_are_input_format_errors(text: str, where: str):
    with pytest.raises(InputFormatError, match=where):
        parse_config_db(text)


def test_pfc_without_a_watchdog_on_the_port():
    text = leaf(PFC_WD={"GLOBAL": {"POLL_INTERVAL": "200"}})

    finding = only(text, "pfc-without-watchdog")

    assert (finding.severity, finding.key) == (Severity.WARNING, "PFC_WD|Ethernet0")
    assert codes(text) == ["pfc-without-watchdog"]
