"""Work `serve` runs on a schedule, once per period across every replica.

Each job of tenancy/usecases/scheduler.py (the full re-verification of every fabric, the audit log's
checkpoint; an interval of 0 turns one off) gets a task that wakes at each period boundary (the
first a minute, or one interval if shorter, after the start) and asks the scheduler to claim the
period: on one database, one replica claims it and runs the job, the others skip it. The work runs
in a worker thread so the event loop keeps answering; a failed run is logged and recorded, and the
job runs again next period. Nothing runs until this server has prepared its database
(api/health.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from starlette.concurrency import run_in_threadpool

from tenancy.store.uow import UnitOfWork
from tenancy.usecases import scheduler

log = logging.getLogger(__name__)
# Wake a little after the boundary, so the clock reading that names the period is inside it.
BOUNDARY_MARGIN_SECONDS = 0.05
FIRST_RUN_DELAY_SECONDS = 60


def seconds_to_next_period(interval: int, now: float) -> float:
    """Seconds from `now` (Unix time) to just after the next multiple of `interval`."""
    return interval - now % interval + BOUNDARY_MARGIN_SECONDS


async def _every(
    job: scheduler.Job, uow: UnitOfWork, replica: str, ready: Callable[[], bool]
) -> None:
    # The first boundary considered is a minute (or one interval, if shorter) after the start:
    # a server that starts and stops at once (a test's app) runs no job, and one restarted
    # often still takes its turns (a whole interval would skip hourly jobs on every deploy).
    await asyncio.sleep(min(job.interval_seconds, FIRST_RUN_DELAY_SECONDS))
    while True:
        await asyncio.sleep(seconds_to_next_period(job.interval_seconds, time.time()))
        if not ready():
            continue
        try:
            run = await run_in_threadpool(scheduler.run_once, uow, job, replica)
        except Exception:  # the schedule must survive a failed run (a busy database, a bug)
            log.exception("scheduled job %s failed; it runs again next period", job.name)
            continue
        if run is not None:
            log.info("scheduled job %s (%s): %s", job.name, run.period_start, run.detail)


@asynccontextmanager
async def scheduled_jobs(uow: UnitOfWork, ready: Callable[[], bool]) -> AsyncIterator[None]:
    """Run every enabled job on its schedule while the block runs (once `ready()` holds)."""
    replica = scheduler.replica_name()
    tasks = [asyncio.create_task(_every(job, uow, replica, ready)) for job in scheduler.jobs(uow)]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
