"""What one transaction may remember between its statements.

A change set runs thousands of operations in one transaction, and each would otherwise look up
the same fabric, take the same lock again, re-read the audit log's tail and rescan a pool from
its first value. A memo keeps such facts in the session's `info` for the current transaction
only: it is dropped when the transaction commits or rolls back, and on any rollback to a
savepoint (what the memo learned after the savepoint may describe rows that are gone).

Only facts that no other transaction can change while this one holds its locks belong here
(see each user's comment); everything else is read from the database every time.

`pending` is the other kind: work this transaction still owes (e.g. nodes it started draining).
It survives rollbacks to savepoints (work done before the savepoint is still owed; work undone
by it is then owed in vain, which is harmless) and ends with the transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

_KEY = "isofabric.tx_memo"
_PENDING = "isofabric.tx_pending"


def memo(session: Session, name: str) -> dict[Any, Any]:
    """The dict `name` of the session's current transaction (created empty on first use)."""
    memos: dict[str, dict[Any, Any]] = session.info.setdefault(_KEY, {})
    return memos.setdefault(name, {})


def pending(session: Session, name: str) -> set[Any]:
    """The set `name` of work the session's transaction owes (created empty on first use)."""
    owed: dict[str, set[Any]] = session.info.setdefault(_PENDING, {})
    return owed.setdefault(name, set())


def forget(session: Session) -> None:
    """Drop everything the session's transaction remembered."""
    session.info.pop(_KEY, None)


@event.listens_for(Session, "after_commit")
def _after_commit(session: Session) -> None:
    forget(session)


@event.listens_for(Session, "after_soft_rollback")
def _after_rollback(session: Session, _previous: SessionTransaction) -> None:
    # Fired by every rollback, a savepoint's included.
    forget(session)


@event.listens_for(Session, "after_transaction_end")
def _after_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # the transaction itself, not a savepoint
        forget(session)
        session.info.pop(_PENDING, None)
