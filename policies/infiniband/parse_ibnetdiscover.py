"""Parse the text that `ibnetdiscover` (infiniband-diags) prints into switches and CA ports.

Operators save ``ibnetdiscover > fabric.txt``; `parse_ibnetdiscover` turns that text into a
`DiscoveredTopology` without any I/O. The format below is what rdma-core's
``infiniband-diags/ibnetdiscover.c`` prints (``out_switch``, ``out_ca``, ``out_switch_port``,
``out_ca_port``), checked against infiniband-diags 44.0 on ibsim; the real sample is
``tests/policies/data/ibnetdiscover-small.txt`` (``<TAB>`` is a tab)::

    vendid=0x0
    devid=0x0
    sysimgguid=0x200001
    switchguid=0x200001(200001)
    Switch<TAB>8 "S-0000000000200001"<TAB><TAB># "spine01" base port 0 lid 3 lmc 0
    [1]<TAB>"H-000000000010000b"[1](10000c) <TAB><TAB># "stor01 mlx5_0" lid 10 4xSDR
    [7]<TAB>"S-0000000000200000"[7]<TAB><TAB># "leaf01" lid 2 4xSDR

    caguid=0x10000b
    Ca<TAB>2 "H-000000000010000b"<TAB><TAB># "stor01 mlx5_0"
    [1](10000c) <TAB>"S-0000000000200001"[1]<TAB><TAB># lid 10 lmc 0 "spine01" lid 3 4xSDR

Only ports with a link are printed, so an unconnected CA port has no line at all. Router records
(``rtguid=`` / ``Rt``) are checked and skipped. The extra lines of ``-s`` (``DR path ...``
progress lines, which go to stdout), ``-g`` (``Chassis``/``Non-Chassis Nodes``/``Hostname:``
lines, ``[ext N]`` port suffixes, trailing comments) and the `` s=.. w=.. v=..`` suffix of ``-f``
are accepted; ``-l``/``-H``/``-S``/``-p``/``--diff`` print other formats and are refused.

A CA's NodeDescription must be ``"<hostname> <hca>"``: rdma-core's rdma-ndd sets it so (default
``RDMA_NDD_ND_FORMAT`` is ``"%h %d"``, rdma-ndd(8)). Hostnames are returned lower-cased, and both
parts are restricted to letters, digits, ``.``, ``_`` and ``-`` so nothing from the file can inject
into an artifact. Switch names are returned as printed and may hold ``;``, ``:`` or ``/`` (NVIDIA
switches report e.g. ``"MF0;leaf01:MQM8700/U1"``); they must not reach an artifact unescaped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NoReturn

from policies.errors import InputFormatError

__all__ = ["DiscoveredCaPort", "DiscoveredSwitch", "DiscoveredTopology", "parse_ibnetdiscover"]


@dataclass(frozen=True, slots=True)
class DiscoveredSwitch:
    """A switch as its ``Switch`` record shows it."""

    guid: int
    name: str
    ports: int
    line: int


@dataclass(frozen=True, slots=True)
class DiscoveredCaPort:
    """One connected CA port with the host it belongs to and, if any, the switch port it meets."""

    guid: int
    node_guid: int
    hostname: str
    hca: str
    port: int
    switch_guid: int | None
    switch_name: str | None
    switch_port: int | None
    line: int


@dataclass(frozen=True, slots=True)
class DiscoveredTopology:
    """Switches and connected CA ports, each in file order."""

    switches: tuple[DiscoveredSwitch, ...]
    ca_ports: tuple[DiscoveredCaPort, ...]


# rdma-ndd's %h is the hostname without the domain (rdma-ndd(8)): an RFC 1123 label; '.' and '_'
# are tolerated. None of ; : = , # space or newline passes, so no name can inject into an artifact.
_HOSTNAME_CHARS = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
# Kernel RDMA device names (mlx5_0, ibp65s0, ...) fit in IB_DEVICE_NAME_MAX (64); 32 is plenty.
_HCA_CHARS = r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}"
# GUIDs are 64-bit (uint64_t in libibnetdisc): at most 16 hex digits, printed with PRIx64.
_GUID = r"[0-9a-fA-F]{1,16}"
# Same shape with any token in GUID places: only used to name a non-hex GUID in an error.
_ANY_GUID = r"[^\s\"()\[\]]*"
# ibnetdiscover separates fields with tabs; a copy from a terminal turns them into spaces.
_SWITCH = (
    r'Switch[ \t]+(?P<ports>\d{1,3})[ \t]+"S-(?P<guid>{G})"[ \t]*#[ \t]*"(?P<desc>.*)"'
    r"[ \t]+(?:base|enhanced) port 0 lid \d+ lmc \d+[ \t]*"
)
# " (scp)" is appended to Xsigo CAs under -g (out_ca).
_CA = r'Ca[ \t]+(?P<ports>\d{1,3})[ \t]+"H-(?P<guid>{G})"[ \t]*#[ \t]*"{D}"(?: \(scp\))?[ \t]*'
_ROUTER = r'Rt[ \t]+(?P<ports>\d{1,3})[ \t]+"R-(?P<guid>{G})"[ \t]*#[ \t]*"(?P<desc>.*)"[ \t]*'
# out_switch_port: [p]"peer"[pp](peer port GUID, CAs and routers only) # "peer desc" lid L WxS
# out_ca_port: [p](port GUID) "peer"[pp] (peer port GUID, if not a switch) # lid L lmc M "desc" ...
_PORT = (
    r"\[(?P<port>\d{1,3})\](?:\[ext \d+\])?(?:\((?P<guid>{G})\))?[ \t]*"
    r'"(?P<peer_type>[SHR])-(?P<peer_guid>{G})"\[(?P<peer_port>\d{1,3})\](?:\[ext \d+\])?'
    r"(?:[ \t]*\((?P<peer_port_guid>{G})\))?[ \t]*#[ \t]*(?:lid \d+ lmc \d+ )?"
    r'"(?P<peer_desc>.*)" lid \d+ \S+(?: s=\d+ w=\d+ v=\d+)?(?: slot \d+| \(scp\))?[ \t]*'
)
# Lines that carry nothing we need: out_ids/out_switch/out_ca headers, -g and -s extras, blanks.
_OTHER = (
    r"(?:(?:vendid|devid)=0x[0-9a-fA-F]+|(?:sysimgguid|caguid|rtguid)=0x(?P<guid>{G})"
    r"|switchguid=0x(?P<switch_guid>{G})\((?P<port_guid>{G})\)"
    r"|Chassis \d+(?: \(guid 0x[0-9a-fA-F]+\))?|Non-Chassis Nodes|Hostname: .*|DR path .*)?"
    r"(?:[ \t]*#.*)?[ \t]*"
)
# Lines from the real sample, shown in error messages.
_EXAMPLES = {
    "Switch record": 'Switch\t8 "S-0000000000200001"\t\t# "spine01" base port 0 lid 3 lmc 0',
    "Ca record": 'Ca\t2 "H-000000000010000b"\t\t# "stor01 mlx5_0"',
    "Rt record": 'Rt\t2 "R-0000000000300000"\t\t# "gw01"',
    "port line": '[1](10000c) \t"S-0000000000200001"[1]\t\t# lid 10 lmc 0 "spine01" lid 3 4xSDR',
    "line": "a record, a port line, a comment or a vendid=/devid=/...guid= header",
}


def _compile(template: str, desc: str = "") -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Compile the strict pattern and its loose twin, which only serves to explain refusals."""
    strict = re.compile(template.replace("{G}", _GUID).replace("{D}", desc))
    return strict, re.compile(template.replace("{G}", _ANY_GUID).replace("{D}", "(?P<desc>.*)"))


