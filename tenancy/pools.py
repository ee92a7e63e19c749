"""Race-free P_Key claims with quarantine.

A claim is a `segment` row; the unique (fabric, kind, value) constraint is the backstop. Two
processes that pick the same free key both INSERT it: the database lets one win and the loser
retries inside a savepoint with a fresh view of the claimed keys (PostgreSQL READ COMMITTED
sees the winner's row once it commits). Released keys stay claimed as ``quarantined`` until the
quarantine has passed, so a key is never handed to a new owner while old configs may still use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, exists, func
from sqlalchemy import select as core_select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from policies.errors import ConflictError, PoolExhaustedError
from policies.infiniband.model import format_pkey
from tenancy import models as m
from tenancy.db import fetch_all
from tenancy.uow import Tx

MAX_CLAIM_ATTEMPTS = 20


@dataclass(frozen=True, slots=True)
class Pool:
    """An identifier pool of a fabric: `kind` names the uniqueness scope, `purpose` the use."""

    kind: str
    purpose: str
    first: int
    last: int
    label: str

    def show(self, value: int) -> str:
        """A value as messages write it: P_Keys in hex (``0x0101``), the rest in decimal."""
        return format_pkey(value) if self.kind == "pkey" else str(value)


def pkey_pool(fabric: m.Fabric) -> Pool:
    """The InfiniBand fabric's P_Key range as a pool (one P_Key per tenant or service)."""
    return Pool("pkey", "pkey", fabric.pkey_first, fabric.pkey_last, "P_Key")


def claim_pkey(
    tx: Tx, fabric: m.Fabric, *, tenant_id: int | None = None, service_id: int | None = None
) -> m.Segment:
    """Claim the lowest free key of the fabric's range for a tenant or a service.

    Raises:
        PoolExhaustedError: every key of the range is active or still quarantined.
    """
    return claim(tx, fabric, pkey_pool(fabric), tenant_id=tenant_id, service_id=service_id)


def claim(
    tx: Tx,
    fabric: m.Fabric,
    pool: Pool,
    *,
    tenant_id: int | None = None,
    service_id: int | None = None,
) -> m.Segment:
    """Claim the lowest free value of `pool` on the fabric for a tenant or a service.

    Raises:
        PoolExhaustedError: every value of the pool is active or still quarantined.
    """
    fabric_id = m.pk(fabric)
    _expire_quarantine(tx, fabric_id)
    for _ in range(MAX_CLAIM_ATTEMPTS):
        value = _lowest_free(tx.session, fabric_id, pool)
        if value is None:
            raise PoolExhaustedError(
                f"no free {pool.label} left in {pool.show(pool.first)}-{pool.show(pool.last)} "
                f"on fabric '{fabric.name}' (released values are quarantined for "
                f"{tx.settings.pkey_quarantine_seconds} s)",
                fabric=fabric.name,
            )
        segment = m.Segment(
            fabric_id=fabric_id,
            kind=pool.kind,
            purpose=pool.purpose,
            value=value,
            tenant_id=tenant_id,
            service_id=service_id,
            created_at=tx.now,
        )
        try:
            with tx.session.begin_nested():
                tx.session.add(segment)
        except IntegrityError:
            continue  # another transaction claimed this value (or this owner's slot) first
        return segment
    raise ConflictError(f"could not claim a {pool.label} under contention; retry the request")


def _lowest_free(session: Session, fabric_id: int, pool: Pool) -> int | None:
    """The pool's lowest value no segment of the fabric holds (active or quarantined), or None.

    Found by the database on the (fabric, kind, value) unique index: the first value, or else
    the lowest claimed value in range whose successor is unclaimed, plus one; claims never read
    every held value into Python.
    """
    same = (col(m.Segment.fabric_id) == fabric_id, col(m.Segment.kind) == pool.kind)
    first = core_select(col(m.Segment.id)).where(*same, col(m.Segment.value) == pool.first)
    if not fetch_all(session, first.limit(1)):
        return pool.first
    successor = aliased(m.Segment)
    gap = core_select(func.min(col(m.Segment.value) + 1)).where(
        *same,
        col(m.Segment.value).between(pool.first, pool.last - 1),
        ~exists().where(
            col(successor.fabric_id) == fabric_id,
            col(successor.kind) == pool.kind,
            col(successor.value) == col(m.Segment.value) + 1,
        ),
    )
    value = fetch_all(session, gap)[0][0]
    return None if value is None else int(value)


def _expire_quarantine(tx: Tx, fabric_id: int) -> None:
    cutoff = tx.now - timedelta(seconds=tx.settings.pkey_quarantine_seconds)
    tx.session.connection().execute(
        delete(m.Segment).where(
            col(m.Segment.fabric_id) == fabric_id,
            col(m.Segment.state) == "quarantined",
            col(m.Segment.released_at) <= cutoff,
        )
    )


def release_segment(tx: Tx, segment: m.Segment) -> None:
    """Put a key into quarantine; it becomes claimable after the quarantine period."""
    segment.state = "quarantined"
    segment.released_at = tx.now
    tx.session.add(segment)


def owned_segments(
    session: Session, fabric_id: int, *, tenant_id: int | None = None, service_id: int | None = None
) -> list[m.Segment]:
    """The active identifiers an owner (tenant or service) holds on a fabric."""
    query = select(m.Segment).where(m.Segment.fabric_id == fabric_id, m.Segment.state == "active")
    if tenant_id is not None:
        query = query.where(m.Segment.tenant_id == tenant_id)
    if service_id is not None:
        query = query.where(m.Segment.service_id == service_id)
    return list(session.exec(query))


def active_segment(
    session: Session, fabric_id: int, *, tenant_id: int | None = None, service_id: int | None = None
) -> m.Segment | None:
    """The owner's one active identifier on an InfiniBand fabric: its P_Key (None before use)."""
    held = owned_segments(session, fabric_id, tenant_id=tenant_id, service_id=service_id)
    return held[0] if held else None
