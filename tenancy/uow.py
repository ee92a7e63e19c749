"""The unit of work every use case runs in: one transaction, one clock reading, the settings.

A use case either commits everything it changed or nothing: any exception (including a refused,
isolation-breaking change) rolls the whole transaction back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine
from sqlmodel import Session

from tenancy.db import session_scope
from tenancy.settings import Settings

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Tx:
    """What a use case sees inside its transaction."""

    session: Session
    now: datetime
    settings: Settings


@dataclass(frozen=True, slots=True)
class UnitOfWork:
    """Factory of transactions; the clock is injectable so tests control time."""

    engine: Engine
    settings: Settings
    clock: Clock = system_clock

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        with session_scope(self.engine) as session:
            yield Tx(session, self.clock(), self.settings)
