"""Config audits of deployed files and observed P_Key tables."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    Field,
    StrictInt,
)

from tenancy.schemas.common import (
    HEX_GUID_PATTERN,
    HEX_PKEY_PATTERN,
    Strict,
)
from tenancy.schemas.verification import (
    CounterexampleView,
    EdgeView,
)

AUDIT_FORMAT_PATTERN = "^(partitions|config_db|frr)$"


class AuditFindingView(BaseModel):
    """A parser finding about the audited file: a construct the software rejects or misreads.

    `severity` is ``critical``, ``error``, ``warning`` or ``info``; `line` is 1-based, null for
    file-wide findings and for JSON.
    """

    code: str
    severity: str
    line: int | None
    message: str


class DriftView(BaseModel):
    """What the audited file adds to (`added`) or lacks from (`missing`) one owner's segment.

    `owner` is ``tenant:acme`` (null for a segment no owner holds); `segment` is the P_Key
    (``0x0101``), the VLAN (``Vlan102``) or the VRF (``Vrf50001``). Items are port GUIDs, switch
    ports or route targets; `changed` lists GUIDs whose membership (full/limited) differs.
    """

    owner: str | None
    segment: str
    added: list[str]
    missing: list[str]
    changed: list[str] = []


class ConfigAuditView(BaseModel):
    """Response of a config audit: a deployed file checked against the fabric's intent.

    `holds` is true when the file allows no isolation violation (no counterexample). `leaf` names
    the audited leaf (config_db and frr only); `snapshot_digest` names the intended state the
    file was compared with. Nothing is stored.
    """

    fabric: str
    format: str
    leaf: str | None
    snapshot_digest: str
    holds: bool
    findings: list[AuditFindingView]
    drift: list[DriftView]
    counterexamples: list[CounterexampleView]
    reachability: list[EdgeView] = Field(
        default_factory=list,
        description="Intended reachability the file grants (a tenant VRF importing a granted "
        "service's route target): reported as such, not as a finding.",
    )


class ObservedPort(Strict):
    """One HCA port's live P_Key table as collected: GUID, LID and up to 128 P_Keys in hex."""

    guid: Annotated[str, Field(pattern=HEX_GUID_PATTERN)]
    # IBA: a LID is 16 bits (0 while the SM has not assigned one).
    lid: Annotated[StrictInt, Field(ge=0, le=0xFFFF)]
    pkeys: Annotated[list[Annotated[str, Field(pattern=HEX_PKEY_PATTERN)]], Field(max_length=128)]


class ObservationCreate(BaseModel):
    """What ``isofabric collect ib`` prints; unknown members are ignored."""

    kind: Literal["infiniband"]
    collected_at: datetime | None = None
    ibnetdiscover: Annotated[str, Field(max_length=16_000_000)] = ""
    ports: Annotated[list[ObservedPort], Field(max_length=100_000)]


class PortDriftView(BaseModel):
    """One port whose live P_Key table differs from intent, and the port's owner.

    `missing` are intended keys the table lacks, `unexpected` keys it has beyond intent; keys are
    16-bit P_Keys (bit 15 set = full member).
    """

    guid: str
    node: str
    owner: str
    missing: list[str]
    unexpected: list[str]


class ObservationView(BaseModel):
    """Response to posted live P_Key tables: per-port drift from intent and what they allow.

    `holds` and `counterexamples` judge the fabric as the live tables describe it, not as
    intended. Nothing is stored.
    """

    fabric: str
    snapshot_digest: str
    holds: bool
    ports: list[PortDriftView]
    counterexamples: list[CounterexampleView]
