"""Read a deployed SONiC leaf's ``config_db.json`` into what the RoCE engine audits, with findings.

Only the tables the engine compares with its intent are kept (docs/facts/roce.md §1, §2): the
hostname, VRFs, VLANs and members, VXLAN tunnel maps, VLAN interfaces, and the RoCE QoS tables
(PORT_QOS_MAP, DSCP_TO_TC_MAP, SCHEDULER, QUEUE, WRED_PROFILE). Keys are read the way SONiC's
daemons read them: ``|`` separates key parts, QUEUE and PORT_QOS_MAP keys may list ports with
``,`` and queues as a range ``0-2`` (swss qosorch), and a VLAN member without ``tagging_mode`` is
untagged (swss vlanmgr/portsorch default). A traffic class is assumed to use the queue of the
same number (the engine renders identity TC_TO_QUEUE and PFC-to-queue maps).

It is pure (stdlib only, no I/O). A document that is not JSON, or whose tables have the wrong
shape, raises `InputFormatError`; everything else is reported as a `Finding`.

Finding codes (stable):

=======================  ========  ==============================================================
code                     severity  construct
=======================  ========  ==============================================================
vrf-vni-unmapped         critical  a VRF ``vni`` without a VXLAN_TUNNEL_MAP: vrfmgr refuses the
                                   VRF-VNI map ("vni should be mapped by vlan firstly", SONiC#803)
tunnel-map-missing-vlan  critical  a tunnel map names a VLAN that is not in VLAN
vni-mapped-twice         critical  one VNI in two tunnel maps (two bridge domains in one segment)
port-untagged-twice      critical  a port untagged in two VLANs (its untagged frames go to one)
tagging-mode-missing     warning   a VLAN member without ``tagging_mode`` (SONiC makes it untagged)
pfc-without-ecn          warning   a ``pfc_enable`` priority whose queue has no WRED profile that
                                   ECN-marks green traffic: congestion turns into PFC pauses that
                                   spread to other tenants' flows
pfc-on-cnp               warning   PFC enabled on the CNP priority 6 (CNPs must never be paused)
pfc-without-watchdog     warning   a port with ``pfc_enable`` but no PFC_WD entry: a PFC storm
                                   from a stuck host pauses the fabric with no recovery
cnp-queue-not-strict     warning   the CNP queue 6 of a QoS port is not scheduled STRICT
=======================  ========  ==============================================================
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from policies.errors import InputFormatError
from policies.findings import Finding, Severity
from policies.roce.model import CNP_TC

_VLAN_NAME = re.compile(r"Vlan([0-9]+)")
_QUEUE_INDEX = re.compile(r"([0-9]+)(?:-([0-9]+))?")
# sonic-wred-profile YANG: the `ecn` modes that mark green (unpoliced, i.e. all RoCE) traffic.
_GREEN_ECN = frozenset({"ecn_green", "ecn_green_yellow", "ecn_green_red", "ecn_all"})
# sonic-scheduler YANG: a SCHEDULER without `type` is WRR.
_DEFAULT_SCHEDULER_TYPE = "WRR"

Table = dict[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class VlanMember:
    """A VLAN_MEMBER entry; `tagging_mode` as SONiC applies it (``untagged`` when absent)."""

    vlan: int
    port: str
    tagging_mode: str


@dataclass(frozen=True, slots=True)
class TunnelMap:
    """A VXLAN_TUNNEL_MAP entry: `vni` bridged to VLAN `vlan`; `key` is ``<vtep>|<map>``."""

    key: str
    vni: int
    vlan: int


@dataclass(frozen=True, slots=True)
class VlanInterface:
    """A VLAN's routed interface: the VRF it is bound to and its IP prefixes (text)."""

    vlan: int
    vrf: str | None
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PortQos:
    """A port's PORT_QOS_MAP entry (``global`` is kept under that name)."""

    port: str
    dscp_to_tc_map: str | None
    pfc_enable: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """One egress queue of a port with its scheduler and WRED profile names."""

    port: str
    queue: int
    scheduler: str | None
    wred_profile: str | None


@dataclass(frozen=True, slots=True)
class WredProfile:
    """The ECN part of a WRED_PROFILE: the `ecn` mode and whether green WRED is enabled."""

    name: str
    ecn: str
    green_enabled: bool


