"""SONiC ``config_db.json`` for one leaf of a RoCE fabric: tenant VRFs/VLANs/VNIs and RoCE QoS.

The output is the per-leaf document `config load` merges into CONFIG_DB (reference/roce.md §1,
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
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from policies.errors import NotFoundError, ValidationError
from policies.model import Owner
from policies.roce_model import (
    CNP_DSCP,
    CNP_TC,
    MAX_SWITCH_MTU,
    RoceQos,
    RoceSnapshot,
    Switch,
    SwitchRole,
    VrfSegment,
)

ConfigDb = dict[str, dict[str, dict[str, Any]]]

VTEP = "vtep"
NVO = "nvo"
FABRIC_MAP = "AI_FABRIC"
# Owners without a QoS class (shared services, unallocated nodes) are best effort: TC 0, lossy.
BEST_EFFORT_MAP = "TENANT_BEST_EFFORT"
BEST_EFFORT_TC = 0
# Best effort gets the smallest DWRR share; class weights are relative to it.
BEST_EFFORT_WEIGHT = 1
CNP_SCHEDULER = "scheduler.cnp"
BEST_EFFORT_SCHEDULER = "scheduler.best_effort"
DSCP_VALUES = range(64)
TRAFFIC_CLASSES = range(8)
# sonic-dscp-tc-map.yang / sonic-wred-profile.yang: map and profile names.
_MAP_NAME_MAX = 32
_MAP_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

# Buffers (dynamic buffer model: buffermgrd sizes the pools, so they carry no `size`).
INGRESS_POOL = "ingress_lossless_pool"
LOSSY_PROFILE = "ingress_lossy_profile"
# SONiC DEFAULT_LOSSLESS_BUFFER_PARAMETER default_dynamic_th is 0 (alpha 1); lossy PGs get 3.
LOSSLESS_DYNAMIC_TH = "0"
LOSSY_DYNAMIC_TH = "3"
# Headroom estimate for the static lossless profile; the SKU's headroom calculator is
# authoritative and may replace it. xon: two jumbo frames drain before XON is sent.
# xoff: cable round trip at line rate (5 ns/m each way) + two jumbo frames in flight at each end
# + a MAC/PHY response allowance; rounded up to 1 KiB.
JUMBO_FRAME = MAX_SWITCH_MTU
XON_BYTES = 2 * JUMBO_FRAME
RESPONSE_ALLOWANCE_BYTES = 8192
CABLE_LENGTH_PROFILE = "AZURE"
# sonic-utilities `pfcwd start_default`: action drop, 200 ms detection/restoration/poll.
PFCWD_POLL_MS = "200"
PFCWD_PORT = {"action": "drop", "detection_time": "200", "restoration_time": "200"}


@dataclass(frozen=True)
class _Leaf:
    """What rendering one leaf needs: the switch, its port roles, owners and classes.

    The derived lookups are computed once per leaf (a 256-port leaf asks them thousands of times).
    """

    snapshot: RoceSnapshot
    switch: Switch
    host_ports: dict[str, Owner | None]
    fabric_ports: tuple[str, ...]
    classes: tuple[RoceQos, ...]

    @cached_property
    def segment_of(self) -> dict[Owner, VrfSegment]:
        """Each owner's segment."""
        return {s.owner: s for s in self.snapshot.segments}

    @cached_property
    def _ports_by_owner(self) -> dict[Owner | None, tuple[str, ...]]:
        grouped: dict[Owner | None, list[str]] = {}
        for port in self.qos_ports:
            if port in self.host_ports:
                grouped.setdefault(self.host_ports[port], []).append(port)
        return {owner: tuple(ports) for owner, ports in grouped.items()}

    @property
    def lossless_tcs(self) -> tuple[int, ...]:
        """The PFC-enabled traffic classes, ascending."""
        return tuple(sorted(c.tc for c in self.classes if c.lossless))

    @cached_property
    def qos_ports(self) -> tuple[str, ...]:
        """Every port that carries RoCE traffic (host and fabric), in port order."""
        used = set(self.host_ports) | set(self.fabric_ports)
        return tuple(p.name for p in self.switch.ports if p.name in used)

    def segments(self) -> tuple[VrfSegment, ...]:
        """Segments with at least one host port on this leaf, by L3VNI."""
        owners = set(self.host_ports.values())
        return tuple(
            sorted((s for s in self.snapshot.segments if s.owner in owners), key=lambda s: s.l3vni)
        )

    def ports_of(self, owner: Owner) -> tuple[str, ...]:
        """The owner's host ports on this leaf, in port order."""
        return self._ports_by_owner.get(owner, ())


