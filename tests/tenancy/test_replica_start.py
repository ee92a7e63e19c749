"""Several replicas on one database (issue 14, item 4): starting, checkpoints, scheduled jobs.

Replicas started at the same moment on a fresh PostgreSQL database all migrate it (the
migration lock; before, one failed on ``alembic_version``'s unique key); replicas asked for a
checkpoint at once store one per log size and answer each caller; a scheduled job's period is
claimed by exactly one replica, and its failure is recorded without stopping the schedule.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from tenancy.record import audit_log
from tenancy.schemas import TenantCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import scheduler, tenants
from tenancy.usecases.bootstrap import database_revision, head_revision, prepare_database
from tests.builders import FakeClock, rows
from tests.keys import key_settings, register_key

REPLICAS = 6
ROUNDS = 5


def at_once(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run `work(n)` in `count` threads released together; each result or raised exception."""
    start = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(n: int) -> None:
        start.wait()
        try:
            results[n] = work(n)
        except Exception as error:  # reported to the test, which asserts there is none
            results[n] = error

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


@pytest.fixture
def fresh_postgres() -> Iterator[str]:
    """A new, empty (never migrated) PostgreSQL database; dropped afterwards."""
    base = os.environ.get("ISOFABRIC_TEST_POSTGRES_URL", "").strip()
    if not base:
        pytest.skip("ISOFABRIC_TEST_POSTGRES_URL is not set")
    url = make_url(base).set(drivername="postgresql")
    name = f"isofabric_race_{uuid.uuid4().hex[:12]}"
    admin = url.render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def prepare_when_released(url: str, start: Any, outcome: Any) -> None:
    """One replica's start: its own engine, released with the others, then migrate and seed."""
    engine = make_engine(url)
    start.wait()
    try:
        prepare_database(engine)
        outcome.put("ok")
    except Exception as error:  # reported to the test
        outcome.put(f"{type(error).__name__}: {error}")
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_replicas_starting_together_all_migrate_one_fresh_database(fresh_postgres):
    # Processes, as replicas are: Alembic's migration context is global to a process.
    context = multiprocessing.get_context("fork")
    start, outcome = context.Barrier(REPLICAS), context.Queue()
    replicas = [
        context.Process(target=prepare_when_released, args=(fresh_postgres, start, outcome))
        for _ in range(REPLICAS)
    ]
    for process in replicas:
        process.start()
    results = [outcome.get(timeout=120) for _ in replicas]
    for process in replicas:
        process.join(timeout=30)

    assert results == ["ok"] * REPLICAS
    engine = make_engine(fresh_postgres)
    try:
        assert database_revision(engine) == head_revision()
        assert rows(engine, "SELECT count(*) FROM alembic_version") == [(1,)]
        names = rows(engine, "SELECT name FROM qos_class ORDER BY name")
        assert len(names) == len(set(names)) == len(tenants.SEEDED_QOS_CLASSES)
    finally:
        engine.dispose()


@pytest.fixture
def shared_engine(shared_url: str) -> Iterator[Engine]:
    engine = make_engine(shared_url)
    prepare_database(engine)
    register_key(engine)
    try:
        yield engine
    finally:
        engine.dispose()


def replica(engine: Engine, clock: Callable[[], datetime] | None = None) -> UnitOfWork:
    """A unit of work as one replica has it: its own engine's pool on the shared database."""
    url = engine.url.render_as_string(hide_password=False)
    settings = key_settings(Settings(database_url=url))
    own = make_engine(url)
    return UnitOfWork(own, settings, clock) if clock else UnitOfWork(own, settings)


def test_replicas_asked_for_a_checkpoint_at_once_store_one_per_size(shared_engine):
    replicas = [replica(shared_engine) for _ in range(REPLICAS)]
    for size in range(1, ROUNDS + 1):  # a race per round: the loser used to get a 409
        tenants.create_tenant(replicas[0], spec=TenantCreate(name=f"t{size}", kind="internal"))

        answers = at_once(REPLICAS, lambda n: audit_log.checkpoint(replicas[n]))

        assert not [a for a in answers if isinstance(a, Exception)], answers
        assert {(a.size, a.note) for a in answers} == {(size, answers[0].note)}
    assert rows(shared_engine, "SELECT size FROM audit_checkpoint ORDER BY size") == [
        (size,) for size in range(1, ROUNDS + 1)
    ]
    for uow in replicas:
        uow.engine.dispose()


