"""Which CONFIG_DB keys of a leaf isofabric owns, and so may add, replace and remove.

Owned keys are what the renderer emits per tenant (render_sonic.py `_overlay`, the host ports'
PORT_QOS_MAP) inside the fabric's pools: a VRF named ``Vrf<n>`` with n in the L3VNI range,
VLANs ``Vlan<n>`` with n in the VLAN range with their members and interfaces, the VTEP's
tunnel maps of VNIs in the L2VNI or L3VNI range, the anycast gateway ``SAG|GLOBAL`` and the
QoS binding of each host port. Everything else in a target document is only *declared*
(ports, fabric-wide QoS, buffers, the VTEP itself): a patch changes it field by field and only
when asked to (policies/roce/patch.py). Keys in neither are *foreign*: never touched.

Numbers are read in their canonical decimal form only (``Vlan0100`` is not ``Vlan100``): the
renderer never writes another, so anything else is someone else's key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from policies.errors import InvalidValueError
from policies.roce.model import RoceSnapshot
from policies.roce.render_sonic import VTEP
from policies.roce.sonic_leaf import leaf_context

OWNERSHIP_FILE = "ownership.json"

Range = tuple[int, int]

_FIELDS = ("host_ports", "l2vni_range", "l3vni_range", "leaf", "vlan_range", "vtep")


@dataclass(frozen=True)
class LeafOwnership:
    """What isofabric owns on one leaf: its pools (inclusive ranges), host ports and VTEP name."""

    leaf: str
    vlan_range: Range
    l2vni_range: Range
    l3vni_range: Range
    host_ports: frozenset[str]
    vtep: str

    def owns(self, table: str, key: str) -> bool:
        """True if CONFIG_DB key ``table|key`` is isofabric's on this leaf (module docstring)."""
        if table == "VRF":
            return _in(_number(key, "Vrf"), self.l3vni_range)
        if table == "VLAN":
            return self._owned_vlan(key)
        if table in ("VLAN_MEMBER", "VLAN_INTERFACE"):
            vlan, sep, rest = key.partition("|")
            has_suffix = bool(rest) or (table == "VLAN_INTERFACE" and not sep)
            return has_suffix and self._owned_vlan(vlan)
        if table == "VXLAN_TUNNEL_MAP":
            return self._owned_map(key)
        if table == "SAG":
            return key == "GLOBAL"
        if table == "PORT_QOS_MAP":
            return key in self.host_ports
        return False

    def _owned_vlan(self, name: str) -> bool:
        return _in(_number(name, "Vlan"), self.vlan_range)

    def _owned_map(self, key: str) -> bool:
        """``<vtep>|map_<vni>_Vlan<n>`` with the VNI in the L2VNI or L3VNI range."""
        tunnel, _, name = key.partition("|")
        vni_text, _, vlan = name.removeprefix("map_").partition("_")
        if tunnel != self.vtep or not name.startswith("map_") or _number(vlan, "Vlan") is None:
            return False
        vni = _number(vni_text, "")
        return _in(vni, self.l2vni_range) or _in(vni, self.l3vni_range)

    def to_json(self) -> str:
        """``ownership.json``: sorted keys, 2-space indent, final newline; ports sorted."""
        document = {
            "leaf": self.leaf,
            "vlan_range": list(self.vlan_range),
            "l2vni_range": list(self.l2vni_range),
            "l3vni_range": list(self.l3vni_range),
            "host_ports": sorted(self.host_ports),
            "vtep": self.vtep,
        }
        return json.dumps(document, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> LeafOwnership:
        """Parse `to_json`'s output; raises InvalidValueError on anything malformed."""
        try:
            document = json.loads(text)
        except (ValueError, TypeError) as error:
            raise InvalidValueError(f"ownership.json is not JSON: {error}") from None
        if not isinstance(document, dict) or tuple(sorted(document)) != _FIELDS:
            raise InvalidValueError(f"ownership.json must be an object with {', '.join(_FIELDS)}")
        ports = document["host_ports"]
        if not isinstance(ports, list) or not all(_is_name(p) for p in ports):
            raise InvalidValueError("ownership.json: host_ports must be a list of port names")
        return cls(
            leaf=_name(document, "leaf"),
            vlan_range=_range(document, "vlan_range"),
            l2vni_range=_range(document, "l2vni_range"),
            l3vni_range=_range(document, "l3vni_range"),
            host_ports=frozenset(ports),
            vtep=_name(document, "vtep"),
        )


def leaf_ownership(snapshot: RoceSnapshot, leaf: str) -> LeafOwnership:
    """What isofabric owns on leaf `leaf` of `snapshot`.

    The pools are the fabric's (not only what is allocated now), so a key isofabric rendered
    before stays owned after its tenant left and its removal is part of the patch. Host ports
    are the leaf's ports with a NIC cabled, allocated or not.

    Raises:
        NotFoundError: `leaf` is not a switch of the snapshot.
        InvalidValueError: `leaf` is not a leaf with a VTEP (what rendering it raises).
    """
    context = leaf_context(snapshot, leaf)
    fabric = snapshot.fabric
    return LeafOwnership(
        leaf=leaf,
        vlan_range=(fabric.vlan_first, fabric.vlan_last),
        l2vni_range=(fabric.l2vni_first, fabric.l2vni_last),
        l3vni_range=(fabric.l3vni_first, fabric.l3vni_last),
        host_ports=frozenset(context.host_ports),
        vtep=VTEP,
    )


def _number(text: str, prefix: str) -> int | None:
    """The canonical decimal after `prefix` (``Vlan100`` -> 100); None for anything else."""
    digits = text.removeprefix(prefix) if text.startswith(prefix) else ""
    if not (digits.isascii() and digits.isdigit()) or (digits[0] == "0" and digits != "0"):
        return None
    return int(digits)


def _in(number: int | None, bounds: Range) -> bool:
    return number is not None and bounds[0] <= number <= bounds[1]


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and value == value.strip()


def _name(document: dict[str, Any], field: str) -> str:
    value = document[field]
    if not _is_name(value):
        raise InvalidValueError(f"ownership.json: {field} must be a non-empty name")
    return str(value)


def _range(document: dict[str, Any], field: str) -> Range:
    value = document[field]
    valid = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value)
        and value[0] <= value[1]
    )
    if not valid:
        raise InvalidValueError(f"ownership.json: {field} must be [first, last], first <= last")
    return value[0], value[1]
