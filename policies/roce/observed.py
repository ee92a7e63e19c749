"""A SONiC leaf's tenant state as read back, and as the model intends it, in one shape.

Two sources per leaf:

* CONFIG_DB tables (``{TABLE: {key: {field: value}}}``, as SONiC's ConfigDBConnector returns
  them and as `render_config_db` renders them): VLAN members by port, VRFs with their VNI,
  VXLAN tunnel maps and port QoS bindings (`leaf_state`);
* FRR: the running configuration (each BGP VRF instance's route-target imports) and bgpd's
  ``show bgp l2vpn evpn vni json`` (each VNI bgpd knows, with its import and export RTs)
  (`running_frr_state`).

`intended_frr_state` builds the same FRR shape from the leaf's rendered frr.conf, so the
comparison (policies/roce/observations.py) compares like with like.

It is pure (stdlib only, no I/O).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policies.errors import InputFormatError
from policies.roce.model import RoceSnapshot
from policies.roce.parse_frr import ParsedFrr, parse_frr_conf
from policies.roce.render_frr import render_frr_conf

Tables = Mapping[str, Mapping[str, Mapping[str, Any]]]
_VLAN_NAME = re.compile(r"Vlan([0-9]{1,4})")
_VRF_NAME = re.compile(r"Vrf([0-9]{1,8})")


@dataclass(frozen=True, slots=True, order=True)
class TunnelMap:
    """One VXLAN_TUNNEL_MAP entry: ``<tunnel>|<name>`` mapping `vni` to VLAN `vlan`."""

    tunnel: str
    name: str
    vni: int | None
    vlan: str


@dataclass(frozen=True)
class LeafState:
    """The tenant-relevant CONFIG_DB content of one leaf.

    `vlan_members` maps a port to the VLAN names (``Vlan100``) it is a member of; `vrfs` a VRF
    to its VNI (None without one); `port_qos` a port to its PORT_QOS_MAP fields (a list field
    comma-joined, as SONiC writes it).
    """

    vlan_members: Mapping[str, frozenset[str]]
    vrfs: Mapping[str, int | None]
    tunnel_maps: frozenset[TunnelMap]
    port_qos: Mapping[str, Mapping[str, str]]

    def members_by_vlan(self) -> dict[int, set[str]]:
        """VLAN ID -> member ports, for the VLANs named ``Vlan<n>``."""
        members: dict[int, set[str]] = {}
        for port, vlans in self.vlan_members.items():
            for vlan in filter(None, map(vlan_id, vlans)):
                members.setdefault(vlan, set()).add(port)
        return members


@dataclass(frozen=True, slots=True)
class EvpnVni:
    """A VNI as bgpd shows it: ``L2`` or ``L3``, with its import and export route targets."""

    vni: int
    kind: str
    imports: frozenset[str]
    exports: frozenset[str]


@dataclass(frozen=True)
class FrrState:
    """FRR's tenant state of a leaf: bgpd's VNIs, and each BGP VRF instance's RT imports."""

    vnis: Mapping[int, EvpnVni]
    vrf_imports: Mapping[str, frozenset[str]]


def vlan_id(name: str) -> int | None:
    """The VLAN ID of ``Vlan<n>``; None for any other name."""
    match = _VLAN_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def vrf_number(name: str) -> int | None:
    """The number of ``Vrf<n>`` (isofabric names a tenant's VRF after its L3VNI); else None."""
    match = _VRF_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def leaf_state(tables: Tables) -> LeafState:
    """The VLAN members, VRFs, tunnel maps and port QoS bindings of CONFIG_DB `tables`.

    A key of the wrong shape (a VLAN_MEMBER key without ``|``) is skipped: it is not a member
    SONiC's vlanmgrd would apply either.
    """
    members: dict[str, set[str]] = {}
    for key in tables.get("VLAN_MEMBER", {}):
        vlan, sep, port = key.partition("|")
        if sep and port:
            members.setdefault(port, set()).add(vlan)
    vrfs = {name: _int(fields.get("vni")) for name, fields in tables.get("VRF", {}).items()}
    maps = frozenset(_tunnel_maps(tables.get("VXLAN_TUNNEL_MAP", {})))
    qos = {
        port: {field: _text(value) for field, value in fields.items()}
        for port, fields in tables.get("PORT_QOS_MAP", {}).items()
    }
    return LeafState({port: frozenset(vlans) for port, vlans in members.items()}, vrfs, maps, qos)


