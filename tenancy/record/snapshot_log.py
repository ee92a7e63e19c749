"""The fabric's snapshot log: one row per committed change of its digest (see SnapshotRecord).

Each row names the policy version in force when it was committed, and when a deploy target
could first have received it (`mark_fetched`).

Written by the commit gate in every change's own transaction, so the history holds exactly the
committed, verified states; the same rule backfilled the log from the audit log (migration 0013).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import Integer, ScalarSelect, String, bindparam, exists, func, insert
from sqlalchemy import select as core_select
from sqlalchemy.orm import Mapped, make_transient_to_detached
from sqlalchemy.sql.dml import ReturningInsert
from sqlmodel import Session, col, select

from tenancy import models as m
from tenancy.models.columns import UtcDateTime
from tenancy.record.policy_store import current_policy
from tenancy.store.uow import Tx


def record(tx: Tx, fabric: m.Fabric, entry: m.AuditEntry) -> m.SnapshotRecord:
    """The fabric's newest history row after the audited change `entry`, added if it is new."""
    row = m.SnapshotRecord(
        fabric_id=m.pk(fabric),
        digest=entry.digest_after or "",
        audit_index=entry.index,
        created_at=entry.time,
        policy_version=current_policy(tx.session).version,
    )
    # One statement: the row goes in unless the fabric's newest row has this digest already.
    added = tx.session.connection().execute(_ADD_IF_NEW, row.model_dump(exclude={"id"}))
    row.id = added.scalar()
    if row.id is None:
        newest = latest(tx.session, m.pk(fabric))
        assert newest is not None  # the newest row has the digest
        return newest
    make_transient_to_detached(row)  # written: the session tracks it as loaded
    tx.session.add(row)
    return row


def _add_if_new() -> ReturningInsert[int | None]:
    """`record`'s INSERT ... SELECT ... WHERE NOT EXISTS, built once (the row's columns bound)."""
    newest = core_select(func.max(col(m.SnapshotRecord.id))).where(
        col(m.SnapshotRecord.fabric_id) == bindparam("fabric_id")
    )
    same = core_select(col(m.SnapshotRecord.id)).where(
        col(m.SnapshotRecord.id) == newest.scalar_subquery(),
        col(m.SnapshotRecord.digest) == bindparam("digest"),
    )
    rows = core_select(
        bindparam("fabric_id", type_=Integer()),
        bindparam("digest", type_=String()),
        bindparam("audit_index", type_=Integer()),
        bindparam("created_at", type_=UtcDateTime()),
        bindparam("policy_version", type_=Integer()),
    ).where(~exists(same))
    columns = ["fabric_id", "digest", "audit_index", "created_at", "policy_version"]
    statement = insert(m.SnapshotRecord).from_select(columns, rows)
    return statement.returning(col(m.SnapshotRecord.id))


_ADD_IF_NEW = _add_if_new()


def latest(session: Session, fabric_id: int) -> m.SnapshotRecord | None:
    """The fabric's newest history row (None before its first change)."""
    query = select(m.SnapshotRecord).where(col(m.SnapshotRecord.id) == _newest_id(fabric_id))
    return session.exec(query).first()


def newest_digest() -> ScalarSelect[str]:
    """`latest`'s digest as a scalar subquery correlated with the outer query's `Fabric` row.

    ``select(Fabric, newest_digest()).where(...)`` reads a fabric and the digest of its current
    committed state in one indexed query (NULL before the fabric's first change).
    """
    return (
        core_select(col(m.SnapshotRecord.digest))
        .where(col(m.SnapshotRecord.id) == _newest_id(col(m.Fabric.id)))
        .correlate(m.Fabric)
        .scalar_subquery()
    )


def _newest_id(fabric_id: int | Mapped[int | None]) -> ScalarSelect[int]:
    # max(id) is one probe of ix_snapshot_record_fabric_newest; PostgreSQL plans ORDER BY id
    # DESC LIMIT 1 as a backward scan of the whole table's primary key, filtering by fabric.
    newest = core_select(func.max(col(m.SnapshotRecord.id)))
    return (
        newest.where(col(m.SnapshotRecord.fabric_id) == fabric_id)
        .correlate(m.Fabric)
        .scalar_subquery()
    )


def newest_with(session: Session, fabric_id: int, digest: str) -> m.SnapshotRecord | None:
    """The newest history row with `digest` (a state can recur: allocate, then release)."""
    query = select(m.SnapshotRecord).where(
        m.SnapshotRecord.fabric_id == fabric_id, m.SnapshotRecord.digest == digest
    )
    return session.exec(query.order_by(col(m.SnapshotRecord.id).desc())).first()


def mark_fetched(session: Session, rows: Iterable[m.SnapshotRecord | None], now: datetime) -> None:
    """Say that a deploy target may hold these snapshots from now on (first time only).

    Called when a signed manifest is served and when a target reports one: an identifier a
    fetched snapshot holds is quarantined at its release, not freed at once
    (tenancy/record/quarantine.py).
    """
    for row in rows:
        if row is not None and row.fetched_at is None:
            row.fetched_at = now
            session.add(row)
