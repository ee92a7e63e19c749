"""Rendered SONiC config_db against the pinned sonic-yang-models, validated by real yanglint.

Every leaf of the sample fabric must validate; a negative corpus of mutations must be rejected
with a message that names the offending node.

YANG accepts these although they are wrong, so the RoCE engine (verification) must check them
itself (docs/facts/roce.md §3.3, §7); `test_yang_accepts_what_only_the_engine_can_catch` pins
that they really pass YANG:

* the same L3VNI on two VRFs, or an L3VNI equal to another segment's L2VNI (no uniqueness on
  VRF.vni / VXLAN_TUNNEL_MAP.vni: sonic-buildimage#6766, #9489);
* a VRF vni without a VXLAN_TUNNEL_MAP, a tunnel map to a VLAN that does not exist (`vlan` is a
  pattern, not a leafref), an L3VNI SVI with an IP address;
* PFC on a lossy priority, on the CNP priority 6, on more priorities than the platform's
  lossless limit, or without a lossless BUFFER_PG / WRED-ECN queue for that priority;
* a DSCP map that differs between leaves or sends CNP (48) anywhere but TC 6;
* a port untagged in another tenant's VLAN (only "one untagged VLAN per port" is checked);
* MTU ordering (port >= VLAN >= host MTU, underlay >= host MTU + 50 B VXLAN overhead).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from policies.roce.render_sonic import render_config_db
from tests.policies.roce_snapshots import roce_snapshot

from .conftest import skip_or_fail
from .sonic_yang import (
    BOOLEAN,
    NUMBER,
    STRING,
    TranslationError,
    missing_models,
    models_dir,
    to_instance,
    validate_config_db,
    yang_set,
    yanglint_path,
)

pytestmark = pytest.mark.conformance

Config = dict[str, dict[str, dict[str, Any]]]


@pytest.fixture(scope="module")
def models() -> Path:
    path = models_dir()
    if (reason := missing_models(path)) is not None:
        skip_or_fail(reason)
    return path


@pytest.fixture(scope="module")
def yanglint(models: Path) -> Path:
    if yanglint_path() is None:
        skip_or_fail("yanglint not installed (apt-get install libyang-tools)")
    return models


def leaf01() -> Config:
    return render_config_db(roce_snapshot(), "leaf01")


@pytest.mark.parametrize("leaf", ["leaf01", "leaf02"])
def test_every_rendered_leaf_validates(yanglint: Path, leaf: str):
    ok, message = validate_config_db(render_config_db(roce_snapshot(), leaf), yanglint)

    assert ok, message


def _set(table: str, key: str, fields: dict[str, Any]) -> Callable[[Config], None]:
    def mutate(config: Config) -> None:
        config.setdefault(table, {})[key] = fields

    return mutate


def _field(table: str, key: str, name: str, value: Any) -> Callable[[Config], None]:
    def mutate(config: Config) -> None:
        config[table][key][name] = value

    return mutate


NEGATIVE = {
    "vlan 4095": (
        _set("VLAN", "Vlan4095", {"vlanid": "4095"}),
        ("out of the allowed range", "VLAN_LIST[name='Vlan4095']/vlanid"),
    ),
    "l2vni 2**24": (
        _field("VXLAN_TUNNEL_MAP", "vtep|map_10000_Vlan100", "vni", str(2**24)),
        ("out of the allowed range", "[mapname='map_10000_Vlan100']/vni"),
    ),
    "l3vni 2**24": (
        _field("VRF", "Vrf50001", "vni", str(2**24)),
        ("out of the allowed range", "VRF_LIST[name='Vrf50001']/vni"),
    ),
    "dangling vlan member port": (
        _set("VLAN_MEMBER", "Vlan100|Ethernet99", {"tagging_mode": "untagged"}),
        ('"Ethernet99" - no matching subtype', "[port='Ethernet99']/port"),
    ),
    "pfc_enable 3,8": (
        _field("PORT_QOS_MAP", "Ethernet0", "pfc_enable", "3,8"),
        ('"3,8" does not conform', "PORT_QOS_MAP_LIST[ifname='Ethernet0']/pfc_enable"),
    ),
    "pfc priority 8 in the pfc->queue map": (
        _field("MAP_PFC_PRIORITY_TO_QUEUE", "AI_FABRIC", "8", "7"),
        ("Invalid pfc priority", "MAP_PFC_PRIORITY_TO_QUEUE/pfc_priority"),
    ),
    "dscp 64": (
        _field("DSCP_TO_TC_MAP", "AI_FABRIC", "64", "3"),
        ("Invalid DSCP", "[name='AI_FABRIC']/DSCP_TO_TC_MAP/dscp"),
    ),
    "wred max < min": (
        _field("WRED_PROFILE", "WRED_GOLD", "green_max_threshold", "1000"),
        ("max threshold must be greater", "[name='WRED_GOLD']/green_max_threshold"),
    ),
    "vrf without Vrf prefix": (
        _set("VRF", "acme", {"vni": "50009"}),
        ("Invalid VRF name", "/VRF/VRF_LIST/name"),
    ),
    "vrf name over 15 chars": (
        _set("VRF", "Vrf_acme_training", {"vni": "50009"}),
        ("must not exceed 16 characters", "/VRF/VRF_LIST/name"),
    ),
    "tagging_mode trunk": (
        _field("VLAN_MEMBER", "Vlan100|Ethernet0", "tagging_mode", "trunk"),
        ('Invalid enumeration value "trunk"', "[port='Ethernet0']/tagging_mode"),
    ),
}


@pytest.mark.parametrize("case", sorted(NEGATIVE))
def test_yang_rejects_the_negative_corpus(yanglint: Path, case: str):
    mutate, (problem, location) = NEGATIVE[case]
    config = leaf01()
    mutate(config)

    ok, message = validate_config_db(config, yanglint)

    assert not ok
    assert "libyang err" in message
    assert problem in message, message
    assert location in message, message


# Wrong but YANG-valid: the engine's job (see the module docstring).
ENGINE_ONLY = {
    "duplicate l3vni across vrfs": _field("VRF", "Vrf50002", "vni", "50001"),
    "l3vni equal to another l2vni": _set(
        "VXLAN_TUNNEL_MAP", "vtep|map_50001_Vlan100", {"vlan": "Vlan100", "vni": "50001"}
    ),
    "tunnel map to a missing vlan": _set(
        "VXLAN_TUNNEL_MAP", "vtep|map_10999_Vlan999", {"vlan": "Vlan999", "vni": "10999"}
    ),
    "pfc on lossy priority 1": _field("PORT_QOS_MAP", "Ethernet0", "pfc_enable", "1,3,4"),
    "pfc on cnp priority 6": _field("PORT_QOS_MAP", "Ethernet0", "pfc_enable", "3,4,6"),
    "pfc on all priorities": _field("PORT_QOS_MAP", "Ethernet0", "pfc_enable", "0,1,2,3,4,5,6,7"),
    "cnp dscp mapped to a data tc": _field("DSCP_TO_TC_MAP", "TENANT_GOLD", "48", "3"),
}


@pytest.mark.parametrize("case", sorted(ENGINE_ONLY))
def test_yang_accepts_what_only_the_engine_can_catch(yanglint: Path, case: str):
    config = leaf01()
    ENGINE_ONLY[case](config)

    ok, message = validate_config_db(config, yanglint)

    assert ok, message


def test_the_buffer_pool_must_across_modules_is_enforced(yanglint: Path):
    """Guards the compile-order warnings: cross-module musts still run with all files given."""
    config = leaf01()
    config["BUFFER_POOL"]["ingress_lossless_pool"]["percentage"] = "50"
    config["DEVICE_METADATA"]["localhost"]["buffer_model"] = "traditional"

    ok, message = validate_config_db(config, yanglint)

    assert not ok
    assert "dynamic buffer model" in message


def test_the_type_table_is_read_from_the_yang_files(models: Path):
    tables = yang_set(models).tables
    vlan = tables["VLAN"].lists[0]
    wred = tables["WRED_PROFILE"].lists[0]

    assert tables["VLAN"].module == "sonic-vlan"
    assert vlan.keys == ("name",)
    assert vlan.leaves["vlanid"] == NUMBER  # uint16
    assert tables["VRF"].lists[0].leaves["vni"] == NUMBER  # uint32
    assert tables["VXLAN_TUNNEL_MAP"].lists[0].leaves["vni"] == NUMBER  # stypes:vnid_type
    assert wred.leaves["green_max_threshold"] == STRING  # uint64: a JSON string in RFC 7951
    assert wred.leaves["wred_green_enable"] == BOOLEAN
    assert tables["DEVICE_METADATA"].containers["localhost"]["bgp_asn"] == NUMBER  # inet:as-number
    assert [x.keys for x in tables["VLAN_INTERFACE"].lists] == [("name",), ("name", "ip-prefix")]


def test_translation_follows_the_sonic_yang_ext_rules(models: Path):
    config = leaf01()
    instance = to_instance(config, yang_set(models))

    dscp = instance["sonic-dscp-tc-map:sonic-dscp-tc-map"]["DSCP_TO_TC_MAP"]
    fabric = next(m for m in dscp["DSCP_TO_TC_MAP_LIST"] if m["name"] == "AI_FABRIC")
    assert {"dscp": "48", "tc": 6} in fabric["DSCP_TO_TC_MAP"]
    vlan_if = instance["sonic-vlan:sonic-vlan"]["VLAN_INTERFACE"]
    assert {"name": "Vlan100", "ip-prefix": "10.64.0.1/24"} in vlan_if[
        "VLAN_INTERFACE_IPPREFIX_LIST"
    ]
    metadata = instance["sonic-device_metadata:sonic-device_metadata"]["DEVICE_METADATA"]
    assert metadata["localhost"]["bgp_asn"] == 65101


def test_tables_and_fields_without_yang_are_refused_not_skipped(models: Path):
    """Upstream crops unknown tables silently (tablesWithOutYang); here that is an error."""
    with_unknown_table = copy.deepcopy(leaf01())
    with_unknown_table["BGP_GLOBALS_EVPN_VNI"] = {"Vrf50001|L2VPN_EVPN|50001": {}}
    with_unknown_field = leaf01()
    with_unknown_field["VRF"]["Vrf50001"]["route_target"] = "65000:50001"

    for config in (with_unknown_table, with_unknown_field):
        with pytest.raises(TranslationError):
            to_instance(config, yang_set(models))
