"""Heavy requests' work in a few worker processes, where it cannot hold this process's GIL.

Threads do not isolate CPU-bound work in CPython: the GIL runs one thread at a time, a busy
thread hands it over at best every 5 ms (``sys.getswitchinterval()``), and never during one
long C call (``json.loads`` of a whole document, pydantic validating it, a sort of a million
GUIDs). With an auditor's two 32 MiB config audits in worker threads, an operator's GET
/v1/tenants took 2.3 s and /healthz 0.1 s (p99; in processes: 44 ms and 8 ms), two 32 MiB
observations held /healthz 0.2 s (tests/benchmarks/bench_heavy_work.py). So the heavy
routes hand their whole use case, from the raw body to the answer's JSON bytes, to a worker
process: plain data in (the body's bytes, names), a picklable result out, each pickled by the
executor's own threads. The handler awaits the result on the event loop, holding no worker
thread while it waits.

The pool is small (`Settings.heavy_processes`, ISOFABRIC_HEAVY_PROCESSES, default 2), started on
the first heavy request and shut down with the app. Workers are spawned (a fresh interpreter,
never a fork of this multi-threaded process), each opens its own database engine from the
settings and runs at a lower CPU priority (`WORKER_NICENESS`), so on a busy host the serving
process gets a core first. Requests beyond the pool's size wait in its queue, each still holding
its principal's heavy slot (api/limits.py `HeavyWorkLimit`): the per-principal cap is unchanged.

A job runs in a worker with the caller's principal, request id and Idempotency-Key reservation
(the unit of work's `first_write`; its commit is reported back) and the system clock; the
verifications it times are reported to this process's observers (/metrics). It runs in
a worker thread instead, as before, when the pool is off: `heavy_processes` 0 (Settings built in
code, so the many apps a test session builds start no processes), a database another process
cannot open (in-memory SQLite), an app built with another clock, or a dry run (its rehearsal
wraps transactions in this process).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from tenancy.store.db import make_engine
from tenancy.store.observers import observe_verifications, report_verification
from tenancy.store.settings import Settings, shared_between_processes
from tenancy.store.uow import FirstWrite, Principal, UnitOfWork, system_clock

T = TypeVar("T")
# Workers yield the CPU to the serving process (nice 0) whenever both could run.
WORKER_NICENESS = 10
# How often a worker checks that the serving process still runs (a killed one leaves it behind).
ORPHAN_POLL_SECONDS = 0.5
# In a worker process: its own unit of work (`_start_worker`), and the verifications its
# current job timed (fabric, check, seconds), reported back to the serving process's metrics.
_WORKER: dict[str, UnitOfWork] = {}
_TIMINGS: list[tuple[str, str, float]] = []


class WorkerTraceback(Exception):  # noqa: N818 - it is the cause shown, not an error raised
    """Where a job failed in its worker: the cause of the exception raised in its place."""


@dataclass(frozen=True, slots=True)
class _Call:
    """What a worker needs to run a job: the job (a module-level function) and plain data."""

    job: Callable[..., Any]
    args: tuple[Any, ...]
    principal: Principal
    request_id: str | None
    first_write: FirstWrite | None


@dataclass(frozen=True, slots=True)
class _Done:
    """How a job ended in its worker: its result or error, and what the caller must learn."""

    result: Any
    error: Exception | None
    traceback: str
    first_write_committed: bool  # the Idempotency-Key's reservation committed in the worker
    verifications: tuple[tuple[str, str, float], ...]


class HeavyProcesses:
    """The app's worker processes for heavy requests (`run`); `shutdown` from the lifespan."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.settings = uow.settings
        separable = shared_between_processes(uow.settings.database_url)
        separable = separable and uow.clock is system_clock
        self.size = uow.settings.heavy_processes if separable else 0
        # Run in each new worker once it has started: tests hold a job there, at a gate.
        self.prepare: Callable[[], None] | None = None
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    async def run(self, uow: UnitOfWork, job: Callable[..., T], *args: Any) -> T:
        """`job(uow, *args)` in a worker process (a worker thread when off); its result.

        `job` must be a module-level function, and `args`, its result and its exceptions
        picklable. Its exceptions are raised here, caused by a `WorkerTraceback`. The
        verifications it timed reach this process's observers (/metrics), and a reservation it
        committed is marked committed on `uow`'s, as if it had run here.

        Raises:
            BrokenProcessPool: a worker died (killed, out of memory); the next call starts anew.
        """
        if self.size == 0 or uow.rehearsal is not None:
            return await run_in_threadpool(job, uow, *args)
        call = _Call(job, args, uow.principal, uow.request_id, uow.first_write)
        done: _Done = await self._submitted(_run_call, call)
        return _settled(done, uow)  # type: ignore[no-any-return]

    async def compute(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in a worker process (a worker thread when off); its result.

        For a pure function of plain data (no database): a module-level function, its `args`
        and result picklable; its exceptions are raised here.
        """
        if self.size == 0:
            return await run_in_threadpool(function, *args)
        return await self._submitted(function, *args)

    async def _submitted(self, function: Callable[..., T], *args: Any) -> T:
        pool = self._executor()
        try:
            return await asyncio.wrap_future(pool.submit(function, *args))
        except BrokenProcessPool:
            self._discard(pool)
            raise

    def shutdown(self) -> None:
        """Stop the workers (after the jobs they run) and drop the queued ones."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    self.size,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(self.settings, self.prepare),
                )
            return self._pool

    def _discard(self, broken: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is broken:
                self._pool = None
        broken.shutdown(wait=False, cancel_futures=True)


def _settled(done: _Done, uow: UnitOfWork) -> Any:
    """In the serving process: what the job did, as if it had run here; its result."""
    for fabric, check, seconds in done.verifications:
        report_verification(uow.engine, fabric, check, seconds)
    if done.first_write_committed and uow.first_write is not None:
        uow.first_write.commit()
    if done.error is not None:
        raise done.error from WorkerTraceback(done.traceback)
    return done.result


def _start_worker(settings: Settings, prepare: Callable[[], None] | None) -> None:
    """In a new worker process: lower its priority and open its own database engine.

    It also watches the serving process: a worker outlives a killed parent (it holds its own
    end of the queue it waits on), and would go on with a job whose answer nobody awaits.
    """
    watchdog = threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True)
    watchdog.start()
    os.nice(WORKER_NICENESS)
    engine = make_engine(settings.database_url)
    observe_verifications(engine, _timed)
    _WORKER["uow"] = UnitOfWork(engine, settings)
    if prepare is not None:
        prepare()