def counting_job(counter: list[int], *, fail: bool = False) -> scheduler.Job:
    def work(_uow: UnitOfWork) -> str:
        counter.append(1)
        if fail:
            raise RuntimeError("the fabric is on fire")
        return f"run {len(counter)}"

    return scheduler.Job("test-job", 60, work)


def test_one_replica_claims_each_period_of_a_job(shared_engine):
    clock = FakeClock(datetime(2026, 12, 3, 12, 0, 30, tzinfo=UTC))
    replicas = [replica(shared_engine, clock) for _ in range(REPLICAS)]
    ran: list[int] = []
    job = counting_job(ran)

    first = at_once(REPLICAS, lambda n: scheduler.run_once(replicas[n], job, f"replica-{n}"))
    clock.advance(60)  # the next period
    second = at_once(REPLICAS, lambda n: scheduler.run_once(replicas[n], job, f"replica-{n}"))

    assert not [r for r in first + second if isinstance(r, Exception)]
    assert len(ran) == 2
    assert [r.outcome for r in first + second if r is not None] == ["ok", "ok"]
    runs = scheduler.runs(replicas[0], "test-job")
    assert [r.period_start for r in runs] == [
        datetime(2026, 12, 3, 12, 0, tzinfo=UTC),
        datetime(2026, 12, 3, 12, 1, tzinfo=UTC),
    ]
    assert scheduler.latest_runs(replicas[0])[0].period_start == runs[-1].period_start
    for uow in replicas:
        uow.engine.dispose()


def test_a_failed_run_is_recorded_and_the_next_period_runs_again(shared_engine):
    clock = FakeClock(datetime(2026, 12, 3, 12, 0, 30, tzinfo=UTC))
    uow = replica(shared_engine, clock)
    ran: list[int] = []

    with pytest.raises(RuntimeError, match="on fire"):
        scheduler.run_once(uow, counting_job(ran, fail=True), "replica-a")
    assert scheduler.run_once(uow, counting_job(ran), "replica-a") is None  # period taken
    clock.advance(60)
    later = scheduler.run_once(uow, counting_job(ran), "replica-b")

    runs = scheduler.runs(uow, "test-job")
    assert [(r.outcome, r.replica) for r in runs] == [("failed", "replica-a"), ("ok", "replica-b")]
    assert runs[0].detail == "RuntimeError: the fabric is on fire"
    assert later is not None and later.detail == "run 2"
    uow.engine.dispose()


def test_runs_older_than_the_retention_are_pruned_when_a_period_is_claimed(shared_engine):
    clock = FakeClock(datetime(2026, 12, 3, 12, 0, 30, tzinfo=UTC))
    uow = replica(shared_engine, clock)
    ran: list[int] = []
    scheduler.run_once(uow, counting_job(ran), "replica-a")

    clock.advance((scheduler.RUN_RETENTION + timedelta(minutes=5)).total_seconds())
    scheduler.run_once(uow, counting_job(ran), "replica-a")

    assert len(scheduler.runs(uow, "test-job")) == 1
    uow.engine.dispose()


def test_the_checkpoint_job_signs_the_log_and_the_settings_choose_the_jobs(shared_engine):
    uow = replica(shared_engine)
    tenants.create_tenant(uow, spec=TenantCreate(name="acme", kind="internal"))
    jobs = {job.name: job for job in scheduler.jobs(uow)}

    run = scheduler.run_once(uow, jobs["audit-checkpoint"], "replica-a")

    assert set(jobs) == {"full-verification", "audit-checkpoint"}
    assert run is not None and run.detail == "checkpoint of 1 entries"
    assert rows(shared_engine, "SELECT size FROM audit_checkpoint") == [(1,)]
    off = UnitOfWork(uow.engine, Settings(checkpoint_interval_seconds=0))
    assert [job.name for job in scheduler.jobs(off)] == ["full-verification"]
    uow.engine.dispose()
