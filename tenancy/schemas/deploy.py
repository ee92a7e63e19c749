"""Deployment: snapshot history, deploy targets, their reports and the fabric's sync status."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Self

from pydantic import BaseModel, Field, StrictFloat, StrictInt, model_validator

from policies.digest import SNAPSHOT_DIGEST_PATTERN as SNAPSHOT_DIGEST
from tenancy.schemas.common import Strict

SNAPSHOT_DIGEST_PATTERN = f"^{SNAPSHOT_DIGEST}$"
SnapshotDigest = Annotated[str, Field(pattern=SNAPSHOT_DIGEST_PATTERN, examples=["v2:5d22…"])]
GUID_TEXT_PATTERN = r"^0x[0-9a-f]{16}$"
PKEY_TEXT_PATTERN = r"^0x[0-9a-f]{4}$"

TargetKind = Literal["opensm"]
ReportState = Literal["applied", "refused", "failed", "rolled_back", "restart_required"]
SmRole = Literal["master", "standby", "unknown"]
MAX_MISMATCHES = 10_000
MAX_DETAIL = 4096


class SnapshotView(BaseModel):
    """One committed, verified state of a fabric (newest first in the history)."""

    digest: str = Field(description="The snapshot digest (what audit entries call digest_after)")
    created_at: datetime = Field(description="When the change that produced it committed")
    audit_index: int = Field(description="The audit entry of that change")
    current: bool = Field(description="The fabric's state now")
    retained: bool = Field(description="Its artifact bytes can be fetched (or it is current)")
    deployed_to: list[str] = Field(description="Targets whose last applied snapshot this is")
    policy_version: int = Field(
        default=0, description="The policy version in force at this snapshot (0: the default)"
    )


class TargetCreate(Strict):
    """Body of PUT /v1/fabrics/{fabric}/targets/{name}: what enforces the fabric's files there."""

    kind: TargetKind = Field(description="'opensm': a Subnet Manager host (InfiniBand fabrics)")


class PortMismatch(Strict):
    """A port whose read-back P_Key table differs from the model (full-member keys have 0x8000)."""

    guid: str = Field(pattern=GUID_TEXT_PATTERN, examples=["0x0002c90300001000"])
    missing: list[Annotated[str, Field(pattern=PKEY_TEXT_PATTERN)]] = Field(max_length=128)
    unexpected: list[Annotated[str, Field(pattern=PKEY_TEXT_PATTERN)]] = Field(max_length=128)


class ReportCreate(Strict):
    """Body of POST …/targets/{name}/reports: one deploy agent cycle's outcome."""

    state: ReportState
    digest: SnapshotDigest | None = Field(description="The snapshot the agent deployed or tried")
    observed_digest: SnapshotDigest | None = Field(
        default=None, description="The snapshot whose model the read-back matched, if any"
    )
    role: SmRole = "unknown"
    mismatches: list[PortMismatch] = Field(default_factory=list, max_length=MAX_MISMATCHES)
    detail: str = Field(default="", max_length=MAX_DETAIL)
    durations: dict[
        Annotated[str, Field(pattern=r"^[a-z_]{1,32}$")],
        Annotated[StrictFloat | StrictInt, Field(ge=0, le=86_400)],
    ] = Field(default_factory=dict, max_length=32, description="Seconds per step of the cycle")
    ports_read: StrictInt = Field(default=0, ge=0, le=10_000_000)

    @model_validator(mode="after")
    def _applied_names_its_snapshot(self) -> Self:
        if self.state == "applied" and self.digest is None:
            raise ValueError("an applied report needs the digest of the snapshot it applied")
        if self.state == "rolled_back" and self.observed_digest is None and self.digest is None:
            raise ValueError("a rolled_back report needs the digest it tried")
        return self


class ReportView(BaseModel):
    """A stored report; `changed_state` is false when it only repeated the target's state."""

    id: int
    target: str
    received_at: datetime
    principal: str
    state: str
    role: str
    digest: str | None
    observed_digest: str | None
    mismatches: list[PortMismatch]
    detail: str
    durations: dict[str, float]
    ports_read: int
    audit_index: int
    changed_state: bool = True


class TargetView(BaseModel):
    """A deploy target with what it last reported (null fields: it has not reported yet)."""

    name: str
    kind: str
    created_at: datetime
    state: str | None = Field(description="Last reported outcome")
    role: str | None = Field(description="master or standby, from SMInfo, as last reported")
    deployed: str | None = Field(description="The snapshot digest it last applied")
    digest: str | None = Field(description="The snapshot digest of its last report")
    observed_digest: str | None
    mismatches: list[PortMismatch]
    detail: str
    reported_at: datetime | None = Field(description="When its state last changed")
    last_seen_at: datetime | None = Field(description="When it last reported anything")


class SyncTargetView(BaseModel):
    """One target's part of the sync status."""

    name: str
    deployed: str | None
    state: str | None
    reported_at: datetime | None
    mismatches: list[PortMismatch]


class SyncView(BaseModel):
    """Whether the fabric enforces its desired snapshot: every target applied it."""

    desired: str = Field(description="The digest of the fabric's current verified snapshot")
    in_sync: bool = Field(description="True only when every target reported applied for it")
    targets: list[SyncTargetView]


class ForceDrain(Strict):
    """Body of POST /v1/fabrics/{fabric}/nodes/{node}/force-drain: why the wait is skipped."""

    reason: str = Field(min_length=1, max_length=512)