def render_config_db(snapshot: RoceSnapshot, leaf: str) -> ConfigDb:
    """Render the CONFIG_DB tables of leaf `leaf`.

    Args:
        snapshot: The fabric state; segments, NICs and QoS classes decide the content.
        leaf: Name of a leaf switch of `snapshot`.

    Returns:
        ``{TABLE: {key: {field: value}}}`` with string values (leaf-lists would be lists).

    Raises:
        NotFoundError: `leaf` is not a switch of the snapshot.
        ValidationError: `leaf` is a spine or has no VTEP, a node has several owners, or a QoS
            class cannot be expressed (DSCP/TC out of range, CNP collision, lossless TC 0).
    """
    context = _leaf_context(snapshot, leaf)
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


Row = tuple[str, str, dict[str, Any]]


def _leaf_context(snapshot: RoceSnapshot, leaf: str) -> _Leaf:
    """Resolve the leaf switch, its host ports with their owners, and its fabric ports."""
    switch = next((s for s in snapshot.switches if s.name == leaf), None)
    if switch is None:
        raise NotFoundError(f"no switch named {leaf!r} in fabric {snapshot.fabric.name!r}")
    if switch.role is not SwitchRole.LEAF or switch.vtep is None:
        raise ValidationError(f"{leaf} is not a leaf with a VTEP; SONiC tenant config is per leaf")
    owners = {n.name: n.owners for n in snapshot.nodes}
    host_ports: dict[str, Owner | None] = {}
    for nic in snapshot.nics:
        if nic.switch == leaf:
            host_ports[nic.port] = _single_owner(nic.node, owners.get(nic.node, ()))
    fabric = {x.a_port for x in snapshot.links if x.a_switch == leaf}
    fabric |= {x.b_port for x in snapshot.links if x.b_switch == leaf}
    known = {p.name for p in switch.ports}
    if not (set(host_ports) | fabric) <= known:
        missing = sorted((set(host_ports) | fabric) - known)
        raise ValidationError(f"{leaf} has no port(s) {', '.join(missing)}")
    classes = _checked_classes(snapshot.qos_classes)
    return _Leaf(snapshot, switch, host_ports, tuple(sorted(fabric)), classes)


def _single_owner(node: str, owners: tuple[Owner, ...]) -> Owner | None:
    """A port carries at most one owner; a shared node is a violation, not something to render."""
    if len(owners) > 1:
        raise ValidationError(f"node {node} has {len(owners)} owners; a port carries one tenant")
    return owners[0] if owners else None


def _checked_classes(classes: Iterable[RoceQos]) -> tuple[RoceQos, ...]:
    """Refuse classes SONiC cannot express or that would break CNP handling; sort by TC."""
    ordered = tuple(sorted(classes, key=lambda c: c.tc))
    for qos in ordered:
        if qos.dscp not in DSCP_VALUES or qos.dscp == CNP_DSCP:
            raise ValidationError(f"class {qos.name}: DSCP {qos.dscp} is not a data DSCP")
        if qos.tc not in TRAFFIC_CLASSES or qos.tc == CNP_TC:
            raise ValidationError(f"class {qos.name}: TC {qos.tc} is not a data traffic class")
        # PG 0 cannot be made lossless (sonic-buildimage#14869); it is the lossy PG.
        if qos.lossless and qos.tc == BEST_EFFORT_TC:
            raise ValidationError(f"class {qos.name}: TC 0 cannot be lossless")
        _map_name(qos)
    if len({c.dscp for c in ordered}) < len(ordered) or len({c.tc for c in ordered}) < len(ordered):
        raise ValidationError("QoS classes must have distinct DSCPs and traffic classes")
    return ordered


