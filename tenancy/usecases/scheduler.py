"""Jobs `serve` runs on a schedule, each once per period across every replica.

Time is cut into periods of a job's interval, aligned on the Unix epoch, so every replica
computes the same period boundaries. A replica runs a job for a period only after inserting
its `scheduled_run` row: the unique key (job, period_start) admits one row, so of several
replicas on one database exactly one takes each period (on PostgreSQL the loser's insert waits
for the winner's commit, then inserts nothing; SQLite serialises writers). The taken period commits
before the job runs, so a job that fails (or a replica that dies) still leaves its row; the
period is not run again (at most once per period: the jobs are periodic checks, the next period
repeats them).

Jobs: ``full-verification`` (every fabric re-verified whole, tenancy/gate/full_check.py,
``ISOFABRIC_FULL_VERIFY_INTERVAL_SECONDS``) and ``audit-checkpoint`` (a signed checkpoint of the
audit log if it grew, ``ISOFABRIC_CHECKPOINT_INTERVAL_SECONDS``): the newest checkpoint then
covers the log as it was at most one interval ago.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql.dml import ReturningInsert
from sqlmodel import col, select

from tenancy import models as m
from tenancy.gate.full_check import full_check_all
from tenancy.record import audit_log
from tenancy.schemas.health import ScheduledRunView
from tenancy.store.uow import UnitOfWork

# Runs older than this are deleted when a job takes a period: the table stays small (one
# row per job and period: 288 a day for a 5-minute checkpoint).
RUN_RETENTION = timedelta(days=7)
DETAIL_LIMIT = 1024  # the column's length


@dataclass(frozen=True, slots=True)
class Job:
    """A job: its name, its period in seconds, and the work (returns a one-line summary)."""

    name: str
    interval_seconds: int
    work: Callable[[UnitOfWork], str]


def _full_verification(uow: UnitOfWork) -> str:
    checks = full_check_all(uow)
    disagreeing = [c.fabric for c in checks if not c.matches]
    return f"{len(checks)} fabric(s) re-verified; disagreeing: {disagreeing or 'none'}"


def _checkpoint(uow: UnitOfWork) -> str:
    view = audit_log.checkpoint(uow)
    return f"checkpoint of {view.size} entries"


def jobs(uow: UnitOfWork) -> list[Job]:
    """The jobs the settings turn on (an interval of 0 turns a job off)."""
    settings = uow.settings
    every = [
        Job("full-verification", settings.full_verify_interval_seconds, _full_verification),
        Job("audit-checkpoint", settings.checkpoint_interval_seconds, _checkpoint),
    ]
    return [job for job in every if job.interval_seconds > 0]


def replica_name() -> str:
    """This server's name in the run records: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"[:128]


def period_start(now: datetime, interval_seconds: int) -> datetime:
    """The start of the period holding `now`: a multiple of the interval since the epoch."""
    seconds = int(now.timestamp()) // interval_seconds * interval_seconds
    return datetime.fromtimestamp(seconds, UTC)


def run_once(uow: UnitOfWork, job: Job, replica: str) -> ScheduledRunView | None:
    """Take the current period of `job` and run it; None when another replica took it.

    The job's failure is recorded (outcome ``failed``, the error's message) and re-raised.
    """
    run_id = _take_period(uow, job, replica)
    if run_id is None:
        return None
    try:
        summary = job.work(uow)
    except Exception as error:
        _finish(uow, run_id, "failed", f"{type(error).__name__}: {error}")
        raise
    return _finish(uow, run_id, "ok", summary)


def _take_period(uow: UnitOfWork, job: Job, replica: str) -> int | None:
    """Insert the period's row unless it exists (ON CONFLICT DO NOTHING); its id, or None.

    On PostgreSQL a replica inserting at the same moment waits for the first one's commit and
    then inserts nothing (no unique-violation error in the server's log every period).
    """
    with uow.transaction() as tx:
        start = period_start(tx.now, job.interval_seconds)
        tx.session.exec(
            delete(m.ScheduledRun).where(
                col(m.ScheduledRun.job) == job.name,
                col(m.ScheduledRun.period_start) < tx.now - RUN_RETENTION,
            )
        )
        values = {
            "job": job.name,
            "period_start": start,
            "replica": replica,
            "started_at": tx.now,
            "outcome": "running",
        }
        statement = _TAKE_PERIOD[tx.session.get_bind().dialect.name == "postgresql"]
        run_id: int | None = tx.session.connection().execute(statement, values).scalar()
        return run_id


def _take_period_statement(postgresql: bool) -> ReturningInsert[int | None]:
    insert = postgresql_insert if postgresql else sqlite_insert
    return (
        insert(m.ScheduledRun)
        .on_conflict_do_nothing(index_elements=["job", "period_start"])
        .returning(col(m.ScheduledRun.id))
    )


_TAKE_PERIOD = {flag: _take_period_statement(flag) for flag in (False, True)}


def _finish(uow: UnitOfWork, run_id: int, outcome: str, detail: str) -> ScheduledRunView:
    with uow.transaction() as tx:
        row = tx.session.get_one(m.ScheduledRun, run_id)
        row.outcome, row.finished_at, row.detail = outcome, tx.now, detail[:DETAIL_LIMIT]
        tx.session.add(row)
        tx.session.flush()
        return run_view(row)


def run_view(row: m.ScheduledRun) -> ScheduledRunView:
    """The API shape of a run record."""
    return ScheduledRunView.model_validate(row, from_attributes=True)


def latest_runs(uow: UnitOfWork) -> list[ScheduledRunView]:
    """The newest run of each job that ever ran, by job name."""
    with uow.transaction(read_only=True) as tx:
        newest = (
            select(m.ScheduledRun.job, func.max(m.ScheduledRun.period_start).label("start"))
            .group_by(col(m.ScheduledRun.job))
            .subquery()
        )
        query = (
            select(m.ScheduledRun)
            .join(
                newest,
                (col(m.ScheduledRun.job) == newest.c.job)
                & (col(m.ScheduledRun.period_start) == newest.c.start),
            )
            .order_by(col(m.ScheduledRun.job))
        )
        return [run_view(row) for row in tx.session.exec(query)]


def runs(uow: UnitOfWork, job: str) -> list[ScheduledRunView]:
    """Every recorded run of `job`, oldest period first."""
    with uow.transaction(read_only=True) as tx:
        query = (
            select(m.ScheduledRun)
            .where(m.ScheduledRun.job == job)
            .order_by(col(m.ScheduledRun.period_start))
        )
        return [run_view(row) for row in tx.session.exec(query)]
