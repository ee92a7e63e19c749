"""The RoCE QoS part of a leaf's config_db.json: DSCP/TC/PFC maps, schedulers, WRED/ECN, buffers.

docs/facts/roce.md §2: one fabric-wide DSCP map on fabric ports, a per-class map on host ports,
PFC and a lossless PG with a static headroom profile for lossless classes, and the PFC watchdog.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from policies.errors import InvalidValueError
from policies.roce.model import (
    CNP_DSCP,
    CNP_TC,
    MAX_SWITCH_MTU,
    RoceQos,
)
from policies.roce.sonic_leaf import (
    BEST_EFFORT_TC,
    DSCP_VALUES,
    TRAFFIC_CLASSES,
    LeafContext,
    Row,
    map_name,
)

FABRIC_MAP = "AI_FABRIC"


# Owners without a QoS class (shared services, unallocated nodes) are best effort: TC 0, lossy.
BEST_EFFORT_MAP = "TENANT_BEST_EFFORT"


# Best effort gets the smallest DWRR share; class weights are relative to it.
BEST_EFFORT_WEIGHT = 1


CNP_SCHEDULER = "scheduler.cnp"


BEST_EFFORT_SCHEDULER = "scheduler.best_effort"


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


def qos_maps(leaf: LeafContext) -> Iterator[Row]:
    """DSCP/TC/PG/PFC maps and each port's PORT_QOS_MAP."""
    fabric_map = {"0": str(BEST_EFFORT_TC), str(CNP_DSCP): str(CNP_TC)}
    fabric_map |= {str(c.dscp): str(c.tc) for c in leaf.classes}
    yield "DSCP_TO_TC_MAP", FABRIC_MAP, fabric_map
    yield "DSCP_TO_TC_MAP", BEST_EFFORT_MAP, _whole_dscp_map(BEST_EFFORT_TC)
    for qos in leaf.classes:
        yield "DSCP_TO_TC_MAP", map_name(qos), _whole_dscp_map(qos.tc)
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


def _port_qos(leaf: LeafContext, port: str) -> dict[str, str]:
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


def _ingress_map(leaf: LeafContext, port: str) -> str:
    """The DSCP map trusted at `port`: fabric-wide on fabric links, the owner's class at hosts."""
    if port in leaf.fabric_ports:
        return FABRIC_MAP
    owner = leaf.host_ports.get(port)
    segment = leaf.segment_of.get(owner) if owner is not None else None
    qos = next(
        (c for c in leaf.classes if segment is not None and c.name == segment.qos_class), None
    )
    return BEST_EFFORT_MAP if qos is None else map_name(qos)


def scheduling(leaf: LeafContext) -> Iterator[Row]:
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


def buffers(leaf: LeafContext) -> Iterator[Row]:
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
        raise InvalidValueError(f"cable length {cable_length!r} is not '<meters>m'")
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


def pfc_watchdog(leaf: LeafContext) -> Iterator[Row]:
    """PFC watchdog on every PFC-enabled port (roce.md §7: PFC_WD on every PFC port)."""
    if not leaf.lossless_tcs:
        return
    yield "PFC_WD", "GLOBAL", {"POLL_INTERVAL": PFCWD_POLL_MS}
    for port in leaf.qos_ports:
        yield "PFC_WD", port, dict(PFCWD_PORT)