def _map_name(qos: RoceQos) -> str:
    """``TENANT_<CLASS>``; YANG names match ``[a-zA-Z0-9][-a-zA-Z0-9_]{0,31}``."""
    name = f"TENANT_{qos.name.upper()}"
    if len(name) > _MAP_NAME_MAX or not set(name) <= _MAP_NAME_CHARS:
        raise ValidationError(f"class name {qos.name!r} does not fit a SONiC QoS map name")
    return name


def _identity(leaf: _Leaf) -> Iterator[Row]:
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


def _underlay(leaf: _Leaf) -> Iterator[Row]:
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


def _overlay(leaf: _Leaf) -> Iterator[Row]:
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


def _qos_maps(leaf: _Leaf) -> Iterator[Row]:
    """DSCP/TC/PG/PFC maps and each port's PORT_QOS_MAP."""
    fabric_map = {"0": str(BEST_EFFORT_TC), str(CNP_DSCP): str(CNP_TC)}
    fabric_map |= {str(c.dscp): str(c.tc) for c in leaf.classes}
    yield "DSCP_TO_TC_MAP", FABRIC_MAP, fabric_map
    yield "DSCP_TO_TC_MAP", BEST_EFFORT_MAP, _whole_dscp_map(BEST_EFFORT_TC)
    for qos in leaf.classes:
        yield "DSCP_TO_TC_MAP", _map_name(qos), _whole_dscp_map(qos.tc)
    identity = {str(tc): str(tc) for tc in TRAFFIC_CLASSES}
    lossless = leaf.lossless_tcs
    pg_map = {str(tc): str(tc if tc in lossless else 0) for tc in TRAFFIC_CLASSES}
    yield "TC_TO_QUEUE_MAP", FABRIC_MAP, identity
    yield "TC_TO_PRIORITY_GROUP_MAP", FABRIC_MAP, pg_map
    yield "MAP_PFC_PRIORITY_TO_QUEUE", FABRIC_MAP, dict(identity)
    yield "PORT_QOS_MAP", "global", {"dscp_to_tc_map": FABRIC_MAP}
    for port in leaf.qos_ports:
        yield "PORT_QOS_MAP", port, _port_qos(leaf, port)


def _whole_dscp_map(tc: int) -> dict[str, str]:
    """Every DSCP to `tc`, except CNP, which keeps its strict queue whoever sends it."""
    return {str(d): str(CNP_TC if d == CNP_DSCP else tc) for d in DSCP_VALUES}


def _port_qos(leaf: _Leaf, port: str) -> dict[str, str]:
    """A port's maps: the fabric map on fabric ports, the owner's class map on host ports."""
    fields = {
        "dscp_to_tc_map": _ingress_map(leaf, port),
        "tc_to_queue_map": FABRIC_MAP,
        "tc_to_pg_map": FABRIC_MAP,
        "pfc_to_queue_map": FABRIC_MAP,
    }
    if leaf.lossless_tcs:
        enabled = ",".join(str(tc) for tc in leaf.lossless_tcs)
        fields |= {"pfc_enable": enabled, "pfcwd_sw_enable": enabled}
    return fields


def _ingress_map(leaf: _Leaf, port: str) -> str:
    """The DSCP map trusted at `port`: fabric-wide on fabric links, the owner's class at hosts."""
    if port in leaf.fabric_ports:
        return FABRIC_MAP
    owner = leaf.host_ports.get(port)
    segment = leaf.segment_of.get(owner) if owner is not None else None
    qos = next(
        (c for c in leaf.classes if segment is not None and c.name == segment.qos_class), None
    )
    return BEST_EFFORT_MAP if qos is None else _map_name(qos)


def _scheduling(leaf: _Leaf) -> Iterator[Row]:
    """SCHEDULER per class, WRED_PROFILE per lossless class, QUEUE per port and class."""
    yield "SCHEDULER", CNP_SCHEDULER, {"type": "STRICT"}
    yield "SCHEDULER", BEST_EFFORT_SCHEDULER, {"type": "DWRR", "weight": str(BEST_EFFORT_WEIGHT)}
    for qos in leaf.classes:
        yield "SCHEDULER", _scheduler(qos), {"type": "DWRR", "weight": str(qos.ets_weight)}
        if qos.lossless:
            yield "WRED_PROFILE", _wred(qos), _wred_fields(qos)
    best_effort_has_class = any(c.tc == BEST_EFFORT_TC for c in leaf.classes)
    for port in leaf.qos_ports:
        if not best_effort_has_class:
            yield "QUEUE", f"{port}|{BEST_EFFORT_TC}", {"scheduler": BEST_EFFORT_SCHEDULER}
        for qos in leaf.classes:
            queue = {"scheduler": _scheduler(qos)}
            if qos.lossless:
                queue["wred_profile"] = _wred(qos)
            yield "QUEUE", f"{port}|{qos.tc}", queue
        yield "QUEUE", f"{port}|{CNP_TC}", {"scheduler": CNP_SCHEDULER}


