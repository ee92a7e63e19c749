"""The unit of work every use case runs in: one transaction, one clock reading, the settings.

A use case either commits everything it changed or nothing: any exception (including a refused,
isolation-breaking change) rolls the whole transaction back. The unit of work knows no feature
built on it: the layer that owns one registers it as a hook. A request's `first_write` runs at
the start of its first write transaction and commits with it (an Idempotency-Key's reservation,
tenancy/record/idempotency.py); a `rehearsal` wraps every write transaction of a what-if request
and rolls it back (tenancy/gate/what_if.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session

from policies.errors import ConflictError, DatabaseUnavailableError
from tenancy.store.db import session_scope, storage_error_detail
from tenancy.store.read_cache import ReadCache
from tenancy.store.settings import Settings

log = logging.getLogger("isofabric")
# SQLSTATEs of a transaction PostgreSQL rolled back to resolve a conflict with another one:
# serialization_failure and deadlock_detected (PostgreSQL, Appendix A, class 40).
_ROLLED_BACK_FOR_A_CONFLICT = {"40001", "40P01"}

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """The production `Clock`: the current time, UTC-aware."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who asks: recorded with every mutation in the audit log."""

    name: str
    role: str
    tenant: str | None = None
    # The agent role: the fabric and deploy target its token acts for; the orchestrator role:
    # its fabric (no target).
    fabric: str | None = None
    deploy_target: str | None = None


# The command line and in-process callers act as the operator of the local installation.
SYSTEM = Principal("system", "operator")


@dataclass(frozen=True, slots=True)
class Tx:
    """What a use case sees inside its transaction."""

    session: Session
    now: datetime
    settings: Settings
    principal: Principal = SYSTEM
    request_id: str | None = None


class FirstWrite(Protocol):
    """Work a request's first write transaction does before anything else, and only once.

    It commits with that transaction or not at all; later transactions of the request skip it.
    """

    @property
    def done(self) -> bool:
        """True once a transaction that ran `write` has committed."""

    def write(self, tx: Tx) -> None:
        """Do the work inside `tx` (raising rolls the transaction back)."""

    def commit(self) -> None:
        """The transaction that ran `write` committed."""


# Wraps a what-if request's write transaction: the block runs, is reported, and rolled back.
Rehearsal = Callable[[Tx], AbstractContextManager[None]]


@dataclass(frozen=True, slots=True)
class UnitOfWork:
    """Factory of transactions; the clock is injectable so tests control time.

    `first_write` is registered per request (the Idempotency-Key reservation of a keyed request,
    api/deps.py); `rehearsal` makes every write transaction a what-if that rolls back
    (``?dry_run=true``; tenancy/gate/what_if.py). `reads` is the read cache of verdicts and
    artifacts (tenancy/store/read_cache.py); the per-request copies of the app's unit of work
    share it.
    """

    engine: Engine
    settings: Settings
    clock: Clock = system_clock
    principal: Principal = SYSTEM
    request_id: str | None = None
    first_write: FirstWrite | None = None
    rehearsal: Rehearsal | None = None
    reads: ReadCache = field(default_factory=ReadCache, compare=False, repr=False)

    @property
    def dry_run(self) -> bool:
        """Whether write transactions are rehearsed and rolled back (a what-if request)."""
        return self.rehearsal is not None

    @contextmanager
    def transaction(self, *, read_only: bool = False) -> Iterator[Tx]:
        """Open one transaction: it commits when the block exits and rolls back if it raises.

        The clock is read once, so everything the use case stamps carries the same time.

        Args:
            read_only: for use cases that only read (authentication first): the transaction
                takes no write lock, so it neither waits for a writer nor holds one up (on
                SQLite every other transaction locks the database at BEGIN); PostgreSQL refuses
                any write in it.

        Raises:
            ConflictError: the database refused a write on a constraint, typically because a
                concurrent writer took the same name, node or key first; nothing was changed and
                a retry may pass.
            IdempotencyInProgressError: another request holds this request's Idempotency-Key.
            DatabaseUnavailableError: the database did not answer or failed the transaction
                operationally; whether it committed is unknown only if the commit itself failed.
        """
        # A what-if runs no first-write work, but its write transaction waits for the write lock
        # like any other: a busy database is the same 503, not a 500.
        rehearsal = None if read_only else self.rehearsal
        first = None if read_only or rehearsal is not None else self._pending_first_write()
        with (
            _storage_errors(self.request_id),
            session_scope(self.engine, read_only=read_only) as session,
        ):
            tx = Tx(session, self.clock(), self.settings, self.principal, self.request_id)
            if rehearsal is not None:
                with rehearsal(tx):
                    yield tx
                return
            if first is not None:
                first.write(tx)
            yield tx
        if first is not None:
            first.commit()  # later transactions of the request must not run it again

    def _pending_first_write(self) -> FirstWrite | None:
        first = self.first_write
        return first if first is not None and not first.done else None


@contextmanager
def _storage_errors(request_id: str | None) -> Iterator[None]:
    """The database's failures in the block as domain errors: a lost race, an outage.

    The driver's text (server addresses, process ids, lock keys) goes to the server's log under
    the request id, never to the client: the problem's detail is one of two stable sentences.
    """
    try:
        yield
    except IntegrityError as error:
        # The unique constraints are the backstop against concurrent writers: a request that
        # lost such a race changed nothing and may simply be retried.
        raise ConflictError(
            "the request conflicts with a concurrent change (a name, node or key was taken "
            "meanwhile); nothing was changed, retry it"
        ) from error
    except OperationalError as error:
        # The database went away or refused the work (connection lost, server shutting down,
        # SQLite busy past its timeout): a 503 the client may retry, not a 500.
        if _write_in_read_only(error):
            raise
        log.warning("database error (request %s): %s", request_id, storage_error_detail(error))
        raise DatabaseUnavailableError(_unavailable(error)) from error


def _unavailable(error: OperationalError) -> str:
    if getattr(error.orig, "sqlstate", None) in _ROLLED_BACK_FOR_A_CONFLICT:
        return (
            "the database rolled this request back to resolve a conflict with a concurrent "
            "one; nothing was changed, retry it"
        )
    return "the database is unavailable; retry later"


def _write_in_read_only(error: OperationalError) -> bool:
    """SQLite's ``query_only`` refusing a write in a read-only transaction (tenancy/store/db.py).

    PostgreSQL reports that as an InternalError; on SQLite it is an OperationalError, but a bug
    in the caller, not an outage: it stays what it was.
    """
    return "attempt to write a readonly database" in str(error.orig)
