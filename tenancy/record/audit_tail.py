"""The audit log's end as one transaction sees it: the next index, and each fabric's last digest.

Appends take the log's lock (PostgreSQL: a transaction-scoped advisory lock; SQLite serialises
writers anyway) before they read the end, and keep it until commit: from then on nobody else
appends, so the transaction reads the end once (one statement, with the first fabric's last
digest) and follows its own appends in memory (`tenancy.store.tx_memo`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ScalarSelect, bindparam, text
from sqlalchemy import select as core_select
from sqlalchemy.orm import Session
from sqlmodel import col

from tenancy import models as m
from tenancy.store.tx_memo import memo
from tenancy.store.uow import Tx

# First key of pg_advisory_xact_lock(int, int) for the log ("AU").
AUDIT_LOCK = (0x4155, 0)


@dataclass
class Tail:
    """The log's end: the next position, and each fabric's digest after its last change.

    `last`: the newest entry's index and time; `digests`: per fabric, the index and
    `digest_after` of its newest entry that has one (what the fabric's next change starts from).
    """

    last: tuple[int, datetime] | None
    digests: dict[str, tuple[int, str]] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)

    def next_position(self, now: datetime) -> tuple[int, datetime]:
        """The next index, and a time not before the previous entry's.

        Transactions read the clock when they start but append in lock order, so on
        PostgreSQL a change that started earlier could be logged later: times stay monotonic
        in index order.
        """
        if self.last is None:
            return 0, now
        index, time = self.last
        return index + 1, max(now, time)

    def last_digest(self, session: Session, fabric: str | None) -> str | None:
        """The fabric's digest after its previous audited change (None: no fabric, none yet)."""
        if fabric is None:
            return None
        if fabric not in self.read:
            row = session.connection().execute(_FABRIC_DIGEST, {"fabric": fabric}).first()
            self._learn(fabric, None if row is None else (row[0], str(row[1])))
        known = self.digests.get(fabric)
        return known[1] if known is not None else None

    def appended(self, entry: m.AuditEntry) -> None:
        """Take in an entry this transaction appended (or restated)."""
        if self.last is None or entry.index >= self.last[0]:
            self.last = (entry.index, entry.time)
        fabric, digest = entry.fabric, entry.digest_after
        if fabric is not None and digest is not None:
            known = self.digests.get(fabric)
            if known is None or entry.index >= known[0]:
                self.digests[fabric] = (entry.index, digest)

    def _learn(self, fabric: str, stored: tuple[int, str] | None) -> None:
        # An entry this transaction appended is newer than anything stored.
        if stored is not None and fabric not in self.digests:
            self.digests[fabric] = stored
        self.read.add(fabric)


def tail(tx: Tx, fabric: str | None) -> Tail:
    """The transaction's view of the log's end; the first call takes the lock and reads it."""
    remembered = memo(tx.session, "audit")
    known = remembered.get("tail")
    if isinstance(known, Tail):
        return known
    connection = tx.session.connection()
    if tx.session.get_bind().dialect.name == "postgresql":
        connection.execute(_LOCK, {"a": AUDIT_LOCK[0], "b": AUDIT_LOCK[1]})
    index, time, fabric_index, digest = connection.execute(_END, {"fabric": fabric}).one()
    found = remembered["tail"] = Tail(None if index is None else (index, _aware(time)))
    if fabric is not None:
        found._learn(fabric, None if fabric_index is None else (fabric_index, digest))
    return found


def restated(session: Session, entry: m.AuditEntry) -> None:
    """An entry appended earlier in the session's transaction got new digests."""
    known = memo(session, "audit").get("tail")
    if isinstance(known, Tail):
        known.appended(entry)


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes; every stored time is UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _newest(column: Any) -> ScalarSelect[Any]:
    """The newest entry's `column`, as a scalar subquery."""
    query = core_select(column).order_by(col(m.AuditEntry.index).desc()).limit(1)
    return query.scalar_subquery()


# Built once: the log's end and one fabric's last digest in one statement (four index probes).
_LOCK = text("SELECT pg_advisory_xact_lock(:a, :b)")
_FABRIC_DIGEST = (
    core_select(col(m.AuditEntry.index), col(m.AuditEntry.digest_after))
    .where(
        col(m.AuditEntry.fabric) == bindparam("fabric"), col(m.AuditEntry.digest_after).is_not(None)
    )
    .order_by(col(m.AuditEntry.index).desc())
    .limit(1)
)
_END = core_select(
    _newest(col(m.AuditEntry.index)),
    _newest(col(m.AuditEntry.time)),
    _FABRIC_DIGEST.with_only_columns(col(m.AuditEntry.index)).scalar_subquery(),
    _FABRIC_DIGEST.with_only_columns(col(m.AuditEntry.digest_after)).scalar_subquery(),
)