@dataclass(frozen=True)
class ParsedConfigDb:
    """What the engine reads from one leaf's config_db, plus the findings about it.

    `vrfs` maps VRF name to its L3VNI (0: none), `dscp_to_tc_maps` map name to DSCP -> TC,
    `schedulers` scheduler name to type (``STRICT``, ``DWRR``, ``WRR``).
    """

    hostname: str | None
    vrfs: dict[str, int]
    vlans: tuple[int, ...]
    vlan_members: tuple[VlanMember, ...]
    tunnel_maps: tuple[TunnelMap, ...]
    vlan_interfaces: tuple[VlanInterface, ...]
    port_qos: tuple[PortQos, ...]
    dscp_to_tc_maps: dict[str, dict[int, int]]
    schedulers: dict[str, str]
    queues: tuple[QueueConfig, ...]
    wred_profiles: dict[str, WredProfile]
    findings: tuple[Finding, ...] = ()
    pfc_watchdog_ports: tuple[str, ...] = ()
    bgp_asn: str | None = None
    loopback_addresses: tuple[str, ...] = ()


def parse_config_db(text: str) -> ParsedConfigDb:
    """Parse a config_db.json document and report what SONiC would misread or isolates badly.

    Contract: every VRF, VLAN, member, tunnel map, VLAN interface and QoS entry of the document
    is returned (lists sorted); `findings` lists each construct of the module docstring's table.

    Raises:
        InputFormatError: the text is not JSON (with its 1-based line), or a table, key or number
            has a shape SONiC's schema does not allow.
    """
    try:
        document = json.loads(text)
    except RecursionError as error:
        # json recurses per nesting level; config_db.json is three levels deep.
        raise InputFormatError(
            "the document is nested too deeply to be a config_db.json"
        ) from error
    except json.JSONDecodeError as error:
        raise InputFormatError(f"not valid JSON: {error.msg}", line=error.lineno) from error
    if not isinstance(document, dict):
        raise InputFormatError("config_db.json must be a JSON object of tables", line=1)
    notes: list[Finding] = []
    parsed = ParsedConfigDb(
        hostname=_hostname(document),
        bgp_asn=_metadata(document, "bgp_asn"),
        loopback_addresses=_loopback_addresses(_table(document, "LOOPBACK_INTERFACE")),
        vrfs=_vrfs(_table(document, "VRF")),
        vlans=tuple(sorted(_vlan_id(n, f"VLAN|{n}") for n in _table(document, "VLAN"))),
        vlan_members=_vlan_members(_table(document, "VLAN_MEMBER"), notes),
        tunnel_maps=_tunnel_maps(_table(document, "VXLAN_TUNNEL_MAP")),
        vlan_interfaces=_vlan_interfaces(_table(document, "VLAN_INTERFACE")),
        port_qos=_port_qos(_table(document, "PORT_QOS_MAP")),
        pfc_watchdog_ports=tuple(sorted(set(_table(document, "PFC_WD")) - {"GLOBAL"})),
        dscp_to_tc_maps=_dscp_maps(_table(document, "DSCP_TO_TC_MAP")),
        schedulers={
            name: str(fields.get("type", _DEFAULT_SCHEDULER_TYPE)).upper()
            for name, fields in _table(document, "SCHEDULER").items()
        },
        queues=_queues(_table(document, "QUEUE")),
        wred_profiles=_wred_profiles(_table(document, "WRED_PROFILE")),
    )
    findings = (*_vni_findings(parsed), *_member_findings(parsed), *notes, *_qos_findings(parsed))
    return replace(parsed, findings=findings)


# --- reading tables -----------------------------------------------------------------------------


def _table(document: dict[str, Any], name: str) -> Table:
    table = document.get(name, {})
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise InputFormatError(f"table {name} must map each key to an object of fields")
    return table


def _int(value: Any, where: str) -> int:
    text = str(value).strip()
    if not text.isdigit():
        raise InputFormatError(f"{where}: {value!r} is not a non-negative decimal number")
    return int(text)


def _vlan_id(name: Any, where: str) -> int:
    match = _VLAN_NAME.fullmatch(str(name))
    if match is None:
        raise InputFormatError(f"{where}: {name!r} is not a VLAN name (Vlan<id>)")
    return int(match.group(1))


def _split(key: str, table: str) -> tuple[str, str]:
    head, sep, tail = key.rpartition("|")
    if not sep or not head:
        raise InputFormatError(f"{table}|{key}: the key needs two parts separated by '|'")
    return head, tail


def _hostname(document: dict[str, Any]) -> str | None:
    return _metadata(document, "hostname")


def _metadata(document: dict[str, Any], field_name: str) -> str | None:
    value = _table(document, "DEVICE_METADATA").get("localhost", {}).get(field_name)
    return str(value) if value is not None else None


def _loopback_addresses(table: Table) -> tuple[str, ...]:
    # LOOPBACK_INTERFACE|Loopback0|10.1.0.1/32: the address is the prefix's host part.
    return tuple(sorted({key.split("|")[1].split("/")[0] for key in table if key.count("|") == 1}))


