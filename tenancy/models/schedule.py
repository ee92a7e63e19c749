"""Runs of the jobs `serve` does on a schedule: one row per job and period."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from tenancy.models.columns import ts_column


class ScheduledRun(SQLModel, table=True):
    """One run of a scheduled job for the period starting at `period_start`.

    The replica that inserts the row first runs the job; the unique key (job, period_start) is
    what lets only one of several replicas on one database claim a period
    (tenancy/usecases/scheduler.py). `outcome` is ``running`` until the job ends (``ok`` or
    ``failed``, with `detail`); a row left ``running`` names a replica that stopped during the run.
    """

    __tablename__ = "scheduled_run"
    __table_args__ = (UniqueConstraint("job", "period_start"),)
    id: int | None = Field(default=None, primary_key=True)
    job: str = Field(max_length=64)
    period_start: datetime = Field(sa_column=ts_column())
    replica: str = Field(max_length=128)
    started_at: datetime = Field(sa_column=ts_column())
    finished_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    outcome: str = Field(max_length=16)
    detail: str | None = Field(default=None, max_length=1024)
