"""The schedule's loop (api/periodic.py): period boundaries, and a failing job runs on."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from api import periodic
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import scheduler


def test_the_next_wake_up_is_just_after_the_next_period_boundary():
    margin = periodic.BOUNDARY_MARGIN_SECONDS

    assert periodic.seconds_to_next_period(60, 120.0) == pytest.approx(60 + margin)
    assert periodic.seconds_to_next_period(60, 150.5) == pytest.approx(29.5 + margin)


def test_a_failing_job_keeps_its_schedule_and_waits_for_the_database(monkeypatch):
    calls: list[str] = []
    twice = threading.Event()

    def run_once(_uow: UnitOfWork, job: scheduler.Job, replica: str) -> Any:
        calls.append(replica)
        if len(calls) == 2:
            twice.set()
        raise RuntimeError("the job failed")  # logged; the next period runs again

    job = scheduler.Job("flaky", 1, lambda _uow: "")
    monkeypatch.setattr(periodic, "FIRST_RUN_DELAY_SECONDS", 0)
    monkeypatch.setattr(periodic, "seconds_to_next_period", lambda _interval, _now: 0.05)
    monkeypatch.setattr(scheduler, "jobs", lambda _uow: [job])
    monkeypatch.setattr(scheduler, "run_once", run_once)
    ready = {"now": False}

    async def serve() -> None:
        async with periodic.scheduled_jobs(UnitOfWork(None, Settings()), lambda: ready["now"]):  # type: ignore[arg-type]
            await asyncio.sleep(0.3)  # not ready: nothing runs
            assert calls == []
            ready["now"] = True
            while not twice.is_set():
                await asyncio.sleep(0.01)

    asyncio.run(asyncio.wait_for(serve(), timeout=30))

    assert len(calls) >= 2 and calls[0] == scheduler.replica_name()