def _vrfs(table: Table) -> dict[str, int]:
    # sonic-vrf YANG: `vni` defaults to 0, meaning the VRF has no L3VNI.
    return {name: _int(fields.get("vni", 0), f"VRF|{name}") for name, fields in table.items()}


def _vlan_members(table: Table, notes: list[Finding]) -> tuple[VlanMember, ...]:
    members = []
    for key, fields in table.items():
        vlan, port = _split(key, "VLAN_MEMBER")
        mode = fields.get("tagging_mode")
        if mode is None:
            # swss vlanmgr.cpp / portsorch.cpp: `string tagging_mode = "untagged";` by default.
            notes.append(
                Finding(
                    "tagging-mode-missing",
                    Severity.WARNING,
                    f"{port} has no tagging_mode in {vlan}; SONiC makes it untagged",
                    key=f"VLAN_MEMBER|{key}",
                )
            )
        members.append(VlanMember(_vlan_id(vlan, f"VLAN_MEMBER|{key}"), port, mode or "untagged"))
    return tuple(sorted(members, key=lambda m: (m.vlan, m.port)))


def _tunnel_maps(table: Table) -> tuple[TunnelMap, ...]:
    maps = []
    for key, fields in table.items():
        _split(key, "VXLAN_TUNNEL_MAP")
        where = f"VXLAN_TUNNEL_MAP|{key}"
        if "vni" not in fields or "vlan" not in fields:
            raise InputFormatError(f"{where}: 'vni' and 'vlan' are mandatory")
        maps.append(TunnelMap(key, _int(fields["vni"], where), _vlan_id(fields["vlan"], where)))
    return tuple(sorted(maps, key=lambda m: (m.vni, m.vlan, m.key)))


def _vlan_interfaces(table: Table) -> tuple[VlanInterface, ...]:
    vrf: dict[int, str | None] = {}
    addresses: dict[int, list[str]] = defaultdict(list)
    for key, fields in table.items():
        name, _, prefix = key.partition("|")
        vlan = _vlan_id(name, f"VLAN_INTERFACE|{key}")
        if prefix:
            addresses[vlan].append(prefix)
        else:
            vrf[vlan] = fields.get("vrf_name")
    return tuple(
        VlanInterface(vlan, vrf.get(vlan), tuple(sorted(addresses[vlan])))
        for vlan in sorted(vrf.keys() | addresses.keys())
    )


def _ports(names: str) -> list[str]:
    # swss qosorch tokenizes QUEUE and PORT_QOS_MAP port lists on ','.
    return [name.strip() for name in names.split(",") if name.strip()]


def _port_qos(table: Table) -> tuple[PortQos, ...]:
    entries: list[PortQos] = []
    for key, fields in table.items():
        where = f"PORT_QOS_MAP|{key}"
        pfc = str(fields.get("pfc_enable", ""))
        priorities = tuple(sorted({_int(p, where) for p in pfc.split(",") if p.strip()}))
        entries.extend(
            PortQos(port, fields.get("dscp_to_tc_map"), priorities) for port in _ports(key)
        )
    return tuple(sorted(entries, key=lambda e: e.port))


def _dscp_maps(table: Table) -> dict[str, dict[int, int]]:
    return {
        name: {
            _int(dscp, f"DSCP_TO_TC_MAP|{name}"): _int(tc, f"DSCP_TO_TC_MAP|{name}")
            for dscp, tc in entries.items()
        }
        for name, entries in table.items()
    }


def _queue_indexes(text: str, where: str) -> range:
    match = _QUEUE_INDEX.fullmatch(text.strip())
    if match is None:
        raise InputFormatError(f"{where}: {text!r} is not a queue index or range (0-2)")
    first, last = int(match.group(1)), int(match.group(2) or match.group(1))
    return range(first, last + 1)


def _queues(table: Table) -> tuple[QueueConfig, ...]:
    queues = []
    for key, fields in table.items():
        # VOQ chassis keys are <host>|<asic>|<port>|<queue>: the last two parts are what counts.
        head, index = _split(key, "QUEUE")
        ports = _ports(head.rpartition("|")[2])
        for port in ports:
            for queue in _queue_indexes(index, f"QUEUE|{key}"):
                scheduler, wred = fields.get("scheduler"), fields.get("wred_profile")
                queues.append(QueueConfig(port, queue, scheduler, wred))
    return tuple(sorted(queues, key=lambda q: (q.port, q.queue)))


def _wred_profiles(table: Table) -> dict[str, WredProfile]:
    # sonic-wred-profile YANG defaults: ecn_none, wred_green_enable false.
    return {
        name: WredProfile(
            name,
            str(fields.get("ecn", "ecn_none")),
            str(fields.get("wred_green_enable", "false")).lower() == "true",
        )
        for name, fields in table.items()
    }


