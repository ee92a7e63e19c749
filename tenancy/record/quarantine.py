"""Quarantine: a released identifier is kept from other owners while a deploy target may hold it.

A released value stays a ``quarantined`` segment row, which no other owner can take (its own
owner takes it back first: tenancy/record/pools.py), until:

- on a fabric with deploy targets, every target has read back the snapshot that released it
  (`Segment.drain_snapshot_id`) or a later one, the rule node drains follow
  (tenancy/usecases/drains.py calls `end_read_back` after each report). A value no target can
  have received is free at its release: no snapshot holding it was handed to a target (its
  signed manifest fetched, or a report naming it: `SnapshotRecord.fetched_at`);
- on a fabric without targets, where nothing observes what is deployed, once
  `Settings.pkey_quarantine_seconds` have passed since the release (`expire_by_time`).

The commit gate stamps the snapshots (`stamp_segments`): the first one holding a value, and the
one releasing it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import bindparam, delete, exists, or_, update
from sqlalchemy import select as core_select
from sqlalchemy.sql.dml import ReturningDelete
from sqlmodel import Session, col

from tenancy import models as m
from tenancy.models.columns import UtcDateTime
from tenancy.store.db import expire_loaded, forget_loaded
from tenancy.store.tx_memo import memo, pending
from tenancy.store.uow import Tx

QUARANTINED = "quarantined"


def release_segment(tx: Tx, segment: m.Segment) -> None:
    """Release one value: quarantined, or free at once if no deploy target can hold it."""
    segment.state = QUARANTINED
    segment.released_at = tx.now
    tx.session.add(segment)
    tx.session.flush()  # `_settle` is a Core statement
    _settle(tx, segment.fabric_id, [m.pk(segment)])


def release_unused(tx: Tx, fabric_id: int, *, tenant_id: int) -> None:
    """Release the tenant's identifiers on the fabric if no allocation is left.

    Its additional partitions' P_Keys stay: those partitions outlive its nodes.

    One prepared UPDATE, whose condition is that the tenant holds no unreleased allocation on
    the fabric (the caller holds the fabric's lock: none can appear meanwhile); then `_settle`.
    """
    tx.session.flush()  # a Core statement: pending segment changes first
    values = {"fabric": fabric_id, "tenant": tenant_id, "now": tx.now}
    released = _ids(tx.session.connection().execute(_QUARANTINE_UNUSED, values))
    if released:
        _settle(tx, fabric_id, released)


def _settle(tx: Tx, fabric_id: int, released: Sequence[int]) -> None:
    """After a release: free what no target can hold, and owe the rest its release snapshot.

    On a fabric without targets nothing is free at once: what is deployed there (by hand) is not
    observed, so the quarantine period applies.
    """
    forget_pool_memos(tx.session)
    connection = tx.session.connection()
    freed: set[int] = set()
    if connection.execute(_HAS_TARGETS, {"fabric": fabric_id}).first() is not None:
        values = {"ids": list(released), "fabric": fabric_id}
        freed = set(_ids(connection.execute(_FREE_UNDEPLOYED, values)))
    forget_loaded(tx.session, m.Segment, freed)
    expire_loaded(tx.session, m.Segment, set(released) - freed)
    if freed:
        memo(tx.session, "pool_hints").clear()  # values below a pool's resume point are free
    if len(freed) < len(released):
        pending(tx.session, "segments").add(fabric_id)


def note_taken(session: Session, fabric_id: int) -> None:
    """A value was taken in this transaction: the commit gate stamps its first snapshot."""
    pending(session, "segments").add(fabric_id)


def forget_pool_memos(session: Session) -> None:
    """A release: what this transaction knew of expiries and new owners' holdings may be stale.

    With no quarantine a released value is free again at this transaction's next take, and a
    tenant created in it no longer holds everything it took (tenancy/record/pools.py).
    """
    memo(session, "quarantine_expired").clear()
    memo(session, "new_owners").clear()
    memo(session, "held_by_new").clear()


def stamp_segments(session: Session, fabric_id: int, snapshot_id: int) -> None:
    """Values taken or released in this transaction learn snapshot `snapshot_id`.

    It is the first snapshot holding a taken value, and the first without a released one. A
    transaction that took and released nothing on the fabric has nothing to stamp.
    """
    owed = pending(session, "segments")
    if fabric_id not in owed:
        return
    values = {"fabric": fabric_id, "snapshot": snapshot_id}
    # Through the ORM session, so that Segment rows it already holds see the stamps too.
    session.execute(_STAMP_TAKEN, values)
    session.execute(_STAMP_RELEASED, values)
    owed.discard(fabric_id)


def expire_by_time(tx: Tx, fabric_id: int) -> None:
    """Free the fabric's quarantined values whose period has passed, once per transaction.

    Only where no target reads back: the fabric has none. The cutoff is fixed by the
    transaction's clock, so a second pass
    can only find what this transaction released since the first (a release clears the memo);
    other transactions release a fabric's values only under its lock, which a taker holds.
    """
    expired = memo(tx.session, "quarantine_expired")
    if fabric_id in expired:
        return
    cutoff = tx.now - timedelta(seconds=tx.settings.pkey_quarantine_seconds)
    values = {"fabric": fabric_id, "cutoff": cutoff}
    freed = _ids(tx.session.connection().execute(_EXPIRE_BY_TIME, values))
    expired[fabric_id] = True
    if freed:
        forget_loaded(tx.session, m.Segment, freed)
        memo(tx.session, "pool_hints").clear()  # values below a pool's resume point are free


def end_read_back(session: Session, fabric_id: int, read_back: int | None) -> int:
    """Free the quarantined values whose release every deploy target has read back.

    `read_back` is the snapshot every target enforces, as node drains compute it (None: not
    every target has read back one yet). Returns how many values turned free.
    """
    if read_back is None:
        return 0
    session.flush()  # a Core statement: pending segment changes first
    values = {"fabric": fabric_id, "read_back": read_back}
    freed = _ids(session.connection().execute(_END_READ_BACK, values))
    forget_loaded(session, m.Segment, freed)
    if freed:
        memo(session, "pool_hints").clear()
    return len(freed)


def _ids(rows: Iterable[Sequence[Any]]) -> list[int]:
    """The segment ids a ``RETURNING id`` statement answered (never null: primary keys)."""
    return [int(row[0] or 0) for row in rows]


def _fetched_since(since: Any) -> Any:
    """Whether a snapshot of the segment's fabric from `since` on was handed to a target."""
    record = m.SnapshotRecord
    return exists().where(
        col(record.fabric_id) == col(m.Segment.fabric_id),
        col(record.id) >= since,
        col(record.fetched_at).is_not(None),
    )


def _free_undeployed() -> ReturningDelete[int | None]:
    """`_settle`'s DELETE of released values no target can hold, built once."""
    never_committed = col(m.Segment.snapshot_id).is_(None)
    return (
        delete(m.Segment)
        .where(
            col(m.Segment.id).in_(bindparam("ids", expanding=True)),
            col(m.Segment.fabric_id) == bindparam("fabric"),
            or_(never_committed, ~_fetched_since(col(m.Segment.snapshot_id))),
        )
        .returning(col(m.Segment.id))
    )


_HAS_TARGETS = (
    core_select(col(m.DeployTarget.id))
    .where(col(m.DeployTarget.fabric_id) == bindparam("fabric"))
    .limit(1)
)
_FREE_UNDEPLOYED = _free_undeployed()
_IN_QUARANTINE = (
    col(m.Segment.fabric_id) == bindparam("fabric"),
    col(m.Segment.state) == QUARANTINED,
)
_END_READ_BACK = (
    delete(m.Segment)
    .where(*_IN_QUARANTINE, col(m.Segment.drain_snapshot_id) <= bindparam("read_back"))
    .returning(col(m.Segment.id))
)
_NO_TARGETS = ~exists().where(col(m.DeployTarget.fabric_id) == bindparam("fabric"))
_EXPIRE_BY_TIME = (
    delete(m.Segment)
    .where(
        *_IN_QUARANTINE,
        col(m.Segment.released_at) <= bindparam("cutoff", type_=UtcDateTime()),
        _NO_TARGETS,
    )
    .returning(col(m.Segment.id))
)
_STAMP_TAKEN = (
    update(m.Segment)
    .where(col(m.Segment.fabric_id) == bindparam("fabric"), col(m.Segment.snapshot_id).is_(None))
    .values(snapshot_id=bindparam("snapshot"))
)
_STAMP_RELEASED = (
    update(m.Segment)
    .where(*_IN_QUARANTINE, col(m.Segment.drain_snapshot_id).is_(None))
    .values(drain_snapshot_id=bindparam("snapshot"))
)
_QUARANTINE_UNUSED = (
    update(m.Segment)
    .where(
        col(m.Segment.fabric_id) == bindparam("fabric"),
        col(m.Segment.tenant_id) == bindparam("tenant"),
        col(m.Segment.state) == "active",
        # A tenant's additional partitions outlive its nodes (tenancy/record/partitions.py).
        col(m.Segment.purpose) != "partition",
        ~exists().where(
            col(m.Allocation.tenant_id) == bindparam("tenant"),
            col(m.Allocation.fabric_id) == bindparam("fabric"),
            col(m.Allocation.released_at).is_(None),
        ),
    )
    .values(state=QUARANTINED, released_at=bindparam("now", type_=UtcDateTime()))
    .returning(col(m.Segment.id))
)
