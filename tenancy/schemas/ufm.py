"""The wire formats of UFM's PKey REST API, as its clients send them and as UFM emits them.

Accepted (UFM REST API Guide, "PKey GUIDs REST API"; the clients' own code): a P_Key as ``0x``
and hex digits, padded or not, either case (ib-kubernetes sends ``"0x%04X"``), bare decimal
digits (NVIDIA's infra-controller sends ``"103"`` for 0x67) or a JSON number; strictly between
0 and 0x7fff, without the full-member bit. A GUID as 16-20 hex digits with or without ``0x``
(leading zeros past 16 digits only: a GUID is 64 bits). Emitted: P_Keys lower-case unpadded
(``0x2fb``), GUIDs bare lower-case 16 digits (ib-kubernetes inserts ':' every two characters).
"""

from __future__ import annotations

import re
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from policies.errors import InvalidValueError

_HEX_PKEY = re.compile(r"0[xX]([0-9a-fA-F]{1,4})")
_DECIMAL = re.compile(r"[0-9]{1,5}")
_GUID = re.compile(r"(?:0[xX])?([0-9a-fA-F]{16,20})")
# The management partition: every port's default membership, never a tenant's.
MANAGEMENT_PKEY = 0x7FFF
# GUIDs per call: a scheduler adds a job's ports, not a fabric's (a Slurm job of 1,024 nodes
# with 4 HCAs each is 4,096).
MAX_GUIDS_PER_CALL = 4096
MAX_NAME = 64


def parse_pkey(value: object) -> int:
    """The P_Key a client sent, 0x0001-0x7fff; `InvalidValueError` otherwise.

    0x7fff, the management partition, parses (a client may read it); every write refuses it
    as it refuses any key the caller may not use (tenancy/usecases/ufm_facade.py).
    """
    text = str(value).strip() if isinstance(value, str | int) else None
    if isinstance(value, bool) or text is None:
        raise InvalidValueError(f"pkey must be a string such as '0x2fb', got {value!r}")
    hexed = _HEX_PKEY.fullmatch(text)
    if hexed is None and _DECIMAL.fullmatch(text) is None:
        raise InvalidValueError(
            f"pkey {text!r} is not a P_Key: '0x' and 1-4 hex digits, or decimal digits"
        )
    pkey = int(hexed.group(1), 16) if hexed else int(text)
    if not 0 < pkey <= MANAGEMENT_PKEY:
        raise InvalidValueError(
            f"pkey {text!r} is out of range: a partition key is 0x1-0x7ffe (bit 0x8000 is the "
            "full-member bit, which 'membership' sets)"
        )
    return pkey


def parse_guid(value: object) -> int:
    """The 64-bit GUID a client sent (16-20 hex digits, ``0x`` optional); else invalid."""
    matched = _GUID.fullmatch(value.strip()) if isinstance(value, str) else None
    if matched is None:
        raise InvalidValueError(
            f"guid {value!r} is not a GUID: 16-20 hex digits, with or without '0x'", guid=value
        )
    guid = int(matched.group(1), 16)
    if guid >= 1 << 64:
        raise InvalidValueError(f"guid {value!r} does not fit in 64 bits", guid=value)
    return guid


def pkey_text(pkey: int) -> str:
    """A P_Key as UFM emits it: ``0x2fb``."""
    return f"0x{pkey:x}"


def guid_text(guid: int) -> str:
    """A GUID as UFM emits it: 16 bare lower-case hex digits."""
    return f"{guid:016x}"


def stored_guid(guid: int) -> str:
    """A GUID as isofabric stores it (tenancy/schemas/partitions.py): ``0x`` and 16 digits."""
    return f"0x{guid:016x}"


Membership = Literal["full", "limited"]


