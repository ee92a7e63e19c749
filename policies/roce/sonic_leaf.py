"""What rendering one SONiC leaf needs: the switch, its port roles and owners, the QoS classes.

Built once per leaf by `leaf_context`, which also refuses what SONiC cannot express (a port with
two owners, a spine, a QoS class whose DSCP, TC or map name is out of range).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from policies.errors import InvalidValueError, NotFoundError
from policies.model import Owner
from policies.roce.model import (
    CNP_DSCP,
    CNP_TC,
    RoceQos,
    RoceSnapshot,
    Switch,
    SwitchRole,
    VrfSegment,
)

BEST_EFFORT_TC = 0


DSCP_VALUES = range(64)


TRAFFIC_CLASSES = range(8)


# sonic-dscp-tc-map.yang / sonic-wred-profile.yang: map and profile names.
_MAP_NAME_MAX = 32


_MAP_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass(frozen=True)
class LeafContext:
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


Row = tuple[str, str, dict[str, Any]]


def leaf_context(snapshot: RoceSnapshot, leaf: str) -> LeafContext:
    """Resolve the leaf switch, its host ports with their owners, and its fabric ports."""
    switch = next((s for s in snapshot.switches if s.name == leaf), None)
    if switch is None:
        raise NotFoundError(f"no switch named {leaf!r} in fabric {snapshot.fabric.name!r}")
    if switch.role is not SwitchRole.LEAF or switch.vtep is None:
        raise InvalidValueError(
            f"{leaf} is not a leaf with a VTEP; SONiC tenant config is per leaf"
        )
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
        raise InvalidValueError(f"{leaf} has no port(s) {', '.join(missing)}")
    classes = _checked_classes(snapshot.qos_classes)
    return LeafContext(snapshot, switch, host_ports, tuple(sorted(fabric)), classes)


def _single_owner(node: str, owners: tuple[Owner, ...]) -> Owner | None:
    """A port carries at most one owner; a shared node is a violation, not something to render."""
    if len(owners) > 1:
        raise InvalidValueError(f"node {node} has {len(owners)} owners; a port carries one tenant")
    return owners[0] if owners else None


def _checked_classes(classes: Iterable[RoceQos]) -> tuple[RoceQos, ...]:
    """Refuse classes SONiC cannot express or that would break CNP handling; sort by TC."""
    ordered = tuple(sorted(classes, key=lambda c: c.tc))
    for qos in ordered:
        if qos.dscp not in DSCP_VALUES or qos.dscp == CNP_DSCP:
            raise InvalidValueError(f"class {qos.name}: DSCP {qos.dscp} is not a data DSCP")
        if qos.tc not in TRAFFIC_CLASSES or qos.tc == CNP_TC:
            raise InvalidValueError(f"class {qos.name}: TC {qos.tc} is not a data traffic class")
        # PG 0 cannot be made lossless (sonic-buildimage#14869); it is the lossy PG.
        if qos.lossless and qos.tc == BEST_EFFORT_TC:
            raise InvalidValueError(f"class {qos.name}: TC 0 cannot be lossless")
        map_name(qos)
    if len({c.dscp for c in ordered}) < len(ordered) or len({c.tc for c in ordered}) < len(ordered):
        raise InvalidValueError("QoS classes must have distinct DSCPs and traffic classes")
    return ordered


def map_name(qos: RoceQos) -> str:
    """``TENANT_<CLASS>``; YANG names match ``[a-zA-Z0-9][-a-zA-Z0-9_]{0,31}``."""
    name = f"TENANT_{qos.name.upper()}"
    if len(name) > _MAP_NAME_MAX or not set(name) <= _MAP_NAME_CHARS:
        raise InvalidValueError(f"class name {qos.name!r} does not fit a SONiC QoS map name")
    return name
