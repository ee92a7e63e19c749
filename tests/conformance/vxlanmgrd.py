"""What SONiC's vxlanmgrd creates from a leaf's CONFIG_DB, in a lab router's namespace.

roce_lab.py re-exports `apply_vxlanmgrd`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .roce_lab import Router


def apply_vxlanmgrd(router: Router, config_db: Mapping[str, Mapping[str, Any]]) -> list[int]:
    """Make `router`'s VXLAN devices what SONiC's vxlanmgrd would create from `config_db`.

    For each ``VXLAN_TUNNEL_MAP|<tunnel>|map_<vni>_Vlan<id>`` whose VNI is no VRF's L3VNI (an
    L3VNI needs a VRF device, which this kernel lacks): a bridge ``Vlan<id>`` (SONiC's SVI name;
    here one plain bridge per VLAN, as the kernel rejects VLAN-filtering bridges) and the VXLAN
    device vxlanmgrd names ``<tunnel>-<id>`` (sonic-swss vxlanmgr.cpp), ``local`` the tunnel's
    ``src_ip``, port 4789, learning off, enslaved to it. Devices of maps no longer present are
    deleted. Returns the L2VNIs present afterwards, sorted.
    """
    wanted = _l2vni_devices(config_db)
    existing = _existing_devices(router)
    for vxlan, (bridge, vni) in existing.items():
        if wanted.get(vxlan, ("", 0, ""))[:2] != (bridge, vni):  # gone, or its map changed
            router.ip("link", "del", vxlan)
            router.ip("link", "del", bridge, check=False)
    for vxlan, (bridge, vni, source) in wanted.items():
        if existing.get(vxlan) != (bridge, vni):
            _create(router, vxlan, bridge, vni, source)
    return sorted(vni for _, vni, _ in wanted.values())


def _create(router: Router, vxlan: str, bridge: str, vni: int, source: str) -> None:
    router.ip("link", "add", bridge, "type", "bridge")
    options = ["id", str(vni), "local", source, "dstport", "4789", "nolearning"]
    router.ip("link", "add", vxlan, "type", "vxlan", *options)
    router.ip("link", "set", vxlan, "master", bridge)
    for device in (bridge, vxlan):
        router.ip("link", "set", device, "up")


def _l2vni_devices(config_db: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[str, int, str]]:
    """VXLAN device name -> (bridge, VNI, source IP) for each L2VNI map."""
    l3vnis = {str(f.get("vni")) for f in config_db.get("VRF", {}).values()}
    tunnels = config_db.get("VXLAN_TUNNEL", {})
    devices = {}
    for key, fields in config_db.get("VXLAN_TUNNEL_MAP", {}).items():
        tunnel = key.split("|", 1)[0]
        if str(fields["vni"]) in l3vnis:
            continue
        vlan_id = str(fields["vlan"]).removeprefix("Vlan")
        devices[f"{tunnel}-{vlan_id}"] = (
            f"Vlan{vlan_id}",
            int(fields["vni"]),
            str(tunnels[tunnel]["src_ip"]),
        )
    return devices


def _existing_devices(router: Router) -> dict[str, tuple[str, int]]:
    """VXLAN device -> (its bridge, its VNI), as the namespace has them now."""
    links = json.loads(router.ip("-j", "-d", "link", "show", "type", "vxlan").stdout or "[]")
    return {
        link["ifname"]: (link.get("master", ""), int(link["linkinfo"]["info_data"]["id"]))
        for link in links
    }
