"""The verdict warmer: a changed fabric's whole verdict, computed off the request path.

After a change commits, the fabric's whole verdict is computed in the background, so that the
next reader (the console's isolation matrix, GET verification) finds it in the read cache
instead of paying a whole verification (3.45 s on the 100k-port benchmark
fabric).

One worker thread per app, started and stopped by the app's lifespan. A committed mutation on
this replica (a 2xx answer to POST, PUT, PATCH or DELETE) wakes it; a slow poll
(`POLL_SECONDS`) catches changes made elsewhere (the CLI, another replica). Woken, it waits
until no change came for `DEBOUNCE_SECONDS` (so a sustained stream of changes is not slowed
by verdicts that would be stale at once), asks tenancy which fabrics' current states have no cached
verdict (tenancy/gate/verdict_warmth.py: one query and a look-up per fabric), and computes those one
at a time: each stale fabric once per sweep, for its newest state. A change arriving during a
computation only makes it sweep again afterwards. A failure is logged and retried at the next
wake; nothing a request does waits for the warmer (a reader of the state being computed joins
that computation through the cache's single flight instead of starting its own).

ISOFABRIC_VERDICT_WARM (tenancy/store/settings.py) turns it off. On in-memory SQLite (one connection
shared by every thread) it never starts: its transactions would interleave with the requests'.
On PostgreSQL the read cache is shared by replicas (tenancy/record/read_cache_store.py): each
replica warms, and a replica whose sweep finds the verdict another one stored only loads it into
memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.limits import COLLECTOR_PAUSE
from api.request_observer import MUTATING
from tenancy.gate import verdict_warmth
from tenancy.store.uow import UnitOfWork

log = logging.getLogger(__name__)
# A sweep waits for this long a pause in the changes (a client's burst is swept once, after it).
DEBOUNCE_SECONDS = 0.25
# The safety net for changes this replica did not answer (the CLI, other replicas).
POLL_SECONDS = 30.0
# Shutdown waits this long for a computation in progress (a whole 100k-port fabric: ~3 s).
STOP_TIMEOUT_SECONDS = 30.0

Compute = Callable[[UnitOfWork, str], None]


class VerdictWarmer:
    """The worker thread; `poke()` after a change, `start()` and `stop()` from the lifespan."""

    def __init__(
        self,
        uow: UnitOfWork,
        ready: Callable[[], bool],
        *,
        debounce: float = DEBOUNCE_SECONDS,
        poll: float = POLL_SECONDS,
    ) -> None:
        self.uow, self.ready, self.debounce, self.poll = uow, ready, debounce, poll
        self.compute: Compute = verdict_warmth.warm_verdict
        self.warmed = 0  # computations that succeeded
        self.failed = 0  # sweeps or computations that raised (each one logged)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._working = False
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> bool:
        """Whether a sweep is due or running (false once every known stale verdict is warm)."""
        return self._wake.is_set() or self._working

    def poke(self) -> None:
        """A change committed: sweep soon (after the debounce). Never blocks."""
        self._wake.set()

    def start(self) -> None:
        """Start the worker (a first sweep follows at once: states committed while stopped)."""
        self._stop.clear()
        self._wake.set()
        self._thread = threading.Thread(target=self._run, name="verdict-warmer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """Stop the worker; wait for a computation in progress (at most `timeout` seconds)."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():  # a daemon thread: it cannot hold the process up
                log.warning("the verdict warmer was still computing after %.0f s", timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll)
            self._working = True
            try:
                if self._quiet() and self.ready():
                    self._sweep()
            finally:
                self._working = False

    def _quiet(self) -> bool:
        """Wait until no change came for `debounce` seconds; False if stopping meanwhile.

        While changes keep coming (a client's burst, or concurrent clients' sustained load)
        nothing is computed: a verdict would be stale before it was done, and computing it would
        take a core and the interpreter's lock from the changes themselves.
        """
        while not self._stop.is_set():
            self._wake.clear()  # a poke from here on restarts the wait or, later, sweeps again
            if not self._wake.wait(self.debounce):
                return not self._stop.is_set()
        return False

    def _sweep(self) -> None:
        try:
            stale = verdict_warmth.stale_verdicts(self.uow)
        except Exception:  # a busy or unavailable database: the next wake tries again
            self.failed += 1
            log.exception("the verdict warmer could not read the fabrics' states")
            return
        for fabric in stale:
            if self._stop.is_set():
                return
            self._warm(fabric)

    def _warm(self, fabric: str) -> None:
        start = time.perf_counter()
        try:
            # A whole fabric's objects: automatic collections over them would stop every
            # thread of the server, the event loop included (api/limits.py CollectorPause).
            with COLLECTOR_PAUSE.held():
                self.compute(self.uow, fabric)
        except Exception:  # never fatal: readers compute it themselves, the next wake retries
            self.failed += 1
            log.exception("warming the verdict of fabric %s failed; retried later", fabric)
            return
        self.warmed += 1
        log.info("verdict of fabric %s warmed in %.3f s", fabric, time.perf_counter() - start)

    def collect(self) -> Iterable[Metric]:
        """The warmer's metrics (a prometheus_client collector; docs/operators/monitoring.md)."""
        runs = CounterMetricFamily(
            "isofabric_verdict_warm_runs",
            "Whole verdicts the verdict warmer computed (warmed) or failed to (failed)",
            labels=["outcome"],
        )
        runs.add_metric(["warmed"], self.warmed)
        runs.add_metric(["failed"], self.failed)
        yield runs
        yield GaugeMetricFamily(
            "isofabric_verdict_warm_pending",
            "1 while the verdict warmer has a sweep due or running, else 0",
            value=int(self.pending),
        )


class PokeOnChange:
    """ASGI middleware: poke the warmer after each successful mutating request."""

    def __init__(self, app: ASGIApp, warmer: VerdictWarmer) -> None:
        self.app = app
        self.warmer = warmer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; once answered with a 2xx or 3xx to a mutation, poke."""
        if scope["type"] != "http" or scope["method"] not in MUTATING:
            await self.app(scope, receive, send)
            return
        status = 500

        async def watching_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        await self.app(scope, receive, watching_send)
        if status < 400:  # the handler's transaction committed before it answered
            self.warmer.poke()


def install_verdict_warmer(app: FastAPI) -> VerdictWarmer | None:
    """Run a verdict warmer in `app`'s lifespan (None when off or on in-memory SQLite).

    Call it before `install_metrics` (whose middleware must stay the outermost one): the
    warmer's metrics join the app's registry when the app starts.
    """
    uow: UnitOfWork = app.state.uow
    if not uow.settings.verdict_warm or not verdict_warmth.background_safe(uow):
        return None
    warmer = VerdictWarmer(uow, lambda: bool(app.state.database.prepared))
    app.state.verdict_warmer = warmer
    app.add_middleware(PokeOnChange, warmer=warmer)
    inner = app.router.lifespan_context
    registered = False

    @asynccontextmanager
    async def lifespan(started: FastAPI) -> AsyncIterator[None]:
        nonlocal registered
        metrics = getattr(started.state, "metrics", None)
        if metrics is not None and not registered:
            metrics.registry.register(warmer)
            registered = True
        warmer.start()
        try:
            async with inner(started):
                yield
        finally:
            await run_in_threadpool(warmer.stop)

    app.router.lifespan_context = lifespan
    return warmer
