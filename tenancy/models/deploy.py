"""Deployment: the snapshot history, retained artifact bytes, deploy targets and their reports."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, LargeBinary, UniqueConstraint, false
from sqlmodel import Field, SQLModel

from tenancy.models.columns import ts_column, utcnow


class SnapshotRecord(SQLModel, table=True):
    """One committed, verified state of a fabric: its digest, time and the audit entry behind it.

    A row per commit whose digest differs from the fabric's previous one (a few dozen bytes, never
    the state itself): the history is the audit log's digest chain made queryable. `id` orders
    snapshots across time; a digest may recur (allocate, then release) and its newest row counts.
    """

    __tablename__ = "snapshot_record"
    __table_args__ = (
        Index("ix_snapshot_record_fabric_digest", "fabric_id", "digest"),
        # The fabric's newest row (its current digest, on every cached read) in one index probe.
        Index("ix_snapshot_record_fabric_newest", "fabric_id", "id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    digest: str = Field(max_length=71)
    audit_index: int
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    # The policy version in force at this snapshot (0 is the built-in default).
    policy_version: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    # When its signed manifest was first fetched or a deploy target first reported it: from
    # then on a target may hold what it holds (an identifier it holds is quarantined).
    fetched_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))


class ArtifactBlob(SQLModel, table=True):
    """Retained artifact bytes, zlib-compressed, stored once per content (keyed by its sha256).

    Files no longer carry the snapshot digest, so a change rewrites only the files it touches and
    the unchanged ones of every retained snapshot share one blob. A file that holds secrets
    (`policies.artifacts.holds_secrets`) is `sealed` (tenancy/store/sealing.py), never in clear.
    """

    __tablename__ = "artifact_blob"
    sha256: str = Field(primary_key=True, max_length=64)
    size: int
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    sealed: bool = Field(default=False, sa_column_kwargs={"server_default": false()})


class SnapshotFile(SQLModel, table=True):
    """A file of a retained snapshot: which blob holds its bytes (artifacts kept for fetching)."""

    __tablename__ = "snapshot_file"
    __table_args__ = (UniqueConstraint("fabric_id", "digest", "path"),)
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    digest: str = Field(max_length=71)
    path: str = Field(max_length=255)
    sha256: str = Field(foreign_key="artifact_blob.sha256", max_length=64, index=True)
    retained_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class DeployTarget(SQLModel, table=True):
    """A host that enforces a fabric's artifacts (OpenSM node, RoCE leaf) and what it reported.

    `state` is the last reported outcome (null until the first report); `deployed` the snapshot
    digest whose files it holds (applied, or restored by a rollback) and `applied_snapshot_id`
    that snapshot's newest history row; `observed_snapshot_id` the newest history row of what a
    master's (OpenSM) or a leaf's (SONiC) read-back last matched. Drains of released nodes
    wait for them.
    """

    __tablename__ = "deploy_target"
    __table_args__ = (UniqueConstraint("fabric_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    name: str = Field(max_length=63)
    kind: str = Field(max_length=16)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    state: str | None = Field(default=None, max_length=24)
    role: str | None = Field(default=None, max_length=16)
    digest: str | None = Field(default=None, max_length=71)
    deployed: str | None = Field(default=None, max_length=71)
    applied_snapshot_id: int | None = None
    observed_snapshot_id: int | None = None
    observed_digest: str | None = Field(default=None, max_length=71)
    # RoCE: what the agent's last report covered ("config_db" or "config_db,frr"; null: all),
    # and the last snapshot whose frr.conf an agent deployed and read back on this leaf.
    covers: str | None = Field(default=None, max_length=32)
    frr_digest: str | None = Field(default=None, max_length=71)
    # RoCE phased rollout: the phase (1 or 2) of snapshot `phase_digest` it last
    # applied; phase 1 removes access only, so it does not make the target hold that digest.
    phase: int | None = None
    phase_digest: str | None = Field(default=None, max_length=71)
    mismatches: str = "[]"
    detail: str = ""
    reported_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    last_seen_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))


class DeploymentReport(SQLModel, table=True):
    """A report that changed its target's state (a deploy receipt, also in the audit log).

    Reports that repeat the target's current state only move its `last_seen_at`. A deleted
    target's reports stay (`target_id` null, `target` keeps its name): they are receipts.
    """

    __tablename__ = "deployment_report"
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    target_id: int | None = Field(default=None, foreign_key="deploy_target.id", index=True)
    target: str = Field(max_length=63)
    received_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    principal: str = Field(max_length=128)
    state: str = Field(max_length=24)
    role: str = Field(max_length=16)
    digest: str | None = Field(default=None, max_length=71)
    observed_digest: str | None = Field(default=None, max_length=71)
    mismatches: str = "[]"
    detail: str = ""
    durations: str = "{}"
    ports_read: int = 0
    phase: int | None = None
    audit_index: int
