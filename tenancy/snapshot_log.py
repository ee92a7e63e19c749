"""The fabric's snapshot log: one row per committed change of its digest (see SnapshotRecord).

Written by the commit gate in every change's own transaction, so the history holds exactly the
committed, verified states; the same rule backfilled the log from the audit log (migration 0013).
"""

from __future__ import annotations

from sqlalchemy import ScalarSelect, func
from sqlalchemy import select as core_select
from sqlalchemy.orm import Mapped
from sqlmodel import Session, col, select

from tenancy import models as m
from tenancy.uow import Tx


def record(tx: Tx, fabric: m.Fabric, entry: m.AuditEntry) -> m.SnapshotRecord:
    """The fabric's newest history row after the audited change `entry`, added if it is new."""
    newest = latest(tx.session, m.pk(fabric))
    if newest is not None and newest.digest == entry.digest_after:
        return newest
    row = m.SnapshotRecord(
        fabric_id=m.pk(fabric),
        digest=entry.digest_after or "",
        audit_index=entry.index,
        created_at=entry.time,
    )
    tx.session.add(row)
    tx.session.flush()
    return row


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
