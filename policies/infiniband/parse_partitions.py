"""Parse OpenSM's partitions.conf the way OpenSM does, and report where OpenSM fails open.

The parser follows ``opensm/osm_prtn_config.c`` (linux-rdma/opensm, 3.3.23 and HEAD) rather than
the documentation: ``#`` comments run to the end of the physical line, statements end only at
``;``, only space, tab and newline are white space, keywords match by *prefix*, numbers are read
with ``strtoul(.., 0)``, and the first error makes OpenSM discard the whole file and fall back to
``Default=0x7fff : ALL=full`` (docs/facts/infiniband.md §1.1, §1.2, §1.5, §1.6).

It is pure (stdlib only, no I/O): `parse_partitions_conf` turns text into statements plus
findings, `memberships` replays OpenSM's key allocation and merging on the explicit GUID members.

Finding codes (stable). ``*`` marks codes on which OpenSM discards the file (`Finding.fails_open`):

=============================  ========  ===========================================================
code                           severity  construct
=============================  ========  ===========================================================
line-too-long *                critical  a physical line longer than OpenSM's fgets() read
carriage-return *              critical  CRLF line ends (CR is not white space for OpenSM)
nul-byte                       critical  OpenSM ignores the rest of the line after a NUL byte
no-statement *                 critical  empty file, or only comments and blank lines
no-definition *                critical  a statement without ``:``
definition-split *             critical  the ``:`` is not on the line where the definition starts
bad-definition *               critical  the key does not parse (``strtoul`` stops early)
empty-statement *              critical  a ``;`` with nothing before it (OpenSM reads past it)
unterminated-statement         critical  no ``;`` before the next definition (*) or end of file
bad-member *                   critical  a member that is not a GUID or special name
guid-without-0x                critical  un-prefixed GUID: a parse error (*) or read as decimal
guid-misread                   critical  a GUID OpenSM accepts with another value (sign, overflow)
unknown-membership             critical  e.g. ``=fulll``: OpenSM makes it limited (``=``: full)
pkey-truncated                 critical  a key above 0xffff (``(uint16_t)`` cast)
pkey-is-default                critical  0x7fff in a statement not named Default
mixed-auto-explicit-keys       critical  generated and explicit keys in one file
pkey-collision                 critical  two differently named statements share one key
default-all-full               critical  ``ALL``/``ALL_CAS`` full in the default partition
all-full                       critical  ``ALL``/``ALL_CAS`` full in any other partition
auto-key                       warning   a statement without key (or key 0)
pkey-zero                      warning   an explicit key whose low 15 bits are 0 (= no key)
pkey-membership-bit            warning   a key with bit 15 set (only the low 15 bits are kept)
pkey-octal                     warning   a key with a leading 0 (read as octal)
duplicate-pkey                 warning   one key in several statements of the same name (merged)
duplicate-name                 warning   one name (its first 31 bytes) with different keys
long-name                      warning   a name over 31 bytes: kept cut, never reused by name
default-name-mismatch          warning   a statement named Default with a key other than 0x7fff
no-default-statement           warning   no statement for 0x7fff: OpenSM uses ALL=limited, SELF=full
default-full-member            warning   an explicit GUID that is a full member of 0x7fff
both-membership                warning   ``both``: full unless allow_both_pkeys is TRUE
none-member                    warning   ``NONE`` (or a prefix of it): silently no port
unknown-flag                   warning   a flag OpenSM ignores
bad-flag-value                 warning   an mtu/rate/sl/scope/FlowLabel value OpenSM skips
bad-mgid                       warning   an ``mgid=`` that is not a multicast IPv6 GID
=============================  ========  ===========================================================
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from policies.findings import Finding, Severity
from policies.infiniband.model import (
    DEFAULT_PKEY,
    PKEY_BASE_MASK,
    PKEY_FULL_BIT,
    format_guid,
    format_pkey,
)

# OpenSM: osm_prtn_config_parse_file() calls fgets(line, sizeof(line) - 1, file) on a 4096-byte
# buffer, so one read returns at most 4094 bytes *including* the newline; a longer line is split
# and the tail (even of a comment) is parsed as a new line. Stricter than the often-quoted 4096.
MAX_LINE_BYTES = 4094
# OpenSM: STRIP_HEAD_SPACES / parse_name_token() skip only these; '\r' is an ordinary character.
_WS = " \t\n"
# OpenSM: p->name is char[32]; osm_prtn_new() keeps its first 31 bytes (strncpy(.., size - 1)
# then a NUL), and osm_prtn_find_by_name() compares strncmp(p->name, name, 32), so a name of 32
# bytes or more is stored cut and never found again by name.
_NAME_BYTES = 31
_DEFAULT_NAME = "Default"
_ULONG_MAX = 2**64 - 1  # strtoul/strtoull saturate here (LP64 Linux)
_UINT16_MAX = 0xFFFF
_MAX_SL = 15
_MAX_FLOW_LABEL = 0xFFFFF
_MTU_CODES = range(1, 6)  # IBTA MTU codes 256..4096 (docs/facts/infiniband.md §1.7)
_RATE_CODES = range(2, 25)  # IB_PATH_RECORD_RATE_2_5_GBS .. 1200 Gb/s (§1.7)
_HEX_GUID = re.compile(r"0[xX][0-9a-fA-F]+")
_HEX_DIGITS = re.compile(r"[0-9a-fA-F]+")
_DECIMAL = re.compile(r"[0-9]+")
_OCTAL_KEY = re.compile(r"0[0-7]+")
_DIGITS = {8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def _prefixes(keywords: Sequence[str]) -> dict[str, str]:
    """Map every prefix of each keyword to it; earlier keywords win (OpenSM tests them in order)."""
    table: dict[str, str] = {}
    for keyword in keywords:
        for end in range(len(keyword) + 1):
            table.setdefault(keyword[:end], keyword)
    return table


# OpenSM: partition_add_port() tests strncmp(flag, "full", strlen(flag)) first, then "both", then
# "limited", so "" (a bare '=') means full and anything else unknown means limited.
_MEMBERSHIPS = _prefixes(("full", "both", "limited"))
# OpenSM: partition_add_port() tests the port name as a prefix of these, in this order ("A" = ALL).
_SPECIALS = _prefixes(("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF"))
del _SPECIALS[""]
# OpenSM: parse_group_flag() prefix-matches in this order ("s" is scope, not sl; "" is mtu).
_GROUP_FLAGS = _prefixes(("mtu", "rate", "scope", "Q_Key", "TClass", "sl", "FlowLabel"))
_PARTITION_FLAGS = _prefixes(("ipoib", "defmember"))
_FULL_SPECIALS = frozenset({"ALL", "ALL_CAS"})


@dataclass(frozen=True, slots=True)
class ParsedMember:
    """A port entry: `guid` for a GUID, else `special` (ALL, ALL_CAS, ALL_SWITCHES, ...).

    `membership` is what OpenSM applies: "full", "limited" or "both" (prefixes and defmember
    resolved; an unknown word is "limited").
    """

    guid: int | None
    special: str | None
    membership: str
    line: int


@dataclass(frozen=True, slots=True)
class ParsedPartition:
    """One statement. `pkey` is the low 15 bits of the key, None when no key (or 0) is given.

    `flags` are the definition flags as written (normalised ``name`` or ``name=value``); `mtu`,
    `rate` and `sl` are the values OpenSM stores (None when not given or skipped); `ipoib` and
    `index0` are true when the ``ipoib`` (any prefix) and ``indx0`` (exactly) flags are given.
    """

    name: str | None
    pkey: int | None
    flags: tuple[str, ...]
    mtu: int | None
    rate: int | None
    sl: int | None
    ipoib: bool
    members: tuple[ParsedMember, ...]
    line: int
    index0: bool = False


@dataclass(frozen=True, slots=True)
class ParsedPartitions:
    """Every statement that parsed, in file order, and every finding, sorted by line."""

    partitions: tuple[ParsedPartition, ...]
    findings: tuple[Finding, ...]

    @property
    def fails_open(self) -> bool:
        """True if OpenSM would discard this file and make every port full in 0x7fff."""
        return any(finding.fails_open for finding in self.findings)


def parse_partitions_conf(text: str) -> ParsedPartitions:
    """Parse partitions.conf text with OpenSM's grammar and report every hazardous construct.

    Unlike OpenSM, which stops at the first error, parsing continues after errors (skipping the
    broken construct) so that every problem is reported. Statements whose definition fails to
    parse are left out of `partitions`.

    Args:
        text: the whole file, lines separated by newlines.

    Returns:
        The statements in file order and the findings sorted by line (file-wide ones last).
    """
    parser = _Parser()
    for segment in _segments(text, parser.findings):
        parser.feed(segment)
    parser.finish()
    partitions = tuple(parser.partitions)
    resolved = _resolve_pkeys(partitions)
    for check in (_auto_key_findings, _mixed_key_findings, _duplicate_findings, _default_findings):
        parser.findings.extend(check(resolved))
    findings = sorted(parser.findings, key=lambda f: (f.line is None, f.line or 0))
    return ParsedPartitions(partitions, tuple(findings))


def memberships(parsed: ParsedPartitions) -> dict[int, dict[int, str]]:
    """The explicit GUID memberships OpenSM builds from a parsed file, per base P_Key.

    Keys are resolved as OpenSM does (explicit keys, reuse by name, generated keys); statements
    with the same key merge, and a GUID listed twice for one key keeps its last membership.
    ``both`` counts as ``full`` (allow_both_pkeys FALSE, as isofabric configures OpenSM).
    Special members (ALL, SELF, ...) depend on the fabric and are not expanded, and keys without
    explicit GUID members are omitted (OpenSM deletes empty partitions).

    Returns:
        ``{base_pkey: {guid: "full" | "limited"}}``; empty when `parsed.fails_open`, because
        OpenSM then discards every statement of the file.
    """
    if parsed.fails_open:
        return {}
    result: dict[int, dict[int, str]] = {}
    for keyed in _resolve_pkeys(parsed.partitions):
        for member in keyed.partition.members:
            if member.guid is not None and keyed.key is not None:
                full = member.membership != "limited"
                result.setdefault(keyed.key, {})[member.guid] = "full" if full else "limited"
    return result


def special_members(parsed: ParsedPartitions) -> dict[int, dict[str, str]]:
    """The special members (ALL, ALL_CAS, SELF, ...) of each base P_Key, keys as `memberships`.

    They stand for ports that depend on the fabric, so whoever counts a partition's members from
    the file alone (a tenant's isolation proof) must know where they are.

    Returns:
        ``{base_pkey: {special: "full" | "limited"}}``; empty when `parsed.fails_open`.
    """
    if parsed.fails_open:
        return {}
    result: dict[int, dict[str, str]] = {}
    for keyed in _resolve_pkeys(parsed.partitions):
        for member in keyed.partition.members:
            if member.special is not None and keyed.key is not None:
                full = member.membership != "limited"
                result.setdefault(keyed.key, {})[member.special] = "full" if full else "limited"
    return result


# ---------------------------------------------------------------------------------------------
# Tokenizer: physical lines -> ';'-separated segments, with the line-level hazards.


@dataclass(frozen=True, slots=True)
class _Segment:
    """Text of one line between ';' boundaries; `closed` when a ';' ends it."""

    line: int
    text: str
    closed: bool


def _segments(text: str, findings: list[Finding]) -> Iterator[_Segment]:
    """Yield the non-blank pieces of each line (and every ';'), comments removed."""
    cr_lines: list[int] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        content = _line_content(raw, number, findings)
        if content.endswith("\r"):
            cr_lines.append(number)
            content = content[:-1]  # reported once below; stripped so later findings make sense
        *closed, rest = content.split(";")
        for piece in closed:
            yield _Segment(number, piece, True)
        if rest.strip(_WS):
            yield _Segment(number, rest, False)
    if cr_lines:
        findings.append(_carriage_return(cr_lines))


def _line_content(raw: str, number: int, findings: list[Finding]) -> str:
    """The part of a physical line OpenSM parses: up to a NUL byte or '#'."""
    # Four bytes per character at most, so short lines need no encoding.
    if 4 * len(raw) + 1 > MAX_LINE_BYTES:
        size = len(_bytes(raw)) + 1
        if size > MAX_LINE_BYTES:
            findings.append(_line_too_long(number, size))
    # OpenSM: strchr(p, '#') cuts the comment; C strings also end at the first NUL byte.
    content = raw.split("#", 1)[0]
    if "\0" in content:
        content = content.split("\0", 1)[0]
        findings.append(
            _critical("nul-byte", number, "OpenSM ignores everything after the NUL byte")
        )
    return content


def _line_too_long(number: int, size: int) -> Finding:
    return _critical(
        "line-too-long",
        number,
        f"line is {size} bytes with its newline; OpenSM reads at most {MAX_LINE_BYTES} bytes per "
        "fgets() and parses the rest as a new line, breaking the token at the split",
        fails_open=True,
    )


def _carriage_return(lines: list[int]) -> Finding:
    return _critical(
        "carriage-return",
        lines[0],
        f"{len(lines)} line(s) end with CR (CRLF); OpenSM does not treat '\\r' as white space, "
        "so the text after a ';' or an item becomes a bad definition or GUID",
        fails_open=True,
    )


def _critical(code: str, line: int | None, message: str, *, fails_open: bool = False) -> Finding:
    return Finding(code, Severity.CRITICAL, message, line=line, fails_open=fails_open)


def _warning(code: str, line: int | None, message: str) -> Finding:
    return Finding(code, Severity.WARNING, message, line=line)


# ---------------------------------------------------------------------------------------------
# C number parsing.


def _strtoul(text: str) -> tuple[int, int]:
    """C ``strtoul(text, &end, 0)``: (value, index of end); end 0 means no conversion.

    Leading white space and a sign are accepted, ``0x`` selects hex and a leading ``0`` octal,
    the longest valid digit run is read, overflow saturates and ``-`` negates modulo 2**64.
    """
    stripped = text.lstrip(" \t\n\v\f\r")
    i = len(text) - len(stripped)
    negative = stripped[:1] == "-"
    if stripped[:1] in ("+", "-"):
        i += 1
    base, i = _base(text, i)
    digits = _digit_run(text, i, base)
    if not digits:
        return 0, 0
    value = min(int(digits, base), _ULONG_MAX)
    if negative:
        value = -value % (_ULONG_MAX + 1)
    return value, i + len(digits)


def _base(text: str, i: int) -> tuple[int, int]:
    """Base detection of strtoul(.., 0): ``0x`` + hex digit -> 16, leading ``0`` -> 8, else 10."""
    if text[i : i + 2] in ("0x", "0X") and _digit_run(text[i + 2 : i + 3], 0, 16):
        return 16, i + 2
    return (8 if text[i : i + 1] == "0" else 10), i


def _digit_run(text: str, i: int, base: int) -> str:
    allowed = _DIGITS[base]
    end = i
    while end < len(text) and text[end] in allowed:
        end += 1
    return text[i:end]


# ---------------------------------------------------------------------------------------------
# Statement parser: segments -> statements (partition_create / partition_add_flag / _add_port).


@dataclass(slots=True)
class _Statement:
    """A statement being built."""

    line: int
    name: str | None
    pkey: int | None = None
    flags: list[str] = field(default_factory=list)
    mtu: int | None = None
    rate: int | None = None
    sl: int | None = None
    ipoib: bool = False
    index0: bool = False
    defmember: str = "limited"  # OpenSM: new_part_conf() sets membership = LIMITED
    members: list[ParsedMember] = field(default_factory=list)
    broken: bool = False

    def frozen(self) -> ParsedPartition:
        return ParsedPartition(
            name=self.name,
            pkey=self.pkey,
            flags=tuple(self.flags),
            mtu=self.mtu,
            rate=self.rate,
            sl=self.sl,
            ipoib=self.ipoib,
            members=tuple(self.members),
            line=self.line,
            index0=self.index0,
        )


class _Parser:
    """OpenSM's parse_part_conf() state machine, continuing after errors."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.partitions: list[ParsedPartition] = []
        self.current: _Statement | None = None
        self.pending: list[_Segment] = []  # definition text seen before its ':'
        self.saw_content = False

    def feed(self, segment: _Segment) -> None:
        """Consume one segment; a closed segment ends the statement."""
        if self.current is None:
            self._feed_definition(segment)
        else:
            self._feed_members(segment)
        if segment.closed:
            self._end_statement()
            self.pending.clear()

    def finish(self) -> None:
        """Report what is left open at the end of the file."""
        if self.pending:
            self.findings.append(_no_definition(self.pending[0].line))
        if self.current is not None:
            self.findings.append(
                _critical(
                    "unterminated-statement",
                    self.current.line,
                    "the last statement has no closing ';'; OpenSM applies it, but any text "
                    "appended later is read as its members and the file is then discarded",
                )
            )
            self._end_statement()
        if not self.saw_content:
            self.findings.append(
                _critical(
                    "no-statement",
                    None,
                    "no partition statement; OpenSM treats the file as in error and makes "
                    "every port a full member of 0x7fff",
                    fails_open=True,
                )
            )

    def _feed_definition(self, segment: _Segment) -> None:
        text = segment.text
        if not text.strip(_WS):
            if segment.closed and not self.pending:
                self.findings.append(_empty_statement(segment.line))
            elif segment.closed:
                self.findings.append(_no_definition(self.pending[0].line))
            return
        self.saw_content = True
        colon = text.find(":")
        if colon < 0:
            if segment.closed:
                self.findings.append(_no_definition((self.pending or [segment])[0].line))
            else:
                self.pending.append(segment)
            return
        self._start_statement(text[:colon], segment.line)
        self._parse_items(text[colon + 1 :], segment.line)

    def _start_statement(self, definition: str, line: int) -> None:
        if self.pending:
            # OpenSM: parse_part_conf() needs the ':' in the first chunk it sees.
            line = self.pending[0].line
            definition = "\n".join([*(s.text for s in self.pending), definition])
            self.findings.append(
                _critical(
                    "definition-split",
                    line,
                    "the ':' is not on the line where the definition starts; OpenSM reports "
                    "'no partition definition found' and discards the file",
                    fails_open=True,
                )
            )
            self.pending.clear()
        self.current = _definition(definition, line, self.findings)

    def _feed_members(self, segment: _Segment) -> None:
        assert self.current is not None
        text = segment.text
        if not text.strip(_WS):
            if segment.closed:
                self.findings.append(_empty_statement(segment.line))
            return
        if ":" in text and _looks_like_definition(text):
            self.findings.append(_missing_semicolon(self.current.line, segment.line))
            self._end_statement()
            self._feed_definition(segment)
            return
        self._parse_items(text, segment.line)

    def _parse_items(self, text: str, line: int) -> None:
        statement = self.current
        assert statement is not None
        items = text.split(",")
        for index, item in enumerate(items):
            name, equals, value = item.partition("=")
            name = name.strip(_WS)
            if not name:  # OpenSM: an empty port name adds nothing (e.g. after a trailing ',')
                continue
            if name == "mgid":  # OpenSM: strcmp(name, "mgid"): the rest is group flags
                _mgid(value.strip(_WS), items[index + 1 :], line, self.findings)
                return
            member = _member(
                name, value.strip(_WS) if equals else None, statement, line, self.findings
            )
            if member is not None:
                statement.members.append(member)

    def _end_statement(self) -> None:
        if self.current is not None and not self.current.broken:
            self.partitions.append(self.current.frozen())
        self.current = None


def _empty_statement(line: int) -> Finding:
    return _critical(
        "empty-statement",
        line,
        "';' with nothing before it: OpenSM's parse_part_conf() steps over the terminator and "
        "reads on past it (the rest of the line or stale bytes of an earlier line), normally "
        "failing with 'no partition definition found'; put ';' right after the last member",
        fails_open=True,
    )


def _no_definition(line: int) -> Finding:
    return _critical(
        "no-definition",
        line,
        "statement without ':' (OpenSM: 'no partition definition found'; file discarded)",
        fails_open=True,
    )


def _missing_semicolon(statement_line: int, line: int) -> Finding:
    return _critical(
        "unterminated-statement",
        statement_line,
        f"no ';' before the definition on line {line}; OpenSM reads that definition as a port "
        "GUID ('bad PortGUID') and discards the file",
        fails_open=True,
    )


def _looks_like_definition(text: str) -> bool:
    """True if a ':' occurs before any ``mgid=`` item (MGIDs contain ':' legitimately)."""
    for item in text.split(","):
        if item.partition("=")[0].strip(_WS) == "mgid":
            return False
        if ":" in item:
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Definitions: name, key and flags.


def _definition(text: str, line: int, findings: list[Finding]) -> _Statement:
    """OpenSM partition_create(): ``[name][=key] {, flag[=value]}``."""
    head, *flag_tokens = text.split(",")
    name, key_text = _name_value(head)
    # OpenSM: a name starting with a digit and no '=' is the key (isdigit(*name)).
    if key_text is None and name[:1] and name[0] in "0123456789":
        name, key_text = "", name
    statement = _Statement(line, name or None)
    if len(_bytes(name)) > _NAME_BYTES:
        findings.append(_long_name(name, line))
    for token in flag_tokens:
        flag, value = _name_value(token)
        _apply_flag(statement, flag, value, findings)
    statement.pkey = _parse_key(key_text, statement, findings)
    if name == _DEFAULT_NAME and statement.pkey not in (None, DEFAULT_PKEY):
        findings.append(
            _warning(
                "default-name-mismatch",
                line,
                f"named Default but keyed {format_pkey(statement.pkey or 0)}: this is not the "
                "default partition 0x7fff, and later key-less 'Default' statements reuse it",
            )
        )
    return statement


def _long_name(name: str, line: int) -> Finding:
    kept = _name_key(name).decode("utf-8", "replace")
    return _warning(
        "long-name",
        line,
        f"OpenSM keeps only {kept!r} ({_NAME_BYTES} bytes) of the name in its logs, and a "
        "key-less statement of this name never joins this partition",
    )


def _name_value(token: str) -> tuple[str, str | None]:
    """OpenSM parse_name_token(): split at the first '=', strip space/tab/newline."""
    name, equals, value = token.partition("=")
    return name.strip(_WS), (value.strip(_WS) if equals else None)


def _parse_key(text: str | None, statement: _Statement, findings: list[Finding]) -> int | None:
    """The key's low 15 bits, None for no key or base 0; marks the statement broken on error."""
    if text is None:
        return None
    value, end = _strtoul(text)
    if end == 0 or end != len(text):  # OpenSM: if (end == id || *end) -> bad definition
        statement.broken = True
        findings.append(
            _critical(
                "bad-definition",
                statement.line,
                f"key {text!r} is not a number (OpenSM: 'bad partition definition')",
                fails_open=True,
            )
        )
        return None
    findings.extend(_key_findings(text, value, statement.line))
    base = value & PKEY_BASE_MASK  # OpenSM: (uint16_t) cast, then pkey &= ~0x8000
    return base or None


def _key_findings(text: str, value: int, line: int) -> Iterator[Finding]:
    key = value & _UINT16_MAX
    if value > _UINT16_MAX:
        yield _critical(
            "pkey-truncated",
            line,
            f"key {text} does not fit 16 bits; OpenSM keeps {format_pkey(key & PKEY_BASE_MASK)}",
        )
    if _OCTAL_KEY.fullmatch(text.lstrip("+-")):
        yield _warning("pkey-octal", line, f"key {text} has a leading 0 and is read as octal")
    if key & PKEY_FULL_BIT:
        yield _warning(
            "pkey-membership-bit",
            line,
            f"key {text} has bit 15 set; OpenSM keeps only {format_pkey(key & PKEY_BASE_MASK)} "
            "(membership comes from the members)",
        )
    if not key & PKEY_BASE_MASK:
        yield _warning("pkey-zero", line, f"key {text} has base 0; OpenSM treats it as no key")


def _apply_flag(
    statement: _Statement, flag: str, value: str | None, findings: list[Finding]
) -> None:
    """OpenSM partition_add_flag(): group flags first, then ipoib/defmember, else ignored."""
    statement.flags.append(flag if value is None else f"{flag}={value}")
    group = _GROUP_FLAGS.get(flag)
    partition_flag = _PARTITION_FLAGS.get(flag)
    if group is not None:
        _group_flag(statement, group, value, findings)
    elif partition_flag == "ipoib":
        statement.ipoib = True
    elif partition_flag == "defmember":
        _defmember(statement, value, findings)
    elif flag == "indx0":  # OpenSM HEAD: indx0 is the one flag matched exactly
        statement.index0 = True
    else:
        findings.append(
            _warning("unknown-flag", statement.line, f"flag {flag!r} is ignored by OpenSM")
        )


def _group_flag(
    statement: _Statement, group: str, value: str | None, findings: list[Finding]
) -> None:
    """OpenSM parse_group_flag(): mtu/rate/sl are kept, invalid values are skipped with a log."""
    number, end = _strtoul(value or "")
    if group in ("mtu", "rate"):
        # OpenSM: flags->mtu = strtoul(val, NULL, 0): no end check, stored even when invalid.
        if value is not None:
            setattr(statement, group, number)
        valid = number in (_MTU_CODES if group == "mtu" else _RATE_CODES)
    elif group == "sl":
        valid = bool(value) and number <= _MAX_SL and _ends_cleanly(value or "", end)
        statement.sl = number if valid else statement.sl
    elif group == "scope":
        valid = 0 < number <= _MAX_SL
    elif group == "FlowLabel":
        valid = bool(value) and number <= _MAX_FLOW_LABEL and _ends_cleanly(value or "", end)
    else:  # Q_Key, TClass: any value, 0 means the default
        valid = True
    if not valid:
        findings.append(
            _warning("bad-flag-value", statement.line, f"{group}={value} is not a valid value")
        )


def _ends_cleanly(value: str, end: int) -> bool:
    """OpenSM: (*end && !isspace(*end)) rejects trailing junk after the number."""
    return end > 0 and (end == len(value) or value[end] in " \t\n\v\f\r")


def _defmember(statement: _Statement, value: str | None, findings: list[Finding]) -> None:
    """OpenSM: defmember= sets the membership of members listed without '='."""
    word = _MEMBERSHIPS.get(value) if value is not None else None
    if word is None or value == "":
        findings.append(_unknown_membership(statement.line, value, word or "limited"))
    if word is not None:
        statement.defmember = word
    if word == "both":
        findings.append(_both(statement.line))


# ---------------------------------------------------------------------------------------------
# Members: partition_add_port() and mgid lines.


def _member(
    name: str, value: str | None, statement: _Statement, line: int, findings: list[Finding]
) -> ParsedMember | None:
    """One ``port[=membership]`` item, or None if OpenSM adds no port for it."""
    # OpenSM: empty names and any prefix of NONE are skipped before anything else.
    if not name or "NONE".startswith(name):
        if name:
            findings.append(
                _warning("none-member", line, f"{name!r} is read as NONE: no port is added")
            )
        return None
    membership = _membership(value, statement.defmember, line, findings)
    special = _SPECIALS.get(name)
    if special is not None:
        return ParsedMember(None, special, membership, line)
    guid = _guid(name, line, findings)
    return None if guid is None else ParsedMember(guid, None, membership, line)


def _membership(value: str | None, default: str, line: int, findings: list[Finding]) -> str:
    if value is None:
        return default
    word = _MEMBERSHIPS.get(value)
    if word is None or value == "":
        findings.append(_unknown_membership(line, value, word or "limited"))
    if word == "both":
        findings.append(_both(line))
    return word or "limited"


def _unknown_membership(line: int, value: str | None, applied: str) -> Finding:
    return _critical(
        "unknown-membership",
        line,
        f"membership {value!r} is not full/limited/both (or a prefix); OpenSM silently "
        f"applies {applied}",
    )


def _both(line: int) -> Finding:
    return _warning(
        "both-membership",
        line,
        "'both' is full unless allow_both_pkeys is TRUE (isofabric sets it FALSE)",
    )


def _guid(name: str, line: int, findings: list[Finding]) -> int | None:
    """The GUID OpenSM reads with strtoull(name, &end, 0), or None after an error finding."""
    if _HEX_GUID.fullmatch(name):  # fast path: the only form isofabric writes
        value = int(name, 16)
        if 0 < value <= _ULONG_MAX:
            return value
    value, end = _strtoul(name)
    if not value or end != len(name):  # OpenSM: if (!guid || *end) -> bad PortGUID
        findings.append(_guid_error(name, line))
        return None
    findings.append(_guid_misread(name, value, line))
    return value


def _guid_error(name: str, line: int) -> Finding:
    if _HEX_DIGITS.fullmatch(name):
        return _critical(
            "guid-without-0x",
            line,
            f"GUID {name!r} lacks 0x; OpenSM reads it as decimal/octal, stops at the first "
            "invalid digit ('bad PortGUID') and discards the file",
            fails_open=True,
        )
    return _critical(
        "bad-member",
        line,
        f"{name!r} is not a port GUID or special name (OpenSM: 'bad PortGUID'; file discarded)",
        fails_open=True,
    )


def _guid_misread(name: str, value: int, line: int) -> Finding:
    if _DECIMAL.fullmatch(name):
        base = "octal" if name.startswith("0") else "decimal"
        return _critical(
            "guid-without-0x",
            line,
            f"GUID {name!r} lacks 0x; OpenSM silently reads it as {base}: {format_guid(value)}",
        )
    return _critical("guid-misread", line, f"OpenSM reads GUID {name!r} as {format_guid(value)}")


def _mgid(value: str, rest: list[str], line: int, findings: list[Finding]) -> None:
    """OpenSM mgroup_create(): an MGID and group flags, consuming the rest of the segment."""
    try:
        multicast = ipaddress.IPv6Address(value).packed[0] == 0xFF
    except ValueError:
        multicast = False
    if not multicast:  # OpenSM logs an error, skips the group and goes on
        findings.append(_warning("bad-mgid", line, f"mgid {value!r} is not a multicast GID"))
    for item in rest:
        flag, _value = _name_value(item)
        if flag not in _GROUP_FLAGS:
            findings.append(
                _warning(
                    "unknown-flag",
                    line,
                    f"{flag!r} after mgid= is read as a multicast-group flag and ignored",
                )
            )


# ---------------------------------------------------------------------------------------------
# File-wide checks: key allocation, merging and the default partition.


@dataclass(frozen=True, slots=True)
class _Keyed:
    """A statement with the key OpenSM gives it and how: explicit, named (reused) or generated."""

    partition: ParsedPartition
    key: int | None
    how: str


def _resolve_pkeys(partitions: Sequence[ParsedPartition]) -> list[_Keyed]:
    """Replay osm_prtn_make_new() over the statements in file order.

    A key-less statement reuses the lowest-keyed partition of the same name (the pre-created
    Default included), else takes the next key from 0x0001 not yet defined *earlier in the file*.
    """
    names: dict[bytes, int] = {_name_key(_DEFAULT_NAME): DEFAULT_PKEY}
    taken = {DEFAULT_PKEY}
    counter = 0
    resolved: list[_Keyed] = []
    for partition in partitions:
        key, how = partition.pkey, "explicit"
        found = _findable(partition.name) if partition.name else None
        if key is None and found is not None and found in names:
            key, how = names[found], "named"
        elif key is None:
            counter, key = _generate_pkey(counter, taken)
            how = "generated"
        if key is not None and key not in taken:
            taken.add(key)
            label = _name_key(partition.name or f"{key:04x}")  # OpenSM: osm_prtn_new()
            names[label] = min(names.get(label, key), key)
        resolved.append(_Keyed(partition, key, how))
    return resolved


def _generate_pkey(counter: int, taken: set[int]) -> tuple[int, int | None]:
    """OpenSM generate_pkey(): the next counter value that is not a defined key."""
    while counter < DEFAULT_PKEY - 1:
        counter += 1
        if counter not in taken:
            return counter, counter
    return counter, None


def _name_key(name: str) -> bytes:
    """The name OpenSM stores (and logs) for a partition: its first 31 bytes."""
    return _bytes(name)[:_NAME_BYTES]


def _findable(name: str) -> bytes | None:
    """The stored name a key-less statement named `name` can reuse; None when it is too long."""
    raw = _bytes(name)
    return raw if len(raw) <= _NAME_BYTES else None


def _bytes(text: str) -> bytes:
    """UTF-8 bytes as OpenSM sees them.

    "surrogatepass" keeps any str encodable; text decoded with errors="surrogateescape" is
    over-counted (3 bytes per undecodable byte), which only makes the line check stricter.
    """
    return text.encode("utf-8", "surrogatepass")


def _auto_key_findings(resolved: list[_Keyed]) -> Iterator[Finding]:
    for keyed in resolved:
        name, line, key = keyed.partition.name, keyed.partition.line, keyed.key or 0
        if keyed.how == "generated":
            yield _warning(
                "auto-key",
                line,
                f"no key: OpenSM generates {format_pkey(key)} from the statement order; "
                "give an explicit key",
            )
        elif keyed.how == "named" and name != _DEFAULT_NAME:
            yield _warning(
                "auto-key",
                line,
                f"no key: OpenSM reuses the earlier partition named {name!r} "
                f"({format_pkey(key)}); give an explicit key",
            )


def _mixed_key_findings(resolved: list[_Keyed]) -> Iterator[Finding]:
    generated = {k.key: k.partition.line for k in resolved if k.how == "generated"}
    explicit = [k for k in resolved if k.how == "explicit" and k.key != DEFAULT_PKEY]
    if not generated or not explicit:
        return
    collisions = [
        f"line {k.partition.line} joins the line-{generated[k.key]} partition "
        f"{format_pkey(k.key or 0)}"
        for k in explicit
        if k.key in generated and k.partition.line > generated[k.key]
    ]
    detail = "; ".join(collisions) or "no collision yet, but any edit may cause one"
    yield _critical(
        "mixed-auto-explicit-keys",
        min(generated.values()),
        "generated and explicit keys in one file: an explicit key equal to a generated one "
        f"silently merges two partitions ({detail})",
    )


def _duplicate_findings(resolved: list[_Keyed]) -> Iterator[Finding]:
    first_by_key: dict[int, ParsedPartition] = {}
    key_by_name: dict[str, int] = {}
    for keyed in resolved:
        partition, key = keyed.partition, keyed.key
        if key is None:
            continue
        if key == DEFAULT_PKEY:
            yield from _default_key_findings(partition, first_by_key.get(key))
        elif key in first_by_key:
            yield _duplicate(partition, first_by_key[key], key)
        name = _name_key(partition.name or f"{key:04x}").decode("utf-8", "replace")
        if key_by_name.setdefault(name, key) != key:
            yield _warning(
                "duplicate-name",
                partition.line,
                f"name {name!r} is also used for {format_pkey(key_by_name[name])}; names only "
                "appear in logs, and a key-less statement of that name joins the lowest key",
            )
        first_by_key.setdefault(key, partition)


def _duplicate(partition: ParsedPartition, first: ParsedPartition, key: int) -> Finding:
    if partition.name and first.name and partition.name != first.name:
        return _critical(
            "pkey-collision",
            partition.line,
            f"{partition.name!r} reuses {format_pkey(key)} of {first.name!r} (line "
            f"{first.line}); OpenSM merges them into one partition",
        )
    return _warning(
        "duplicate-pkey",
        partition.line,
        f"{format_pkey(key)} is also defined on line {first.line}; OpenSM merges the statements",
    )


def _default_key_findings(
    partition: ParsedPartition, first: ParsedPartition | None
) -> Iterator[Finding]:
    if partition.name not in (None, _DEFAULT_NAME):
        yield _critical(
            "pkey-is-default",
            partition.line,
            f"{partition.name!r} uses 0x7fff: its members join the default partition that "
            "every port is in",
        )
    elif first is not None:
        yield _warning(
            "duplicate-pkey",
            partition.line,
            f"0x7fff is also defined on line {first.line}; OpenSM merges the statements",
        )


def _default_findings(resolved: list[_Keyed]) -> Iterator[Finding]:
    for keyed in resolved:
        for member in keyed.partition.members:
            yield from _member_scope_findings(member, keyed.key == DEFAULT_PKEY)
    if not any(keyed.key == DEFAULT_PKEY for keyed in resolved):
        yield _warning(
            "no-default-statement",
            None,
            "no Default=0x7fff statement: OpenSM uses ALL=limited, SELF=full, so switch "
            "management ports are only limited members and SA paths between them fail",
        )


def _member_scope_findings(member: ParsedMember, in_default: bool) -> Iterator[Finding]:
    full = member.membership != "limited"
    if full and member.special in _FULL_SPECIALS:
        where = "the default partition" if in_default else "this partition"
        yield _critical(
            "default-all-full" if in_default else "all-full",
            member.line,
            f"{member.special}={member.membership} makes every CA a full member of {where}, so "
            "every CA reaches every CA through it",
        )
    elif full and in_default and member.guid is not None:
        yield _warning(
            "default-full-member",
            member.line,
            f"{format_guid(member.guid)} is a full member of 0x7fff and reaches every CA",
        )
