"""Timings the system of record reports: how long each verification of a fabric took.

tenancy speaks no monitoring protocol (the import-linter contracts in pyproject.toml keep
prometheus_client out of it): whoever wants the timings installs a plain callback for a database
engine (the API does, api/metrics.py), and the commit gate (tenancy/change_check.py) and the
full re-verification (tenancy/full_check.py) call it once per verification. Without a callback
nothing is measured. Callbacks are held per engine, weakly keyed: an app's callback lives as long
as its engine, and two apps on one engine (tests) both hear its verifications.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from weakref import WeakKeyDictionary

from sqlalchemy import Engine
from sqlmodel import Session

log = logging.getLogger(__name__)

# (fabric name, check, seconds); check is one of CHECKS.
VerificationObserver = Callable[[str, str, float], None]
# The gate's two paths (tenancy/change_check.py) and the periodic reference (tenancy/full_check).
INCREMENTAL, WHOLE, FULL = "incremental", "whole", "full"
CHECKS = (INCREMENTAL, WHOLE, FULL)

_observers: WeakKeyDictionary[Engine, list[VerificationObserver]] = WeakKeyDictionary()
_lock = threading.Lock()


def observe_verifications(engine: Engine, observer: VerificationObserver) -> None:
    """Call `observer` after every verification run on `engine` (fabric, check, seconds)."""
    with _lock:
        _observers.setdefault(engine, []).append(observer)


@contextmanager
def timed_verification(session: Session, fabric: str, check: str) -> Iterator[None]:
    """Time the block as a `check` of `fabric` and report it to the engine's observers.

    A verification that raises is reported too (it took that long). An observer that fails is
    logged and never fails the change it measured.
    """
    bind = session.get_bind()
    observers = _observers.get(getattr(bind, "engine", bind))  # type: ignore[arg-type]
    if not observers:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - start
        for observer in tuple(observers):
            try:
                observer(fabric, check, seconds)
            except Exception:  # a metrics bug must not refuse a change
                log.exception("a verification observer failed")