def _tunnel_maps(table: Mapping[str, Mapping[str, Any]]) -> Iterator[TunnelMap]:
    for key, fields in table.items():
        tunnel, separator, name = key.partition("|")
        if separator:
            yield TunnelMap(tunnel, name, _int(fields.get("vni")), str(fields.get("vlan", "")))


def _int(value: Any) -> int | None:
    text = str(value) if value is not None else ""
    return int(text) if text.isdigit() else None


def _text(value: Any) -> str:
    # ConfigDBConnector returns a `field@` list as a list; SONiC's tables write it comma-joined.
    return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)


def evpn_vnis(text: str) -> dict[int, EvpnVni]:
    """The VNIs of ``show bgp l2vpn evpn vni json`` (bgpd, bgp_evpn_vty.c show_vni_entry).

    The document holds global members (``advertiseAllVnis``, ``numVnis``, ...) and one object
    per VNI, keyed by the VNI, with ``vni``, ``type`` (``L2``/``L3``), ``importRTs`` and
    ``exportRTs``; anything else is ignored. An empty answer (bgpd without EVPN) is no VNI.

    Raises:
        InputFormatError: the text is neither empty nor a JSON object.
    """
    if not text.strip():
        return {}
    try:
        document = json.loads(text)
    except ValueError as error:
        raise InputFormatError(f"show bgp l2vpn evpn vni json: not JSON ({error})") from error
    if not isinstance(document, dict):
        raise InputFormatError("show bgp l2vpn evpn vni json: not a JSON object")
    return {
        entry["vni"]: EvpnVni(
            entry["vni"],
            str(entry.get("type", "")),
            _route_targets(entry.get("importRTs")),
            _route_targets(entry.get("exportRTs")),
        )
        for entry in document.values()
        if isinstance(entry, dict) and isinstance(entry.get("vni"), int)
    }


def _route_targets(values: Any) -> frozenset[str]:
    # ECOMMUNITY_FORMAT_ROUTE_MAP prints "ASN:NN"; the display format would add "RT:".
    items = values if isinstance(values, list) else []
    return frozenset(str(v).removeprefix("RT:") for v in items)


def running_frr_state(running_config: str, vni_json: str) -> FrrState:
    """FRR's state from ``show running-config`` and ``show bgp l2vpn evpn vni json``.

    Raises:
        InputFormatError: `vni_json` is not bgpd's JSON (see `evpn_vnis`).
    """
    return FrrState(evpn_vnis(vni_json), _vrf_imports(parse_frr_conf(running_config)))


def intended_frr_state(snapshot: RoceSnapshot, leaf: str) -> FrrState:
    """The FRR state leaf `leaf`'s rendered frr.conf configures.

    L2VNIs carry their per-VNI RTs; an L3VNI (a zebra ``vrf`` block's ``vni``) carries its BGP
    VRF instance's RTs, as bgpd shows them (the VRF's import list, leaks included).

    Raises:
        NotFoundError, InvalidValueError, ArtifactHazardError: as `render_frr_conf`.
    """
    parsed = parse_frr_conf(render_frr_conf(snapshot, leaf))
    vnis: dict[int, EvpnVni] = {}
    default = parsed.instance(None)
    for block in default.vnis if default else ():
        vnis[block.vni] = EvpnVni(
            block.vni, "L2", frozenset(block.rt_imports), frozenset(block.rt_exports)
        )
    for vrf in parsed.vrfs:
        instance = parsed.instance(vrf.name)
        if vrf.l3vni is not None and instance is not None:
            imports, exports = frozenset(instance.rt_imports), frozenset(instance.rt_exports)
            vnis[vrf.l3vni] = EvpnVni(vrf.l3vni, "L3", imports, exports)
    return FrrState(vnis, _vrf_imports(parsed))


def _vrf_imports(parsed: ParsedFrr) -> dict[str, frozenset[str]]:
    return {b.vrf: frozenset(b.rt_imports) for b in parsed.bgp if b.vrf is not None}