_SWITCH_RE, _SWITCH_LOOSE = _compile(_SWITCH)
# The CA pattern checks "<hostname> <hca>" itself; _explain_node_description says what is wrong.
_CA_RE, _CA_LOOSE = _compile(_CA, f"({_HOSTNAME_CHARS}) ({_HCA_CHARS})")
_ROUTER_RE, _ROUTER_LOOSE = _compile(_ROUTER)
_PORT_RE, _PORT_LOOSE = _compile(_PORT)
_OTHER_RE, _OTHER_LOOSE = _compile(_OTHER)
_HEX_GUID = re.compile(_GUID)
_HOSTNAME = re.compile(_HOSTNAME_CHARS)
_HCA = re.compile(_HCA_CHARS)
# NodeInfo:NumPorts is an 8-bit field (IB_NODE_NPORTS_F in libibmad's fields.c).
_MAX_PORTS = 255
# IBA: the NodeDescription attribute is 64 bytes. ibnetdiscover prints at most 63 (clean_nodedesc),
# but a name from its --node-name-map can be any length; a switch name is kept in 64 characters.
MAX_NODE_DESCRIPTION = 64
# A real line is < 300 characters (clean_nodedesc cuts a NodeDescription at 63); the cap bounds the
# regexes' backtracking on one line, so parsing stays linear in the size of the input.
_MAX_LINE = 1024
# IBA: a GUID is an EUI-64; 0 and all ones are never assigned, and an SM reading them as a port
# identity would list a port nobody has (and every later partitions.conf would be refused).
_RESERVED_GUIDS = {0: "0", 2**64 - 1: "all ones"}


