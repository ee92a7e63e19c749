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

TargetKind = Literal["opensm", "sonic"]
RolloutPhase = Literal[1, 2]
ReportState = Literal["applied", "refused", "failed", "rolled_back", "restart_required"]
SmRole = Literal["master", "standby", "unknown"]
# What a RoCE leaf's agent deploys and reads back: CONFIG_DB always, frr.conf with --frr-conf.
LeafPart = Literal["config_db", "frr"]
MAX_MISMATCHES = 10_000
MAX_DETAIL = 4096
REPORT_STATES = (
    "The cycle's outcome: 'applied' (enforced as verified), 'refused' (a signature, hash or "
    "parse check failed; nothing installed), 'failed', 'rolled_back' (the read-back showed a "
    "problem; the previous files are back) or 'restart_required' (installed; an option needs "
    "an OpenSM restart)"
)


class SnapshotView(BaseModel):
    """One committed, verified state of a fabric (newest first in the history)."""

    digest: str = Field(description="The snapshot digest (what audit entries call digest_after)")
    created_at: datetime = Field(
        description="When the change that produced it committed, RFC 3339 UTC"
    )
    audit_index: int = Field(description="The audit entry of that change")
    current: bool = Field(description="The fabric's state now")
    retained: bool = Field(description="Its artifact bytes can be fetched (or it is current)")
    deployed_to: list[str] = Field(description="Targets whose last applied snapshot this is")
    policy_version: int = Field(
        default=0, description="The policy version in force at this snapshot (0: the default)"
    )


REPORTED = "Read-only, as GET answers it: accepted and ignored (only the target's agent reports)"


class TargetCreate(Strict):
    """Body of PUT /v1/fabrics/{fabric}/targets/{name}: what enforces the fabric's files there.

    A target read with GET, edited and put back is accepted as it is: `name` must be the path's,
    and the members that describe its reports are ignored (they change with every report, so
    comparing them would refuse most round trips).
    """

    kind: TargetKind = Field(
        description="'opensm': a Subnet Manager host (InfiniBand fabrics); 'sonic': a RoCE leaf "
        "(SONiC CONFIG_DB and FRR), whose target name is the name of a leaf with a VTEP in the "
        "fabric's topology"
    )
    name: str | None = Field(
        default=None, max_length=200, description="Read-only: the path's target name, or 422"
    )
    created_at: datetime | None = Field(default=None, description=REPORTED)
    state: str | None = Field(default=None, max_length=200, description=REPORTED)
    role: str | None = Field(default=None, max_length=200, description=REPORTED)
    deployed: str | None = Field(default=None, max_length=200, description=REPORTED)
    digest: str | None = Field(default=None, max_length=200, description=REPORTED)
    observed_digest: str | None = Field(default=None, max_length=200, description=REPORTED)
    mismatches: list[PortMismatch] | None = Field(
        default=None, max_length=100_000, description=REPORTED
    )
    detail: str | None = Field(default=None, max_length=100_000, description=REPORTED)
    reported_at: datetime | None = Field(default=None, description=REPORTED)
    last_seen_at: datetime | None = Field(default=None, description=REPORTED)


class PortMismatch(Strict):
    """A port whose read-back P_Key table differs from the model (full-member keys have 0x8000)."""

    guid: str = Field(
        pattern=GUID_TEXT_PATTERN,
        examples=["0x0002c90300001000"],
        description="Port GUID, 0x and 16 lower-case hex digits",
    )
    missing: list[Annotated[str, Field(pattern=PKEY_TEXT_PATTERN)]] = Field(
        max_length=128,
        description="P_Keys the model has and the port's table lacks: 0x and 4 lower-case hex "
        "digits, the full-member bit (0x8000) set for full members; at most 128",
    )
    unexpected: list[Annotated[str, Field(pattern=PKEY_TEXT_PATTERN)]] = Field(
        max_length=128,
        description="P_Keys the port's table has and the model lacks, written like `missing`",
    )


