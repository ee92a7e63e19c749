"""A tenant's InfiniBand partitions, their members, and the virtual GUIDs of a fabric."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field, StrictBool, field_validator

from policies.infiniband.model import format_guid
from tenancy.schemas.common import HEX_GUID_PATTERN, PKeyInput, Slug, Strict

# A partition's member list in one request: far above one job's or cluster's ports.
MAX_MEMBERS = 16384
# Ranges of virtual GUIDs in a fabric's setting.
MAX_GUID_RANGES = 64
Membership = Literal["full", "limited"]


def guid_text(text: str) -> str:
    """A GUID (0x and 1-16 hex digits) as stored: 0x and 16 lower-case digits; not 0 nor ~0."""
    value = int(text, 16)
    if value in (0, 2**64 - 1):
        raise ValueError("a GUID must not be all zeros or all ones")
    return format_guid(value)


# A GUID as 0x and 1-16 hex digits, written back as 0x and 16 lower-case digits.
GuidInput = Annotated[
    str,
    Field(pattern=HEX_GUID_PATTERN, examples=["0x0002c90300000001"]),
    AfterValidator(guid_text),
]


class PartitionCreate(Strict):
    """Body that creates an additional InfiniBand partition for a tenant on one fabric."""

    fabric: Slug = Field(description="The InfiniBand fabric's name")
    name: Slug = Field(
        description="The partition's name, unique for the tenant on the fabric; 'default' is "
        "the tenant's own partition and taken"
    )
    pkey: PKeyInput | None = Field(
        default=None,
        description="A P_Key of the fabric's range that is free (not held, not quarantined for "
        "another owner); omitted: the lowest free one",
    )
    qos_class: Slug | None = Field(
        default=None, description="The partition's QoS class; omitted: the tenant's"
    )
    ipoib: StrictBool = Field(
        default=True, description="Create the partition's IPoIB broadcast group (OpenSM 'ipoib')"
    )
    index0: StrictBool = Field(
        default=False,
        description="Put this P_Key at index 0 of its members' P_Key tables (OpenSM 'indx0'); "
        "a port may be in one such partition only",
    )


class MemberSpec(Strict):
    """A member of a partition: a port of the tenant's nodes or a virtual GUID bound to it."""

    guid: GuidInput = Field(description="Port GUID or virtual GUID, 0x and 1-16 hex digits")
    membership: Membership = Field(
        default="full", description="'full' (talks to every member) or 'limited' (to full only)"
    )


class MemberAdd(Strict):
    """Body of POST .../members/{guid}: the membership (full unless said)."""

    membership: Membership = Field(default="full", description="'full' or 'limited'")


class MembersPut(Strict):
    """Body of PUT .../members: the partition's exact member set."""

    members: list[MemberSpec] = Field(
        max_length=MAX_MEMBERS, description="Every member, each GUID once"
    )

    @field_validator("members")
    @classmethod
    def _each_once(cls, members: list[MemberSpec]) -> list[MemberSpec]:
        seen: set[str] = set()
        for member in members:
            if member.guid in seen:
                raise ValueError(f"GUID {member.guid} is listed twice")
            seen.add(member.guid)
        return members


class MemberView(BaseModel):
    """A member as the partition holds it."""

    guid: str = Field(description="0x and 16 lower-case hex digits")
    membership: Membership = Field(description="'full' or 'limited'")
    kind: Literal["port", "virtual"] = Field(
        description="'port': a port of the tenant's nodes; 'virtual': a virtual GUID"
    )
    node: str | None = Field(default=None, description="The port's node; null for a virtual GUID")


class PartitionView(BaseModel):
    """One of a tenant's InfiniBand partitions; `default` is the one every tenant with nodes has."""

    tenant: str = Field(description="The tenant's name")
    fabric: str = Field(description="The fabric's name")
    name: str = Field(description="The partition's name ('default' or the one given)")
    pkey: str = Field(description="Its P_Key, 0x and 4 lower-case hex digits")
    qos_class: str = Field(description="Its QoS class")
    ipoib: bool = Field(description="Whether it has an IPoIB broadcast group")
    index0: bool = Field(description="Whether its key sits at index 0 of its members' tables")
    members: list[MemberView] = Field(
        description="Its members; the default partition's are the tenant's nodes' ports"
    )
    created_at: datetime = Field(description="When it was created, RFC 3339 UTC")


class VirtualGuidSetting(Strict):
    """The fabric's virtual GUIDs (SR-IOV virtual functions), enforced by NVIDIA's SM only."""

    enabled: StrictBool = Field(default=False, description="Whether partitions may list them")
    ranges: list[str] = Field(
        default_factory=list,
        max_length=MAX_GUID_RANGES,
        description="Inclusive ranges '0x<first>-0x<last>' the orchestrator assigns from",
    )
    sm: Literal["nvidia"] = Field(
        default="nvidia",
        description="The SM that enforces them: 'nvidia' (UFM, or NVIDIA's OpenSM with "
        "virt_enabled 2); upstream OpenSM ignores GUIDs that are not ports",
    )

    @field_validator("ranges")
    @classmethod
    def _ranges(cls, ranges: list[str]) -> list[str]:
        texts = sorted(_range_text(text) for text in ranges)
        for before, after in pairwise(texts):
            if after.partition("-")[0] <= before.partition("-")[2]:
                raise ValueError(f"the ranges {before} and {after} overlap: give each GUID once")
        return texts


def _range_text(text: str) -> str:
    first, _, last = text.partition("-")
    if max(len(first), len(last)) > len("0x") + 16:
        raise ValueError(f"'{text[:60]}': a GUID has at most 16 hex digits after 0x")
    try:
        low, high = int(first, 16), int(last, 16)
    except ValueError:
        example = "0x0200000000000000-0x02000000000000ff"
        raise ValueError(f"'{text[:60]}' is not a range like {example}") from None
    if not (first.lower().startswith("0x") and last.lower().startswith("0x")):
        raise ValueError(f"'{text[:60]}': write both ends as 0x and 1-16 hex digits")
    if not 0 < low <= high < 2**64 - 1:
        raise ValueError(f"'{text[:60]}': the first GUID must not be above the last, nor 0")
    return f"{format_guid(low)}-{format_guid(high)}"


class VirtualGuidView(BaseModel):
    """A virtual GUID of the fabric's ledger: who it is bound to and where it is a member."""

    guid: str = Field(description="0x and 16 lower-case hex digits")
    tenant: str = Field(description="The tenant it is bound to")
    state: Literal["bound", "draining"] = Field(
        description="'bound': in a partition; 'draining': left every partition, waiting for the "
        "deploy targets to read back a snapshot without it"
    )
    partitions: list[str] = Field(description="The tenant's partitions it is a member of")
    bound_at: datetime = Field(description="When it was bound, RFC 3339 UTC")
    released_at: datetime | None = Field(description="When it left its last partition")


class FabricPatch(Strict):
    """Body of PATCH /v1/fabrics/{fabric}: the settings that may change after creation."""

    virtual_guids: VirtualGuidSetting = Field(description="The fabric's virtual GUID setting")