def is_reserved_guid(guid: int) -> bool:
    """True for a GUID no device is ever assigned (0, all ones): it can identify no port."""
    return guid in _RESERVED_GUIDS


# SHARP: Quantum switches expose their in-network aggregation engine as a CA with this fixed
# NodeDescription (managed by the SM and the aggregation manager); it is no tenant host.
SHARP_AGGREGATION_NODE = "Mellanox Technologies Aggregation Node"


@dataclass(slots=True)
class _Record:
    kind: str
    guid: int
    ports: int
    hostname: str = ""
    hca: str = ""


@dataclass(slots=True)
class _State:
    record: _Record | None = None
    switches: dict[int, DiscoveredSwitch] = field(default_factory=dict)
    ca_ports: list[DiscoveredCaPort] = field(default_factory=list)
    port_lines: dict[int, int] = field(default_factory=dict)
    ca_names: dict[str, int] = field(default_factory=dict)


def parse_ibnetdiscover(text: str) -> DiscoveredTopology:
    """Parse the default output of ``ibnetdiscover`` into switches and connected CA ports.

    Pure and linear in the size of ``text``. Each connected CA port becomes one `DiscoveredCaPort`
    whose hostname (lower-cased) and hca come from its CA's NodeDescription; its peer switch's
    name comes from that switch's ``Switch`` record wherever it is in the file, else from the
    port line's comment. Ports linked to a CA or router have ``switch_*`` set to None.

    Args:
        text: The whole document, as ``ibnetdiscover`` wrote it (LF or CRLF line ends).

    Returns:
        The switches and CA ports, each in file order.

    Raises:
        InputFormatError: With the 1-based ``line`` of the problem, if a record, port or header
            line does not parse, a GUID is not hexadecimal, a port line is outside any record,
            a CA's NodeDescription is not ``"<hostname> <hca>"`` of safe characters, a switch's
            is longer than 64 characters or holds a character ibnetdiscover never prints, a
            port GUID or switch GUID repeats, is reserved (0 or all ones) or a CA port claims a
            switch's GUID, two CAs share one NodeDescription, or the document holds no CA port at
            all (then ``line`` is the last line).
    """
    lines = text.replace("\r\n", "\n").split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start another one
    if max(map(len, lines)) > _MAX_LINE:
        _refuse_long_line(lines)
    state = _State()
    handlers = _HANDLERS
    header = _OTHER_RE.fullmatch
    for number, line in enumerate(lines, start=1):
        # Dispatch on the first character; header and blank lines, half the file, stay inline.
        handler = handlers.get(line[:1])
        if handler is not None:
            handler(state, line, number)
        elif not line or header(line) is not None:
            state.record = None  # a blank line and out_ids' header lines end a record
        else:
            _refuse(_OTHER_LOOSE, line, number, "line")
    return _finish(state, text, len(lines))


def _refuse_long_line(lines: list[str]) -> NoReturn:
    number = next(n for n, line in enumerate(lines, start=1) if len(line) > _MAX_LINE)
    raise InputFormatError(f"line is longer than {_MAX_LINE} characters", line=number)


def _comment(state: _State, line: str, number: int) -> None:
    """Skip a comment; it does not end a record (ibsim's parse_ports skips them inside one)."""


def _refuse(loose: re.Pattern[str], line: str, number: int, what: str) -> NoReturn:
    """Explain why a line failed its strict pattern: a named bad GUID if that is the cause."""
    match = loose.fullmatch(line)
    if match is not None:
        for name, value in match.groupdict().items():
            if "guid" in name and value is not None and not _HEX_GUID.fullmatch(value):
                raise InputFormatError(
                    f"{what}: GUID {value!r} is not a hexadecimal number of at most 16 digits",
                    line=number,
                )
    shown = line if len(line) <= 80 else line[:77] + "..."
    raise InputFormatError(
        f"{what} does not parse: {shown!r}; expected e.g. {_EXAMPLES[what]!r}", line=number
    )