def _scheduler(qos: RoceQos) -> str:
    return f"scheduler.{qos.name}"


def _wred(qos: RoceQos) -> str:
    return f"WRED_{qos.name.upper()}"


def _wred_fields(qos: RoceQos) -> dict[str, str]:
    """ECN marking on green traffic; wred_green_enable defaults to false (sonic-buildimage#4545)."""
    return {
        "ecn": "ecn_all",
        "wred_green_enable": "true",
        "green_min_threshold": str(qos.ecn_min_bytes),
        "green_max_threshold": str(qos.ecn_max_bytes),
        "green_drop_probability": str(qos.ecn_probability),
    }


def _buffers(leaf: _Leaf) -> Iterator[Row]:
    """Ingress pool, lossy and lossless PG profiles, BUFFER_PG per port, CABLE_LENGTH."""
    lossless = leaf.lossless_tcs
    ports = {p.name: p for p in leaf.switch.ports}
    yield "BUFFER_POOL", INGRESS_POOL, {"type": "ingress", "mode": "dynamic"}
    yield (
        "BUFFER_PROFILE",
        LOSSY_PROFILE,
        {"pool": INGRESS_POOL, "size": "0", "dynamic_th": LOSSY_DYNAMIC_TH},
    )
    cables: dict[str, str] = {}
    for name in leaf.qos_ports:
        port = ports[name]
        cables[name] = port.cable_length
        yield "BUFFER_PG", f"{name}|0", {"profile": LOSSY_PROFILE}
        if not lossless:
            continue
        profile = f"pg_lossless_{port.speed}_{port.cable_length}_profile"
        yield "BUFFER_PROFILE", profile, _lossless_profile(port.speed, port.cable_length)
        for tc in lossless:
            yield "BUFFER_PG", f"{name}|{tc}", {"profile": profile}
    yield "CABLE_LENGTH", CABLE_LENGTH_PROFILE, cables


def _lossless_profile(speed_mbps: int, cable_length: str) -> dict[str, str]:
    """Static headroom profile for a lossless PG (estimate, see XON_BYTES and module notes)."""
    digits = cable_length.removesuffix("m")
    if not (digits.isascii() and digits.isdigit()) or digits == cable_length:
        raise ValidationError(f"cable length {cable_length!r} is not '<meters>m'")
    meters = int(digits)
    # Round trip 2 * meters * 5 ns at speed_mbps * 1e6 bit/s, in bytes.
    in_flight = speed_mbps * meters * 10 / 8000
    xoff = 1024 * math.ceil((in_flight + 2 * JUMBO_FRAME + RESPONSE_ALLOWANCE_BYTES) / 1024)
    return {
        "pool": INGRESS_POOL,
        "xon": str(XON_BYTES),
        "xoff": str(xoff),
        "size": str(XON_BYTES + xoff),
        "dynamic_th": LOSSLESS_DYNAMIC_TH,
    }


def _pfc_watchdog(leaf: _Leaf) -> Iterator[Row]:
    """PFC watchdog on every PFC-enabled port (roce.md §7: PFC_WD on every PFC port)."""
    if not leaf.lossless_tcs:
        return
    yield "PFC_WD", "GLOBAL", {"POLL_INTERVAL": PFCWD_POLL_MS}
    for port in leaf.qos_ports:
        yield "PFC_WD", port, dict(PFCWD_PORT)


# The tables of a leaf, each part a generator of (table, key, fields) rows.
_PARTS = (_identity, _underlay, _overlay, _qos_maps, _scheduling, _buffers, _pfc_watchdog)