class UfmBody(BaseModel):
    """A request body of the facade: unknown members are ignored, as UFM's clients expect."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class PkeyBody(UfmBody):
    """What every P_Key write names: the key, and the partition flags a client may send."""

    pkey: int = Field(description="The P_Key: '0x2fb', '0x02FB' or decimal digits")
    index0: bool | None = Field(default=None, description="UFM's index0 flag (default false)")
    ip_over_ib: bool | None = Field(default=None, description="UFM's IPoIB flag (default true)")
    partition_name: str | None = Field(
        default=None, max_length=MAX_NAME, description="A name for people, kept as a label"
    )
    pkey_name_prefix: str | None = Field(
        default=None, max_length=MAX_NAME, description="UFM 6.21's name prefix, kept as a label"
    )
    mtu_limit: float | None = Field(default=None, description="UFM's MTU code (ignored)")
    service_level: float | None = Field(default=None, description="UFM's SL (ignored)")
    rate_limit: float | None = Field(default=None, description="UFM's rate in Gb/s (ignored)")

    @field_validator("pkey", mode="before")
    @classmethod
    def _pkey(cls, value: Any) -> int:
        return parse_pkey(value)

    def sent_flags(self) -> dict[str, Any]:
        """The partition fields the client sent (None: not sent)."""
        names = ("index0", "ip_over_ib", "mtu_limit", "service_level", "rate_limit")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


class GuidsBody(PkeyBody):
    """Add (POST merges) or set (PUT replaces) a P_Key's GUIDs.

    `membership` applies to every GUID (default full); `memberships` is index-aligned with
    `guids`; both together, or a list of another length, is refused, as UFM refuses them.
    """

    guids: list[int] = Field(
        default_factory=list,
        max_length=MAX_GUIDS_PER_CALL,
        description="GUIDs, 16-20 hex digits with or without '0x'",
    )
    membership: Membership | None = Field(
        default=None, description="'full' (default) or 'limited', for every GUID"
    )
    memberships: list[Membership] | None = Field(
        default=None, description="One membership per GUID, in the same order"
    )

    @field_validator("guids", mode="before")
    @classmethod
    def _guids(cls, value: Any) -> list[int]:
        return _guid_list(value)

    @model_validator(mode="after")
    def _memberships_aligned(self) -> Self:
        if self.membership is not None and self.memberships is not None:
            raise ValueError("send 'membership' or 'memberships', not both")
        if self.memberships is not None and len(self.memberships) != len(self.guids):
            raise ValueError(
                f"'memberships' has {len(self.memberships)} entries for {len(self.guids)} guids"
            )
        return self

    def wanted(self) -> dict[str, bool]:
        """Stored GUID text -> full member, in the order sent."""
        kinds = self.memberships or [self.membership or "full"] * len(self.guids)
        return {stored_guid(g): kind == "full" for g, kind in zip(self.guids, kinds, strict=True)}


class RemoveGuidsBody(UfmBody):
    """``POST /actions/remove_guids_from_pkey``: a non-member is a no-op."""

    pkey: int = Field(description="The P_Key")
    guids: list[int] = Field(max_length=MAX_GUIDS_PER_CALL, description="The GUIDs to remove")

    @field_validator("pkey", mode="before")
    @classmethod
    def _pkey(cls, value: Any) -> int:
        return parse_pkey(value)

    @field_validator("guids", mode="before")
    @classmethod
    def _guids(cls, value: Any) -> list[int]:
        return _guid_list(value)


class HostsBody(PkeyBody):
    """``POST /resources/pkeys/hosts``: every CA port of the named hosts (Slurm's prolog)."""

    hosts_names: list[str] = Field(
        max_length=MAX_GUIDS_PER_CALL, description="Node names, a list or comma-separated"
    )
    membership: Membership | None = Field(default=None, description="'full' or 'limited'")

    @field_validator("hosts_names", mode="before")
    @classmethod
    def _names(cls, value: Any) -> list[str]:
        return host_names(value)


def host_names(value: Any) -> list[str]:
    """Host names as a list or a comma-separated string, each once.

    Slurm's compressed host lists are expanded as ``scontrol show hostnames`` does:
    ``gpu[0007-0008,0010]`` is gpu0007, gpu0008 and gpu0010 (zero padding kept).
    """
    names = _split_hostlist(value) if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("hosts_names must be host names, as a list or separated by ','")
    cleaned = [host for name in names if name.strip() for host in _expand(name.strip())]
    if len(set(cleaned)) != len(cleaned):
        raise ValueError("hosts_names lists a host twice")
    if len(cleaned) > MAX_GUIDS_PER_CALL:
        raise ValueError(f"hosts_names lists more than {MAX_GUIDS_PER_CALL} hosts")
    return cleaned


def parse_host_names(text: str) -> list[str]:
    """`host_names` of a path segment; `InvalidValueError` where it is not a host list."""
    try:
        return host_names(text)
    except ValueError as error:
        raise InvalidValueError(str(error), reason="invalid-hosts") from error


_BRACKETED = re.compile(r"^([^\[\]]*)\[([0-9,\-]+)\]([^\[\]]*)$")


def _split_hostlist(text: str) -> list[str]:
    """Split at the commas outside brackets (``a[1-2],b`` is two terms)."""
    terms, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _expand(term: str) -> list[str]:
    matched = _BRACKETED.fullmatch(term)
    if matched is None:
        if "[" in term or "]" in term:
            raise ValueError(f"host list {term!r} is not Slurm's prefix[1-3,5] form")
        return [term]
    prefix, ranges, suffix = matched.groups()
    hosts = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"host list {term!r} has a bad range {part!r}")
        last = int(high or low)
        if last < int(low):
            raise ValueError(f"host list {term!r} has a range that goes down: {part!r}")
        if last - int(low) > MAX_GUIDS_PER_CALL:
            raise ValueError(f"host list {term!r} names more than {MAX_GUIDS_PER_CALL} hosts")
        hosts += [f"{prefix}{n:0{len(low)}d}{suffix}" for n in range(int(low), last + 1)]
    return hosts


def _guid_list(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise ValueError("guids must be a list of GUIDs")
    guids = [parse_guid(item) for item in value]
    if len(set(guids)) != len(guids):
        twice = next(g for g in guids if guids.count(g) > 1)
        raise InvalidValueError(f"guid {guid_text(twice)} is listed twice", guid=guid_text(twice))
    return guids