def _chassis_line(state: _State, line: str, number: int) -> None:
    if _OTHER_RE.fullmatch(line) is None:
        _refuse(_OTHER_LOOSE, line, number, "line")
    state.record = None


def _port_count(text: str, number: int) -> int:
    ports = int(text)
    if not 1 <= ports <= _MAX_PORTS:
        raise InputFormatError(f"port count {ports} is outside 1..{_MAX_PORTS}", line=number)
    return ports


def _printable(name: str, number: int) -> str:
    # clean_nodedesc (rdma-core util/node_name_map.c) turns every non-isprint() byte into a space.
    if not (name.isascii() and name.isprintable()):
        raise InputFormatError(
            f"NodeDescription {name!r} holds a character ibnetdiscover never prints", line=number
        )
    if len(name) > MAX_NODE_DESCRIPTION:
        raise InputFormatError(
            f"switch NodeDescription {name[:20]!r}... is {len(name)} characters, more than the "
            f"{MAX_NODE_DESCRIPTION} of an IBA NodeDescription (a --node-name-map entry?)",
            line=number,
        )
    return name


def _switch_record(state: _State, line: str, number: int) -> None:
    match = _SWITCH_RE.fullmatch(line) or _refuse(_SWITCH_LOOSE, line, number, "Switch record")
    guid = _assigned_guid(int(match["guid"], 16), "switch GUID", number)
    earlier = state.switches.get(guid)
    if earlier is not None:
        raise InputFormatError(
            f"switch GUID {guid:#x} already has a record on line {earlier.line}", line=number
        )
    name = _printable(match["desc"], number)
    switch = DiscoveredSwitch(
        guid=guid, name=name, ports=_port_count(match["ports"], number), line=number
    )
    state.switches[guid] = switch
    state.record = _Record("Switch", guid, switch.ports)


def _router_record(state: _State, line: str, number: int) -> None:
    match = _ROUTER_RE.fullmatch(line) or _refuse(_ROUTER_LOOSE, line, number, "Rt record")
    state.record = _Record("Rt", int(match["guid"], 16), _port_count(match["ports"], number))


def _ca_record(state: _State, line: str, number: int) -> None:
    if not line.startswith("Ca"):
        _chassis_line(state, line, number)  # "Chassis N" under -g
        return
    match = _CA_RE.fullmatch(line)
    if match is None:
        # A SHARP aggregation node never matches: its NodeDescription has three spaces.
        if _aggregation_node(state, line, number):
            return
        _refuse_ca(line, number)
    ports_text, guid_text, hostname, hca = match.groups()
    guid = int(guid_text, 16)
    hostname = hostname.lower()  # DNS names are case-insensitive (RFC 4343)
    name = f"{hostname} {hca}"
    first = state.ca_names.setdefault(name, number)
    if first != number:
        # Two hosts with one hostname (or one CA listed twice): grouping by hostname would merge.
        raise InputFormatError(
            f"NodeDescription '{name}' already names the CA on line {first}", line=number
        )
    state.record = _Record("Ca", guid, _port_count(ports_text, number), hostname, hca)


def _refuse_ca(line: str, number: int) -> NoReturn:
    loose = _CA_LOOSE.fullmatch(line)
    if loose is not None and _HEX_GUID.fullmatch(loose["guid"]):
        _explain_node_description(loose["desc"], number)
    _refuse(_CA_LOOSE, line, number, "Ca record")


def _aggregation_node(state: _State, line: str, number: int) -> bool:
    """Record a SHARP aggregation node as a skipped record; False if `line` is not one."""
    loose = _CA_LOOSE.fullmatch(line)
    if loose is None or loose["desc"] != SHARP_AGGREGATION_NODE:
        return False
    if not _HEX_GUID.fullmatch(loose["guid"]):
        return False
    ports = re.match(r"Ca\s+(\d+)", line)
    state.record = _Record(
        "AN", int(loose["guid"], 16), _port_count(ports[1] if ports else "1", number)
    )
    return True


