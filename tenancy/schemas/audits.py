"""Config audits of deployed files and observed P_Key tables."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    Field,
)

from tenancy.schemas.common import (
    HEX_GUID_PATTERN,
    HEX_PKEY_PATTERN,
    Strict,
)
from tenancy.schemas.verification import (
    CounterexampleView,
)

AUDIT_FORMAT_PATTERN = "^(partitions|config_db|frr)$"


class AuditFindingView(BaseModel):
    code: str
    severity: str
    line: int | None
    message: str


class DriftView(BaseModel):
    owner: str | None
    segment: str
    added: list[str]
    missing: list[str]
    changed: list[str] = []


class ConfigAuditView(BaseModel):
    fabric: str
    format: str
    leaf: str | None
    snapshot_digest: str
    holds: bool
    findings: list[AuditFindingView]
    drift: list[DriftView]
    counterexamples: list[CounterexampleView]


class ObservedPort(Strict):
    guid: Annotated[str, Field(pattern=HEX_GUID_PATTERN)]
    lid: Annotated[int, Field(ge=0, le=0xFFFF)]
    pkeys: Annotated[list[Annotated[str, Field(pattern=HEX_PKEY_PATTERN)]], Field(max_length=128)]


class ObservationCreate(BaseModel):
    """What ``isofabric collect ib`` prints; unknown members are ignored."""

    kind: Literal["infiniband"]
    collected_at: datetime | None = None
    ibnetdiscover: Annotated[str, Field(max_length=16_000_000)] = ""
    ports: Annotated[list[ObservedPort], Field(max_length=100_000)]


class PortDriftView(BaseModel):
    guid: str
    node: str
    owner: str
    missing: list[str]
    unexpected: list[str]


class ObservationView(BaseModel):
    fabric: str
    snapshot_digest: str
    holds: bool
    ports: list[PortDriftView]
    counterexamples: list[CounterexampleView]
