"""SONiC ``config_db.json`` for one leaf of a RoCE fabric: tenant VRFs/VLANs/VNIs and RoCE QoS.

The output is the per-leaf document `config load` merges into CONFIG_DB (docs/facts/roce.md §1,
§2). Every value is a string, as CONFIG_DB stores it; the document is YANG-valid against the
pinned sonic-yang-models set (tests/conformance/test_sonic_yang.py runs yanglint on it).

Layout per leaf:

* Identity: DEVICE_METADATA (hostname, ASN, ``LeafRouter``, ``docker_routing_config_mode
  split-unified`` so SONiC runs the single frr.conf isofabric renders (sonic-device_metadata.yang:
  "split: ... each FRR daemon has its own config file; split-unified: ... single FRR config
  file"; docker-fpm-frr's docker_init.sh removes frr.conf in plain ``split``),
  ``buffer_model dynamic`` so buffermgrd sizes the pools). No ``mac``: it is optional in YANG
  and the platform's base MAC (from the EEPROM) must stay; `config load` merges into
  CONFIG_DB (ConfigDBConnector mod_config), so it keeps it.
* Underlay: PORT for every port (host ports at the fabric's host MTU, fabric ports at the
  underlay MTU; ports with neither a NIC nor a link are admin down), INTERFACE on fabric ports
  with IPv6 link-local only (BGP unnumbered), Loopback0 (router id) and Loopback1 (VTEP
  source) when they differ.
* Overlay, for each segment with a host port on this leaf (symmetric IRB, roce.md §1): VRF with
  its L3VNI, the L2 VLAN with an anycast gateway, the L3VNI's transit VLAN with an IP-less SVI,
  and both tunnel maps. SONiC vrfmgr: a VRF's vni must be mapped to a VLAN first (SONiC#803), so
  the L3VNI map is always rendered together with the VRF.
* QoS (roce.md §2): one fabric-wide DSCP map ``AI_FABRIC`` on fabric ports; on host ports a
  per-class map ``TENANT_<CLASS>`` that sends every DSCP to the owner's class TC (a bronze tenant
  cannot mark itself into the gold queue at the first hop), except CNP 48 -> TC 6 (strict, never
  PFC). Lossless classes get PFC, a lossless PG with a static headroom profile, WRED/ECN and the
  PFC watchdog on every port.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from policies.roce.model import (
    RoceSnapshot,
)
from policies.roce.render_sonic_qos import buffers, pfc_watchdog, qos_maps, scheduling
from policies.roce.sonic_leaf import (
    LeafContext,
    Row,
    leaf_context,
)

ConfigDb = dict[str, dict[str, dict[str, Any]]]

VTEP = "vtep"
NVO = "nvo"


def render_config_db(snapshot: RoceSnapshot, leaf: str) -> ConfigDb:
    """Render the CONFIG_DB tables of leaf `leaf`.

    Args:
        snapshot: The fabric state; segments, NICs and QoS classes decide the content.
        leaf: Name of a leaf switch of `snapshot`.

    Returns:
        ``{TABLE: {key: {field: value}}}`` with string values (leaf-lists would be lists).

    Raises:
        NotFoundError: `leaf` is not a switch of the snapshot.
        InvalidValueError: `leaf` is a spine or has no VTEP, a node has several owners, or a QoS
            class cannot be expressed (DSCP/TC out of range, CNP collision, lossless TC 0).
    """
    context = leaf_context(snapshot, leaf)
    tables: ConfigDb = {}
    for part in _PARTS:
        for table, key, fields in part(context):
            tables.setdefault(table, {})[key] = fields
    return tables


def render_config_db_json(snapshot: RoceSnapshot, leaf: str) -> str:
    """`render_config_db` as ``config_db.json`` text: sorted keys, 2-space indent, final newline.

    Byte-identical for equal snapshots; raises what `render_config_db` raises.
    """
    return json.dumps(render_config_db(snapshot, leaf), indent=2, sort_keys=True) + "\n"


def _identity(leaf: LeafContext) -> Iterator[Row]:
    """DEVICE_METADATA and the loopbacks (router id, VTEP source)."""
    switch = leaf.switch
    yield (
        "DEVICE_METADATA",
        "localhost",
        {
            "hostname": switch.name,
            "bgp_asn": str(switch.asn),
            "type": "LeafRouter",
            # split-unified, not split: the rendered frr.conf is one file (see module docstring).
            "docker_routing_config_mode": "split-unified",
            "buffer_model": "dynamic",
        },
    )
    yield "LOOPBACK_INTERFACE", "Loopback0", {}
    yield "LOOPBACK_INTERFACE", f"Loopback0|{switch.loopback}/32", {}
    if switch.vtep != switch.loopback:
        yield "LOOPBACK_INTERFACE", "Loopback1", {}
        yield "LOOPBACK_INTERFACE", f"Loopback1|{switch.vtep}/32", {}


def _underlay(leaf: LeafContext) -> Iterator[Row]:
    """PORT for every port, unnumbered INTERFACE on fabric ports, the VTEP and its NVO."""
    fabric = leaf.snapshot.fabric
    for port in leaf.switch.ports:
        mtu = fabric.underlay_mtu if port.name in leaf.fabric_ports else fabric.host_mtu
        admin = "up" if port.name in leaf.qos_ports else "down"
        yield (
            "PORT",
            port.name,
            {"lanes": port.lanes, "speed": str(port.speed), "mtu": str(mtu), "admin_status": admin},
        )
    for name in leaf.fabric_ports:
        # BGP unnumbered peers over the IPv6 link-local address of each fabric port.
        yield "INTERFACE", name, {"ipv6_use_link_local_only": "enable"}
    yield "VXLAN_TUNNEL", VTEP, {"src_ip": str(leaf.switch.vtep)}
    yield "VXLAN_EVPN_NVO", NVO, {"source_vtep": VTEP}


def _overlay(leaf: LeafContext) -> Iterator[Row]:
    """Per-segment VRF, VLANs, members, tunnel maps and SVIs, plus the anycast gateway MAC."""
    fabric = leaf.snapshot.fabric
    yield "SAG", "GLOBAL", {"gateway_mac": fabric.anycast_gateway_mac}
    for seg in leaf.segments():
        l2, l3 = f"Vlan{seg.vlan}", f"Vlan{seg.l3vni_vlan}"
        yield "VRF", seg.vrf, {"vni": str(seg.l3vni)}
        for vlan_id in (seg.l3vni_vlan, seg.vlan):
            yield (
                "VLAN",
                f"Vlan{vlan_id}",
                {"vlanid": str(vlan_id), "mtu": str(fabric.host_mtu), "admin_status": "up"},
            )
        for port in leaf.ports_of(seg.owner):
            yield "VLAN_MEMBER", f"{l2}|{port}", {"tagging_mode": "untagged"}
        for vni, vlan in ((seg.l3vni, l3), (seg.l2vni, l2)):
            yield "VXLAN_TUNNEL_MAP", f"{VTEP}|map_{vni}_{vlan}", {"vlan": vlan, "vni": str(vni)}
        yield "VLAN_INTERFACE", l2, {"vrf_name": seg.vrf, "static_anycast_gateway": "true"}
        yield "VLAN_INTERFACE", f"{l2}|{seg.gateway}", {}
        # The L3VNI SVI is in the VRF with no address (symmetric IRB, roce.md §1).
        yield "VLAN_INTERFACE", l3, {"vrf_name": seg.vrf}


# The tables of a leaf, each part a generator of (table, key, fields) rows.
_PARTS = (_identity, _underlay, _overlay, qos_maps, scheduling, buffers, pfc_watchdog)