# --- findings -----------------------------------------------------------------------------------


def _critical(code: str, message: str, key: str) -> Finding:
    return Finding(code, Severity.CRITICAL, message, key=key)


def _warning(code: str, message: str, key: str) -> Finding:
    return Finding(code, Severity.WARNING, message, key=key)


def _vni_findings(parsed: ParsedConfigDb) -> Iterator[Finding]:
    by_vni: dict[int, list[TunnelMap]] = defaultdict(list)
    for tunnel_map in parsed.tunnel_maps:
        by_vni[tunnel_map.vni].append(tunnel_map)
        if tunnel_map.vlan not in parsed.vlans:
            yield _critical(
                "tunnel-map-missing-vlan",
                f"VNI {tunnel_map.vni} is mapped to Vlan{tunnel_map.vlan}, which is not in VLAN",
                f"VXLAN_TUNNEL_MAP|{tunnel_map.key}",
            )
    for vni, maps in sorted(by_vni.items()):
        for duplicate in maps[1:]:
            yield _critical(
                "vni-mapped-twice",
                f"VNI {vni} is mapped to Vlan{maps[0].vlan} and Vlan{duplicate.vlan}",
                f"VXLAN_TUNNEL_MAP|{duplicate.key}",
            )
    for name, vni in sorted(parsed.vrfs.items()):
        if vni and vni not in by_vni:
            # SONiC#803: vrfmgr logs "vni should be mapped by vlan firstly" and skips the VRF.
            yield _critical(
                "vrf-vni-unmapped",
                f"{name} has L3VNI {vni} but no VXLAN_TUNNEL_MAP maps {vni} to a VLAN; SONiC "
                f"refuses the VRF-VNI map",
                f"VRF|{name}",
            )


def _member_findings(parsed: ParsedConfigDb) -> Iterator[Finding]:
    untagged: dict[str, list[int]] = defaultdict(list)
    for member in parsed.vlan_members:
        if member.tagging_mode == "untagged":
            untagged[member.port].append(member.vlan)
    for port, vlans in sorted(untagged.items()):
        for vlan in vlans[1:]:
            yield _critical(
                "port-untagged-twice",
                f"{port} is untagged in Vlan{vlans[0]} and Vlan{vlan}",
                f"VLAN_MEMBER|Vlan{vlan}|{port}",
            )


def _qos_findings(parsed: ParsedConfigDb) -> Iterator[Finding]:
    queues = {(q.port, q.queue): q for q in parsed.queues}
    for entry in parsed.port_qos:
        if entry.port == "global":
            continue
        yield from _pfc_findings(parsed, entry, queues)
        if entry.pfc_enable and entry.port not in parsed.pfc_watchdog_ports:
            # docs/facts/roce.md §7: PFC_WD on every PFC port (sonic-utilities pfcwd defaults).
            yield _warning(
                "pfc-without-watchdog",
                f"{entry.port} enables PFC on {','.join(map(str, entry.pfc_enable))} but has no "
                f"PFC watchdog",
                f"PFC_WD|{entry.port}",
            )
        cnp = queues.get((entry.port, CNP_TC))
        kind = parsed.schedulers.get(cnp.scheduler or "") if cnp else None
        if kind != "STRICT":
            # docs/facts/roce.md §2, §7: CNP (DSCP 48 -> TC 6) is scheduled strict priority.
            yield _warning(
                "cnp-queue-not-strict",
                f"CNP queue {CNP_TC} of {entry.port} is scheduled {kind or 'by default (WRR)'}, "
                f"not STRICT",
                f"QUEUE|{entry.port}|{CNP_TC}",
            )


def _pfc_findings(
    parsed: ParsedConfigDb, entry: PortQos, queues: dict[tuple[str, int], QueueConfig]
) -> Iterable[Finding]:
    findings = []
    for priority in entry.pfc_enable:
        key = f"PORT_QOS_MAP|{entry.port}"
        if priority == CNP_TC:
            message = f"{entry.port} enables PFC on the CNP priority {CNP_TC}"
            findings.append(_warning("pfc-on-cnp", message, key))
        queue = queues.get((entry.port, priority))
        profile = parsed.wred_profiles.get(queue.wred_profile or "") if queue else None
        if profile is None or not profile.green_enabled or profile.ecn not in _GREEN_ECN:
            # docs/facts/roce.md §7: WRED with wred_green_enable and ecn on every lossless queue.
            findings.append(
                _warning(
                    "pfc-without-ecn",
                    f"{entry.port} enables PFC on priority {priority} but queue {priority} has "
                    f"no WRED profile that ECN-marks green traffic",
                    f"QUEUE|{entry.port}|{priority}",
                )
            )
    return findings
