"""Parse an FRR ``frr.conf`` (EVPN-VXLAN leaf) into VRFs, BGP instances and findings.

The parser reads the subset of FRR's integrated configuration that decides tenant isolation on
an EVPN leaf: zebra's ``vrf X`` / ``vni N`` (the L3VNI), ``router bgp`` instances with their
router-id, ``rd``, ``route-target`` lines, ``advertise-all-vni`` and per-L2VNI ``vni`` blocks.
Like vtysh, a command that does not belong to the current node is tried in the parent nodes
(``vni`` -> ``address-family`` -> ``router bgp`` -> config), so a missing ``exit-vni`` does not
lose lines; commands the parser does not model are skipped.

Findings are facts about the file, not verdicts: whether an RT import is an approved leak is
for the engine to judge. Both offline FRR checkers miss most of these (docs/facts/roce.md §4):
``vtysh -C`` checks grammar only and bgpd's dry run exits 0 even on ``% Malformed`` lines.

Finding codes (stable):

============================  ========  ==========================================================
code                          severity  construct
============================  ========  ==========================================================
malformed-rt                  error     an RT that is not ASN2:NN32, ASN4:NN16 or IPv4:NN16
                                        (bgpd: ``% Malformed Route Target list``)
rt-list                       error     several RTs on one ``route-target`` line (vtysh 8.4 rc 2)
malformed-rd                  error     an RD that is not ASN2:NN32, ASN4:NN16 or IPv4:NN16
bad-vni                       error     a VNI outside 1..16777215 or not a number (vtysh rc 2)
duplicate-l3vni               error     two VRFs with the same ``vni`` (zebra refuses the second)
duplicate-rd                  error     one RD on two VRFs/VNIs of the device (RFC 7432 §7.9)
vrf-without-vni               error     ``router bgp N vrf X`` where ``vrf X`` has no ``vni``
vrf-name-too-long             error     a VRF name over 15 characters (Linux IFNAMSIZ)
advertise-all-vni-in-vrf      error     ``advertise-all-vni`` in a VRF instance (bgpd refuses)
vni-in-vrf-instance           error     a ``vni`` block in a VRF instance's EVPN address family
vni-before-advertise-all-vni  error     per-VNI rd/route-target before ``advertise-all-vni``
                                        (bgpd: "This command is only supported under EVPN VRF")
shared-export-rt              warning   one RT exported by two VRFs/VNIs: each importer gets both
import-without-export         info      an RT imported but not exported by the same VRF/VNI:
                                        routes of another VRF leak in (approved or not)
============================  ========  ==========================================================
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from policies.findings import Finding, Severity

# FRR: `vni` is typed (1-16777215) under `vrf` and under `address-family l2vpn evpn`.
MAX_VNI = 2**24 - 1
# Linux IFNAMSIZ (16 with the NUL): a longer VRF name cannot become a kernel device.
MAX_VRF_NAME = 15
_UINT16_MAX = 2**16 - 1
_UINT32_MAX = 2**32 - 1
_VALUE = re.compile(r"(?P<admin>[^:]+):(?P<number>[0-9]+)")
_DIGITS = re.compile(r"[0-9]+")
# Commands that open a top-level node; seen inside another node, vtysh walks up to config.
_TOP_LEVEL = frozenset({"vrf", "router", "interface", "hostname", "line", "frr", "end"})
_VNI_COMMANDS = frozenset(
    {"rd", "route-target", "advertise-default-gw", "advertise-svi-ip", "advertise-subnet"}
)


@dataclass(frozen=True, slots=True)
class ParsedVrf:
    """A zebra ``vrf`` block; `l3vni` is None when it has no ``vni`` line."""

    name: str
    l3vni: int | None
    line: int


@dataclass(frozen=True, slots=True)
class ParsedVni:
    """A per-L2VNI block of ``address-family l2vpn evpn`` with its RD and RTs as written."""

    vni: int
    rd: str | None
    rt_imports: tuple[str, ...]
    rt_exports: tuple[str, ...]
    line: int


@dataclass(frozen=True, slots=True)
class ParsedBgp:
    """A ``router bgp`` instance; `vrf` is None for the default instance.

    `rd`, `rt_imports` and `rt_exports` come from its ``address-family l2vpn evpn``; RTs keep
    file order (``route-target both`` counts as both).
    """

    asn: int
    vrf: str | None
    router_id: str | None
    rd: str | None
    rt_imports: tuple[str, ...]
    rt_exports: tuple[str, ...]
    advertise_all_vni: bool
    advertise_ipv4_unicast: bool
    vnis: tuple[ParsedVni, ...]
    neighbors: tuple[str, ...]
    networks: tuple[str, ...]
    line: int


@dataclass(frozen=True, slots=True)
class ParsedFrr:
    """Everything parsed, in file order, and the findings sorted by line."""

    hostname: str | None
    vrfs: tuple[ParsedVrf, ...]
    bgp: tuple[ParsedBgp, ...]
    findings: tuple[Finding, ...]

    def instance(self, vrf: str | None = None) -> ParsedBgp | None:
        """The BGP instance of `vrf` (None: the default instance), or None if absent."""
        return next((b for b in self.bgp if b.vrf == vrf), None)


def rd_rt_type(text: str) -> str | None:
    """Classify an RT or RD value the way bgpd 8.4 accepts it.

    Returns:
        ``"type0"`` for ASN2:NN32 (ASN <= 65535), ``"type2"`` for ASN4:NN16 (ASN > 65535),
        ``"type1"`` for IPv4:NN16, None for anything bgpd rejects (``65000``, ``tenantA:1``,
        ``65000:1:2``, ``*:1``, ``70000:5000000000``).
    """
    match = _VALUE.fullmatch(text)
    if match is None:
        return None
    admin, number = match["admin"], int(match["number"])
    if _DIGITS.fullmatch(admin):
        asn = int(admin)
        if asn <= _UINT16_MAX:
            return "type0" if number <= _UINT32_MAX else None
        return "type2" if asn <= _UINT32_MAX and number <= _UINT16_MAX else None
    try:
        ipaddress.IPv4Address(admin)
    except ValueError:
        return None
    return "type1" if number <= _UINT16_MAX else None


def parse_frr_conf(text: str) -> ParsedFrr:
    """Parse frr.conf text and report the constructs that matter for tenant isolation.

    Args:
        text: the whole file.

    Returns:
        VRFs and BGP instances in file order, and findings sorted by line. Never raises on
        malformed input: every problem becomes a finding.
    """
    parser = _Parser()
    for number, raw in enumerate(text.splitlines(), start=1):
        words = raw.split()
        if words and not words[0].startswith(("!", "#")):
            parser.feed(number, words)
    vrfs = tuple(ParsedVrf(v.name, v.l3vni, v.line) for v in parser.vrfs)
    bgp = tuple(b.freeze() for b in parser.bgps)
    findings = parser.findings + list(_file_findings(vrfs, bgp))
    findings += _rd_findings(parser.bgps) + _import_findings(parser.bgps)
    findings.sort(key=lambda f: (f.line is None, f.line or 0, f.code))
    return ParsedFrr(parser.hostname, vrfs, bgp, tuple(findings))


@dataclass(slots=True)
class _Vrf:
    name: str
    line: int
    l3vni: int | None = None


@dataclass(slots=True)
class _Vni:
    vni: int
    line: int
    rd: str | None = None
    rt_imports: list[str] = field(default_factory=list)
    rt_exports: list[str] = field(default_factory=list)
    import_lines: dict[str, int] = field(default_factory=dict)
    rd_line: int = 0

    def freeze(self) -> ParsedVni:
        return ParsedVni(
            self.vni, self.rd, tuple(self.rt_imports), tuple(self.rt_exports), self.line
        )


@dataclass(slots=True)
class _Bgp:
    asn: int
    vrf: str | None
    line: int
    router_id: str | None = None
    evpn: _Vni = field(default_factory=lambda: _Vni(0, 0))  # the instance's own rd/RTs
    advertise_all_vni: bool = False
    advertise_ipv4_unicast: bool = False
    vnis: list[_Vni] = field(default_factory=list)
    neighbors: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)

    def freeze(self) -> ParsedBgp:
        return ParsedBgp(
            asn=self.asn,
            vrf=self.vrf,
            router_id=self.router_id,
            rd=self.evpn.rd,
            rt_imports=tuple(self.evpn.rt_imports),
            rt_exports=tuple(self.evpn.rt_exports),
            advertise_all_vni=self.advertise_all_vni,
            advertise_ipv4_unicast=self.advertise_ipv4_unicast,
            vnis=tuple(v.freeze() for v in self.vnis),
            neighbors=tuple(self.neighbors),
            networks=tuple(self.networks),
            line=self.line,
        )


# vtysh: node_parent() of each node this parser tracks ("other" = interface, line vty, ...).
_PARENT = {"vni": "af", "af": "bgp", "bgp": "config", "vrf": "config", "other": "config"}
# `exit` and the explicit exit commands: which node each leaves to.
_EXITS = {"exit-vni": "af", "exit-address-family": "bgp", "exit-vrf": "config", "end": "config"}


class _Parser:
    """vtysh-like node machine over the lines of one file."""

    def __init__(self) -> None:
        self.node = "config"
        self.hostname: str | None = None
        self.vrfs: list[_Vrf] = []
        self.bgps: list[_Bgp] = []
        self.findings: list[Finding] = []
        self.vrf: _Vrf | None = None
        self.bgp: _Bgp | None = None
        self.af = ""
        self.vni: _Vni | None = None

    def feed(self, line: int, words: list[str]) -> None:
        """Apply one command, walking up the node tree like vtysh when it does not fit."""
        if words[0] in _EXITS or words[0] == "exit":
            self.node = _EXITS.get(words[0]) or _PARENT.get(self.node, "config")
            return
        handlers: dict[str, Callable[[int, list[str]], bool]] = {
            "config": self._config,
            "vrf": self._in_vrf,
            "bgp": self._in_bgp,
            "af": self._in_af,
            "vni": self._in_vni,
            "other": lambda _line, w: w[0] not in _TOP_LEVEL,
        }
        node: str | None = self.node
        while node is not None:
            self.node = node
            if handlers[node](line, words):
                return
            node = _PARENT.get(node)
        self.node = "other"  # an unknown top-level command (e.g. `log`): ignore what follows

    def finding(self, code: str, line: int, message: str, severity: Severity) -> None:
        """Record one finding."""
        self.findings.append(Finding(code, severity, message, line=line))

    def _config(self, line: int, words: list[str]) -> bool:
        if words[0] == "vrf" and len(words) == 2:
            self.vrf = _Vrf(words[1], line)
            self.vrfs.append(self.vrf)
            self.node = "vrf"
        elif words[:2] == ["router", "bgp"]:
            self._router_bgp(line, words)
        elif words[0] == "hostname" and len(words) == 2:
            self.hostname = words[1]
        elif words[0] in ("interface", "router", "line"):
            self.node = "other"
        else:
            return words[0] in ("frr", "service", "log", "no")
        return True

    def _router_bgp(self, line: int, words: list[str]) -> None:
        asn = int(words[2]) if len(words) > 2 and words[2].isdigit() else 0
        vrf = words[4] if len(words) == 5 and words[3] == "vrf" else None
        self.bgp = next((b for b in self.bgps if b.vrf == vrf), None)
        if self.bgp is None:  # FRR: a second `router bgp` for the same VRF re-enters it
            self.bgp = _Bgp(asn, vrf, line)
            self.bgps.append(self.bgp)
        self.node = "bgp"

    def _in_vrf(self, line: int, words: list[str]) -> bool:
        if words[0] != "vni" or len(words) < 2 or self.vrf is None:
            return words[0] not in _TOP_LEVEL
        vni = self._vni_number(line, words[1])
        if vni is not None:
            self.vrf.l3vni = vni
        return True

    def _vni_number(self, line: int, text: str) -> int | None:
        if _DIGITS.fullmatch(text) and 1 <= int(text) <= MAX_VNI:
            return int(text)
        self.finding("bad-vni", line, f"VNI {text!r} is not in 1..{MAX_VNI}", Severity.ERROR)
        return None

    def _in_bgp(self, line: int, words: list[str]) -> bool:
        assert self.bgp is not None  # the node is only entered through `router bgp`
        if words[:2] == ["bgp", "router-id"] and len(words) == 3:
            self.bgp.router_id = words[2]
        elif words[0] == "address-family" and len(words) >= 2:
            self.af = " ".join(words[1:3])
            self.node = "af"
        elif words[0] == "neighbor" and len(words) >= 3 and words[2] == "interface":
            self.bgp.neighbors.append(words[1])
        return words[0] not in _TOP_LEVEL

    def _in_af(self, line: int, words: list[str]) -> bool:
        assert self.bgp is not None
        if self.af == "l2vpn evpn":
            return self._in_evpn(line, words, self.bgp)
        if words[0] == "network" and len(words) >= 2:
            self.bgp.networks.append(words[1])
        return words[0] not in _TOP_LEVEL and words[0] != "address-family"

    def _in_evpn(self, line: int, words: list[str], bgp: _Bgp) -> bool:
        if words == ["advertise-all-vni"]:
            bgp.advertise_all_vni = True
            if bgp.vrf is not None:
                message = f"advertise-all-vni in VRF instance {bgp.vrf}: default instance only"
                self.finding("advertise-all-vni-in-vrf", line, message, Severity.ERROR)
        elif words[:3] == ["advertise", "ipv4", "unicast"]:
            bgp.advertise_ipv4_unicast = True
        elif words[0] == "vni" and len(words) == 2:
            self._open_vni(line, words[1], bgp)
        elif words[0] in ("rd", "route-target"):
            self._evpn_value(line, words, bgp.evpn)
        return words[0] not in _TOP_LEVEL and words[0] != "address-family"

    def _open_vni(self, line: int, text: str, bgp: _Bgp) -> None:
        if bgp.vrf is not None:
            message = f"vni block in VRF instance {bgp.vrf}: L2VNIs belong to the default one"
            self.finding("vni-in-vrf-instance", line, message, Severity.ERROR)
        elif not bgp.advertise_all_vni:
            message = "bgpd rejects this block's rd/route-target before advertise-all-vni"
            self.finding("vni-before-advertise-all-vni", line, message, Severity.ERROR)
        vni = self._vni_number(line, text)
        self.vni = _Vni(vni or 0, line)
        bgp.vnis.append(self.vni)
        self.node = "vni"

    def _in_vni(self, line: int, words: list[str]) -> bool:
        if words[0] not in _VNI_COMMANDS or self.vni is None:
            return False
        if words[0] in ("rd", "route-target"):
            self._evpn_value(line, words, self.vni)
        return True

    def _evpn_value(self, line: int, words: list[str], target: _Vni) -> None:
        if words[0] == "rd" and len(words) == 2:
            if rd_rt_type(words[1]) is None:
                message = f"RD {words[1]!r} is not ASN2:NN32, ASN4:NN16 or IPv4:NN16"
                self.finding("malformed-rd", line, message, Severity.ERROR)
            target.rd, target.rd_line = words[1], line
        elif len(words) >= 3 and words[1] in ("import", "export", "both"):
            self._route_targets(line, words[1], words[2:], target)

    def _route_targets(self, line: int, direction: str, values: list[str], target: _Vni) -> None:
        if len(values) > 1:
            message = "vtysh 8.4 takes one RT per route-target line in l2vpn evpn"
            self.finding("rt-list", line, message, Severity.ERROR)
        for value in values:
            if rd_rt_type(value) is None:
                message = f"RT {value!r} is not ASN2:NN32, ASN4:NN16 or IPv4:NN16"
                self.finding("malformed-rt", line, message, Severity.ERROR)
            if direction in ("import", "both"):
                target.rt_imports.append(value)
                target.import_lines.setdefault(value, line)
            if direction in ("export", "both"):
                target.rt_exports.append(value)


def _file_findings(vrfs: tuple[ParsedVrf, ...], bgp: tuple[ParsedBgp, ...]) -> Iterator[Finding]:
    yield from _vrf_findings(vrfs, bgp)
    yield from _export_findings(bgp)


def _vrf_findings(vrfs: tuple[ParsedVrf, ...], bgp: tuple[ParsedBgp, ...]) -> Iterator[Finding]:
    l3vnis = Counter(v.l3vni for v in vrfs if v.l3vni is not None)
    for vrf in vrfs:
        if vrf.l3vni is not None and l3vnis[vrf.l3vni] > 1:
            message = f"L3VNI {vrf.l3vni} of {vrf.name} is also used by another VRF"
            yield Finding("duplicate-l3vni", Severity.ERROR, message, line=vrf.line)
        if len(vrf.name) > MAX_VRF_NAME:
            message = f"VRF name {vrf.name!r} is longer than {MAX_VRF_NAME} characters"
            yield Finding("vrf-name-too-long", Severity.ERROR, message, line=vrf.line)
    with_vni = {v.name for v in vrfs if v.l3vni is not None}
    for instance in bgp:
        if instance.vrf is not None and instance.vrf not in with_vni:
            message = f"BGP instance for {instance.vrf}, which has no `vrf / vni` (L3VNI)"
            yield Finding("vrf-without-vni", Severity.ERROR, message, line=instance.line)


def _rd_findings(bgps: list[_Bgp]) -> list[Finding]:
    owners: dict[str, str] = {}
    findings = []
    for instance in bgps:
        scoped = [(instance.evpn, instance.vrf or "default")]
        scoped += [(vni, f"vni {vni.vni}") for vni in instance.vnis]
        for block, where in scoped:
            if block.rd is None:
                continue
            if block.rd in owners:
                message = f"RD {block.rd} of {where} is already used by {owners[block.rd]}"
                findings.append(
                    Finding("duplicate-rd", Severity.ERROR, message, line=block.rd_line)
                )
            owners.setdefault(block.rd, where)
    return findings


def _export_findings(bgp: tuple[ParsedBgp, ...]) -> Iterator[Finding]:
    owners: dict[str, str] = {}
    for instance in bgp:
        scoped = [(instance.rt_exports, instance.vrf or "default", instance.line)]
        scoped += [(v.rt_exports, f"vni {v.vni}", v.line) for v in instance.vnis]
        for exports, where, line in scoped:
            for rt in dict.fromkeys(exports):
                if rt in owners:
                    message = f"{where} exports {rt}, which {owners[rt]} exports too"
                    yield Finding("shared-export-rt", Severity.WARNING, message, line=line)
                owners.setdefault(rt, where)


def _import_findings(bgps: list[_Bgp]) -> list[Finding]:
    findings = []
    for instance in bgps:
        scoped = [(instance.evpn, instance.vrf or "default")]
        scoped += [(vni, f"vni {vni.vni}") for vni in instance.vnis]
        for block, where in scoped:
            for rt in dict.fromkeys(block.rt_imports):
                if rt not in block.rt_exports:
                    message = f"{where} imports {rt}, which it does not export"
                    line = block.import_lines[rt]
                    key = f"{where}|{rt}"  # the block and the route target, for audits
                    findings.append(
                        Finding("import-without-export", Severity.INFO, message, line, key)
                    )
    return findings
