"""Timings the system of record reports: how long each verification of a fabric took.

tenancy speaks no monitoring protocol (the import-linter contracts in pyproject.toml keep
prometheus_client out of it): whoever wants the timings installs a plain callback for a database
engine (the API does, api/metrics.py), and the commit gate (tenancy/gate/change_check.py) and the
full re-verification (tenancy/gate/full_check.py) call it once per verification. Without a callback
nothing is measured. Callbacks are held per engine and weakly, the engine and the callback alike:
an observer lives as long as whoever installed it keeps it (the API's app holds its metrics),
so the many apps a test session builds on one engine do not pile up; the live ones on an engine
all hear its verifications.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlmodel import Session

log = logging.getLogger(__name__)

# (fabric name, check, seconds); check is one of CHECKS.
VerificationObserver = Callable[[str, str, float], None]
# The gate's two paths (tenancy/gate/change_check.py) and the periodic reference
# (tenancy/full_check).
INCREMENTAL, WHOLE, FULL = "incremental", "whole", "full"
CHECKS = (INCREMENTAL, WHOLE, FULL)

_Ref = Callable[[], VerificationObserver | None]
_observers: weakref.WeakKeyDictionary[Engine, list[_Ref]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def observe_verifications(engine: Engine, observer: VerificationObserver) -> None:
    """Call `observer` after every verification run on `engine` (fabric, check, seconds).

    Held weakly (a bound method through `weakref.WeakMethod`): the caller keeps it alive.
    """
    ref: _Ref = (
        weakref.WeakMethod(observer) if inspect.ismethod(observer) else weakref.ref(observer)
    )
    with _lock:
        live = [r for r in _observers.get(engine, []) if r() is not None]
        _observers[engine] = [*live, ref]


def _live(engine: object) -> list[VerificationObserver]:
    with _lock:
        refs = _observers.get(engine, [])  # type: ignore[call-overload]
        return [observer for observer in (r() for r in refs) if observer is not None]


@contextmanager
def timed_verification(session: Session, fabric: str, check: str) -> Iterator[None]:
    """Time the block as a `check` of `fabric` and report it to the engine's observers.

    A verification that raises is reported too (it took that long). An observer that fails is
    logged and never fails the change it measured.
    """
    bind = session.get_bind()
    observers = _live(getattr(bind, "engine", bind))
    if not observers:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        _notify(observers, fabric, check, time.perf_counter() - start)


def report_verification(engine: Engine, fabric: str, check: str, seconds: float) -> None:
    """Report to `engine`'s observers a verification timed in another process.

    A heavy request's use case runs in a worker process with an engine of its own
    (api/heavy_processes.py): its timings are reported back to the serving process's engine.
    """
    _notify(_live(engine), fabric, check, seconds)


def _notify(observers: list[VerificationObserver], fabric: str, check: str, seconds: float) -> None:
    for observer in observers:
        try:
            observer(fabric, check, seconds)
        except Exception:  # a metrics bug must not refuse a change
            log.exception("a verification observer failed")