class ReportCreate(Strict):
    """Body of POST …/targets/{name}/reports: one deploy agent cycle's outcome."""

    state: ReportState = Field(description=REPORT_STATES)
    digest: SnapshotDigest | None = Field(description="The snapshot the agent deployed or tried")
    observed_digest: SnapshotDigest | None = Field(
        default=None, description="The snapshot whose model the read-back matched, if any"
    )
    role: SmRole = Field(
        default="unknown",
        description="The SM's role read from SMInfo: master, standby, or unknown if not read",
    )
    mismatches: list[PortMismatch] = Field(
        default_factory=list,
        max_length=MAX_MISMATCHES,
        description="Ports whose read-back P_Key table differs from the model (at most 10,000)",
    )
    detail: str = Field(
        default="", max_length=MAX_DETAIL, description="What happened, for people (4096 chars)"
    )
    durations: dict[
        Annotated[str, Field(pattern=r"^[a-z_]{1,32}$")],
        Annotated[StrictFloat | StrictInt, Field(ge=0, le=86_400)],
    ] = Field(
        default_factory=dict,
        max_length=32,
        description="Seconds per step of the cycle (0-86400) by step name ([a-z_], e.g. "
        "'install', 'total'); at most 32 steps",
    )
    ports_read: StrictInt = Field(
        default=0, ge=0, le=10_000_000, description="P_Key tables read back in the cycle"
    )
    phase: RolloutPhase | None = Field(
        default=None,
        description="RoCE: the rollout phase of `digest` the agent deployed, as `sync` "
        "published it: 1 (access removals only; the target does not hold `digest` yet) or 2 "
        "(the whole snapshot); null for a whole deployment (InfiniBand)",
    )
    covers: list[LeafPart] | None = Field(
        default=None,
        min_length=1,
        max_length=2,
        description="RoCE: the parts of the leaf the agent deploys and read back: 'config_db' "
        "and, when it deploys FRR too, 'frr'. A leaf whose agent leaves frr.conf alone never "
        "counts in `sync` as holding a snapshot whose frr.conf for it differs from the last one "
        "an agent read back there. Null: every file of the target (InfiniBand; older agents)",
    )

    @model_validator(mode="after")
    def _applied_names_its_snapshot(self) -> Self:
        if self.state == "applied" and self.digest is None:
            raise ValueError("an applied report needs the digest of the snapshot it applied")
        if self.state == "rolled_back" and self.observed_digest is None and self.digest is None:
            raise ValueError("a rolled_back report needs the digest it tried")
        if self.covers is not None and (
            "config_db" not in self.covers or len(set(self.covers)) != len(self.covers)
        ):
            raise ValueError("covers lists 'config_db' and optionally 'frr', each once")
        return self


class ReportView(BaseModel):
    """A stored report; `changed_state` is false when it only repeated the target's state."""

    id: int = Field(description="The report's number, increasing")
    target: str = Field(description="The target's name")
    received_at: datetime = Field(description="When the service received it, RFC 3339 UTC")
    principal: str = Field(description="Who sent it: the agent token's principal")
    state: str = Field(description=REPORT_STATES)
    role: str = Field(description="'master', 'standby' or 'unknown'")
    digest: str | None = Field(description="The snapshot the agent deployed or tried")
    observed_digest: str | None = Field(
        description="The snapshot whose model the read-back matched; null if none"
    )
    mismatches: list[PortMismatch] = Field(description="Ports whose read-back differs")
    detail: str = Field(description="What happened, for people")
    durations: dict[str, float] = Field(description="Seconds per step of the cycle")
    ports_read: int = Field(description="P_Key tables read back in the cycle")
    phase: int | None = Field(
        default=None,
        description="RoCE: the rollout phase of `digest` it reports (1 or 2); null otherwise",
    )
    audit_index: int = Field(description="Index of the audit entry that recorded it")
    changed_state: bool = Field(
        default=True,
        description="False when it only repeated the target's state: nothing was stored and "
        "the other members are those of the last stored report",
    )


