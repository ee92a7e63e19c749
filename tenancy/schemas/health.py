"""Operations: liveness, readiness and the runs of scheduled jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class HealthView(BaseModel):
    """The process answers: it is alive (nothing else is checked, the database least of all)."""

    status: Literal["ok"] = Field(description="Always 'ok': the process serves requests")


class ScheduledRunView(BaseModel):
    """The latest run of one scheduled job (whichever replica ran it)."""

    job: str = Field(description="The job's name", examples=["audit-checkpoint"])
    period_start: datetime = Field(description="Start of the period the run was for (UTC)")
    replica: str = Field(description="The server that claimed the period: 'host:pid'")
    started_at: datetime = Field(description="When the run started (UTC)")
    finished_at: datetime | None = Field(description="When it ended; null while it runs")
    outcome: Literal["running", "ok", "failed"] = Field(
        description="'running' until it ends (a replica that stopped mid-run leaves it so)"
    )
    detail: str | None = Field(description="What the run did, or why it failed")


class ReadinessChecks(BaseModel):
    """Each readiness condition, 'ok' when it holds (a 503 names those that do not)."""

    database: Literal["ok"] = Field(description="The database answers a query")
    migrations: Literal["ok"] = Field(description="The schema is at this version's newest")
    signing_key: Literal["ok"] = Field(
        description="The signing key file is loaded and is the active key"
    )
    opensm_secret: Literal["ok"] = Field(
        description="The OpenSM secret (or the three OpenSM keys) is installed"
    )


class ReadinessView(BaseModel):
    """The server can take traffic: database reachable and migrated, keys loaded."""

    status: Literal["ready"] = Field(description="Always 'ready' (otherwise the answer is a 503)")
    checks: ReadinessChecks = Field(description="Each condition checked")
    schema_revision: str | None = Field(description="The database's migration revision")
    scheduled_jobs: list[ScheduledRunView] = Field(
        description="The latest run of each scheduled job, across every replica"
    )