def _explain_node_description(desc: str, number: int) -> None:
    parts = desc.split(" ")
    if len(parts) != 2:
        raise InputFormatError(
            f"CA NodeDescription {desc!r} is not '<hostname> <hca>', which rdma-ndd sets "
            "(RDMA_NDD_ND_FORMAT '%h %d'); run rdma-ndd on that host and rediscover",
            line=number,
        )
    hostname, hca = parts
    if _HOSTNAME.fullmatch(hostname) is None:
        raise InputFormatError(
            f"hostname {hostname!r} must be 1-63 letters, digits, '.', '_' or '-'", line=number
        )
    if _HCA.fullmatch(hca) is None:
        raise InputFormatError(
            f"HCA name {hca!r} must be 1-32 letters, digits, '.', '_' or '-'", line=number
        )


def _port_line(state: _State, line: str, number: int) -> None:
    record = state.record
    if record is None:
        raise InputFormatError(
            "port line outside any Switch, Ca or Rt record (it must follow its record directly)",
            line=number,
        )
    match = _PORT_RE.fullmatch(line) or _refuse(_PORT_LOOSE, line, number, "port line")
    port = int(match[1])
    if not 1 <= port <= record.ports:
        raise InputFormatError(
            f"port {port} is outside 1..{record.ports} of its {record.kind} record", line=number
        )
    if record.kind == "Ca":
        _add_ca_port(state, record, match, port, number)


def _add_ca_port(
    state: _State, record: _Record, match: re.Match[str], port: int, number: int
) -> None:
    guid_text, peer_type, peer_guid, peer_port, peer_desc = match.group(2, 3, 4, 5, 7)
    if guid_text is None:
        raise InputFormatError("CA port line has no '(port GUID)' after '[port]'", line=number)
    guid = _assigned_guid(int(guid_text, 16), "port GUID", number)
    first = state.port_lines.setdefault(guid, number)
    if first != number:
        raise InputFormatError(f"port GUID {guid:#x} already appears on line {first}", line=number)
    if peer_type != "S":  # linked to a CA or router, not to a switch
        state.ca_ports.append(
            DiscoveredCaPort(
                guid, record.guid, record.hostname, record.hca, port, None, None, None, number
            )
        )
        return
    state.ca_ports.append(
        DiscoveredCaPort(
            guid,
            record.guid,
            record.hostname,
            record.hca,
            port,
            int(peer_guid, 16),
            peer_desc,
            int(peer_port),
            number,
        )
    )


_HANDLERS: dict[str, Callable[[_State, str, int], None]] = {
    "[": _port_line,
    "#": _comment,
    "S": _switch_record,
    "C": _ca_record,
    "R": _router_record,
}


def _finish(state: _State, text: str, last_line: int) -> DiscoveredTopology:
    if not state.ca_ports:
        problem = "empty document" if not text.strip() else "no CA port in the document"
        raise InputFormatError(
            f"{problem}: expected ibnetdiscover output with at least one connected 'Ca' record",
            line=max(last_line, 1),
        )
    for port in state.ca_ports:
        _refuse_switch_guid(port, state.switches)
    ca_ports = tuple(_resolve_switch_name(port, state.switches) for port in state.ca_ports)
    return DiscoveredTopology(switches=tuple(state.switches.values()), ca_ports=ca_ports)


def _assigned_guid(guid: int, what: str, number: int) -> int:
    if guid in _RESERVED_GUIDS:
        raise InputFormatError(
            f"{what} {guid:#x} ({_RESERVED_GUIDS[guid]}) is reserved, never a device's GUID",
            line=number,
        )
    return guid


def _refuse_switch_guid(port: DiscoveredCaPort, switches: dict[int, DiscoveredSwitch]) -> None:
    """A CA port GUID that is also a switch's GUID identifies two devices; trust neither."""
    switch = switches.get(port.guid)
    if switch is not None:
        raise InputFormatError(
            f"port GUID {port.guid:#x} is also the GUID of switch '{switch.name}' "
            f"(line {switch.line})",
            line=port.line,
        )


def _resolve_switch_name(
    port: DiscoveredCaPort, switches: dict[int, DiscoveredSwitch]
) -> DiscoveredCaPort:
    """Prefer the name in the peer's Switch record, which may come before or after the CA."""
    if port.switch_guid is None or port.switch_name is None:
        return port
    switch = switches.get(port.switch_guid)
    if switch is None:
        _printable(port.switch_name, port.line)  # the name came from the port line's comment
        return port
    if switch.name == port.switch_name:
        return port
    return replace(port, switch_name=switch.name)