class TargetView(BaseModel):
    """A deploy target with what it last reported (null fields: it has not reported yet)."""

    name: str = Field(description="The target's name")
    kind: str = Field(description="'opensm' (a Subnet Manager host) or 'sonic' (a RoCE leaf)")
    created_at: datetime = Field(description="When it was registered, RFC 3339 UTC")
    state: str | None = Field(description="Last reported outcome; null before the first report")
    role: str | None = Field(description="master or standby, from SMInfo, as last reported")
    deployed: str | None = Field(description="The snapshot digest it last applied")
    digest: str | None = Field(description="The snapshot digest of its last report")
    observed_digest: str | None = Field(
        description="The snapshot its last read-back matched; null if none"
    )
    mismatches: list[PortMismatch] = Field(description="Mismatches of its last report")
    detail: str = Field(description="Detail of its last report; empty before the first")
    reported_at: datetime | None = Field(description="When its state last changed, RFC 3339 UTC")
    last_seen_at: datetime | None = Field(
        description="When it last reported anything, RFC 3339 UTC"
    )


class SyncTargetView(BaseModel):
    """One target's part of the sync status."""

    name: str = Field(description="The target's name")
    kind: str = Field(description="'opensm' (a Subnet Manager host) or 'sonic' (a RoCE leaf)")
    deployed: str | None = Field(
        description="The snapshot digest it last applied; null if none yet"
    )
    state: str | None = Field(description="Its last reported outcome; null before any report")
    reported_at: datetime | None = Field(
        description="When its state last changed, RFC 3339 UTC; null before any report"
    )
    mismatches: list[PortMismatch] = Field(description="Mismatches of its last report")
    phase: int | None = Field(
        description="RoCE: the phase of `desired` it last applied (1: access removals only, "
        "2: all of it); null if it applied neither yet, and on InfiniBand",
    )
    behind: bool = Field(
        description="True when it does not hold `desired`: deployed differs, or its agent "
        "leaves frr.conf alone and `desired`'s frr.conf for it is not the one last read back"
    )
    affected: bool = Field(
        description="RoCE: it must remove access in phase 1: its deployed snapshot's files for "
        "it have VLAN members (ports in tenant VLANs) or route-target imports that `desired`'s "
        "lack. False for a target that never deployed, and on InfiniBand",
    )
    covers: list[str] | None = Field(
        default=None,
        description="RoCE: what its agent's last report covered ('config_db', 'frr'); null "
        "when it did not say (InfiniBand, older agents: every file)",
    )
    frr_in_place: bool | None = Field(
        default=None,
        description="RoCE: whether `desired`'s frr.conf for this leaf is in place as far as "
        "the service knows: true when its agent deploys FRR; else only when it equals the "
        "frr.conf of the last snapshot an agent read back there (`frr_digest`); null on "
        "InfiniBand",
    )


class SyncView(BaseModel):
    """Whether the fabric enforces its desired snapshot: every target applied it."""

    desired: str = Field(description="The digest of the fabric's current verified snapshot")
    in_sync: bool = Field(
        description="True only when the fabric has a target, every target reported applied "
        "for it, and (RoCE) no leaf that carries owners' ports is `untargeted`"
    )
    phase: int | None = Field(
        description="RoCE: the phase of `desired` the service publishes to agents: 1 while an "
        "affected target has applied neither phase of it (agents apply only access removals: "
        "ports leaving tenant VLANs, revoked route-target imports), then 2 (the whole "
        "snapshot); null on InfiniBand",
    )
    behind: list[str] = Field(description="The targets that do not hold `desired`, by name")
    untargeted: list[str] = Field(
        default_factory=list,
        description="RoCE: the leaves that carry a tenant's or a shared service's ports in "
        "`desired` (VLAN members, the owner's VRF) and have no deploy target, by name. Nothing "
        "enforces or reads back their files, so `in_sync` is false while one is listed (and a "
        "released host cabled to a leaf without a target stays draining: its node's `drain` "
        "says so). Empty on InfiniBand (OpenSM targets enforce the whole fabric)",
    )
    targets: list[SyncTargetView] = Field(description="Every deploy target of the fabric")


class ForceDrain(Strict):
    """Body of POST /v1/fabrics/{fabric}/nodes/{node}/force-drain: why the wait is skipped."""

    reason: str = Field(
        min_length=1,
        max_length=512,
        description="Why the drain is not waited for (1-512 characters); kept in the audit log",
    )


class ForceDrainView(BaseModel):
    """The node a force-drain freed."""

    node: str = Field(description="The node's name")
    state: str = Field(description="Its state now: `free` (allocatable again)")
