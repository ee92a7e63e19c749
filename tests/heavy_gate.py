"""A gate and jobs for heavy worker processes (api/heavy_processes.py), for their tests.

Module-level, so that a worker process can import them (tests/api/test_heavy_processes.py).
A test cannot patch a worker process: `ProcessGate.prepare` is run by each new worker
(`HeavyProcesses.prepare`) and wraps a use case there. While the gate is held, each call of it
writes its process id to a file ``arrived-*`` and waits for the gate to open (at most
GATE_TIMEOUT_SECONDS, so that a broken test cannot hang the suite), then runs the use case.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from policies.errors import NotFoundError
from tenancy.store.observers import WHOLE, timed_verification
from tenancy.store.uow import UnitOfWork

GATE_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.01


class ProcessGate:
    """The test's side of the gate: hold it, wait for arrivals, open it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def prepare(self, module: str, name: str) -> Callable[[], None]:
        """What a worker runs at start: wrap `module`.`name` with this gate."""
        return partial(wrap, str(self.directory), module, name)

    def hold(self) -> None:
        """Calls that arrive from now on wait."""
        for path in self.directory.iterdir():
            path.unlink()
        (self.directory / "hold").touch()

    def arrivals(self, count: int) -> list[int]:
        """The process ids of the first `count` held calls, once they have arrived."""
        deadline = time.monotonic() + GATE_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            arrived = sorted(self.directory.glob("arrived-*"))
            if len(arrived) >= count:
                return [int(path.read_text()) for path in arrived[:count]]
            time.sleep(POLL_SECONDS)
        raise AssertionError(f"{count} held call(s) expected, {len(arrived)} arrived")

    def open(self) -> None:
        """Let the held calls go on (and the next ones pass)."""
        (self.directory / "hold").unlink(missing_ok=True)
        (self.directory / "open").touch()


def wrap(directory: str, module: str, name: str) -> None:
    """In a worker: make `module`.`name` wait at the gate in `directory` while it is held."""
    target = importlib.import_module(module)
    real = getattr(target, name)
    gate = Path(directory)

    def held(*args: Any, **kwargs: Any) -> Any:
        if (gate / "hold").exists():
            name = f"{os.getpid()}-{time.monotonic_ns()}"
            (gate / f"writing-{name}").write_text(str(os.getpid()))
            os.replace(gate / f"writing-{name}", gate / f"arrived-{name}")  # read whole or not
            deadline = time.monotonic() + GATE_TIMEOUT_SECONDS
            while not (gate / "open").exists() and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
        return real(*args, **kwargs)

    setattr(target, name, held)


def timed_job(uow: UnitOfWork, fabric: str) -> int:
    """A job that times a verification of `fabric` in its process, as the commit gate does."""
    with uow.transaction(read_only=True) as tx, timed_verification(tx.session, fabric, WHOLE):
        return os.getpid()


def failing_job(uow: UnitOfWork, detail: str) -> None:
    """A job that fails as a use case does."""
    raise NotFoundError(detail, resource="fabric")


def pid_job(uow: UnitOfWork) -> int:
    """A job that answers the process it ran in."""
    return os.getpid()