def _exit_with_parent(parent: int) -> None:
    """In a worker: end the process (its transaction rolls back) once `parent` is gone."""
    while os.getppid() == parent:
        time.sleep(ORPHAN_POLL_SECONDS)
    os._exit(1)


def _timed(fabric: str, check: str, seconds: float) -> None:
    _TIMINGS.append((fabric, check, seconds))


def _run_call(call: _Call) -> _Done:
    """In a worker process: run the job in the worker's unit of work as the caller."""
    _TIMINGS.clear()
    uow = replace(
        _WORKER["uow"],
        principal=call.principal,
        request_id=call.request_id,
        first_write=call.first_write,
    )
    result, error, where = None, None, ""
    try:
        result = call.job(uow, *call.args)
    except Exception as raised:  # raised in the serving process, with this traceback as cause
        error, where = raised, "".join(traceback.format_exception(raised))
    committed = call.first_write is not None and call.first_write.done
    return _Done(result, error, where, committed, tuple(_TIMINGS))


def install_heavy_processes(app: FastAPI) -> HeavyProcesses:
    """Give `app` its worker processes (`app.state.heavy_processes`), stopped by its lifespan."""
    workers = HeavyProcesses(app.state.uow)
    app.state.heavy_processes = workers
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(started: FastAPI) -> AsyncIterator[None]:
        try:
            async with inner(started):
                yield
        finally:
            await run_in_threadpool(workers.shutdown)

    app.router.lifespan_context = lifespan
    return workers
