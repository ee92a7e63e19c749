"""Usage metering: intervals recorded with every change, records computed on the fly.

The records are computed from the intervals by the pure engine (policies/usage/).

Recording: every allocation opens one interval per node (with its port count), every grant one
interval for the service; release, revoke and offboarding close them at the transaction's time.
All of it happens in the transaction of the change, so a refused change records nothing. An
interval's origin is its allocation's (``orchestrator`` when the UFM-compatible API allocated),
so the records of such nodes say so.

Reading: records for a time range (JSON pages or CSV) and the feed of final hourly records as
CloudEvents behind a forward-only cursor. Nothing is stored: an hour that ended before
`complete_until` can no longer change (intervals only ever start or end at "now").
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Insert, Integer, String, bindparam, func, insert, literal, update
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from policies import usage as engine
from policies.errors import InvalidValueError
from tenancy import models as m
from tenancy.models.columns import UtcDateTime
from tenancy.record.node_states import HeldNode
from tenancy.record.partitions import usage_partitions
from tenancy.schemas import UsageEventsPage, UsageRecordsPage
from tenancy.store.db import expire_loaded, fetch_all
from tenancy.store.lookups import tenant_named
from tenancy.store.pagination import DEFAULT_LIMIT
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.technology import technology_of
from tenancy.usecases.usage_cursor import (
    MAX_YEAR,
    MIN_YEAR,
    decode_cursor,
    encode_cursor,
    record_key,
)

MAX_RANGE = {"hour": timedelta(days=31), "day": timedelta(days=366)}
EVENT_WINDOW = timedelta(days=1)
HOUR = timedelta(hours=1)

# --- recording (called by allocations, services and offboarding, inside their transaction) ----


def _qos_name(session: Session, tenant: m.Tenant) -> str:
    qos = session.get(m.QosClass, tenant.qos_class_id)
    assert qos is not None  # a foreign key guarantees it
    return qos.name


def open_node_intervals(
    tx: Tx, tenant: m.Tenant, fabric: m.Fabric, nodes: Sequence[HeldNode], allocation_id: str
) -> None:
    """One open interval per node the allocation gives the tenant, with the node's port count."""
    if not nodes:
        return
    statement = _OPEN_NODE_INTERVALS[technology_of(fabric.kind).port_table.__tablename__]
    values = {
        "tenant": m.pk(tenant),
        "fabric": m.pk(fabric),
        "billing_account": tenant.billing_account or tenant.name,
        "qos_class": tenant.qos_class_id,
        "allocation": allocation_id,
        "now": tx.now,
        "nodes": [node.id for node in nodes],
    }
    tx.session.connection().execute(statement, values)


def _open_node_intervals(port_table: type[m.Port] | type[m.Nic]) -> Insert:
    """`open_node_intervals`'s statement for one technology's port table, built once.

    One INSERT ... SELECT: the port counts and the QoS class name are read by the statement
    itself, so an allocation of any size costs one round trip.
    """
    ports = core_select(func.count()).where(col(port_table.node_id) == col(m.Node.id))
    qos = core_select(col(m.QosClass.name)).where(col(m.QosClass.id) == bindparam("qos_class"))
    rows = (
        core_select(
            bindparam("tenant", type_=Integer()),
            bindparam("fabric", type_=Integer()),
            bindparam("billing_account", type_=String()),
            qos.scalar_subquery(),
            literal("node"),
            col(m.Node.name),
            ports.scalar_subquery(),
            bindparam("allocation", type_=String()),
            bindparam("now", type_=UtcDateTime()),
        )
        .where(col(m.Node.id).in_(bindparam("nodes", expanding=True)))
        .order_by(col(m.Node.name))
    )
    columns = ["tenant_id", "fabric_id", "billing_account", "qos_class", "resource_type"]
    columns += ["resource", "ports", "allocation_id", "started_at"]
    return insert(m.UsageInterval).from_select(columns, rows)


_OPEN_NODE_INTERVALS = {
    table.__tablename__: _open_node_intervals(table) for table in (m.Port, m.Nic)
}


def open_grant_interval(
    tx: Tx, tenant: m.Tenant, fabric: m.Fabric, service: m.Service, grant_id: str
) -> None:
    """The open interval of a tenant's access to a shared service."""
    tx.session.add(
        m.UsageInterval(
            tenant_id=m.pk(tenant),
            fabric_id=m.pk(fabric),
            billing_account=tenant.billing_account or tenant.name,
            qos_class=_qos_name(tx.session, tenant),
            resource_type="service",
            resource=service.name,
            ports=0,
            grant_id=grant_id,
            started_at=tx.now,
        )
    )
    tx.session.flush()


def _close(tx: Tx, *conditions: Any) -> None:
    for interval in tx.session.exec(
        select(m.UsageInterval).where(col(m.UsageInterval.ended_at).is_(None), *conditions)
    ):
        interval.ended_at = tx.now
        tx.session.add(interval)
    tx.session.flush()


def close_allocation_intervals(tx: Tx, allocation_id: str) -> None:
    """End the open intervals of the allocation's nodes at the transaction's time (release)."""
    tx.session.flush()  # a Core statement: pending interval rows first
    values = {"allocation": allocation_id, "now": tx.now}
    closed = [row[0] for row in tx.session.connection().execute(_CLOSE_ALLOCATION, values)]
    expire_loaded(tx.session, m.UsageInterval, closed)


# Built once: a release ends its intervals with one prepared UPDATE.
_CLOSE_ALLOCATION = (
    update(m.UsageInterval)
    .where(
        col(m.UsageInterval.allocation_id) == bindparam("allocation"),
        col(m.UsageInterval.ended_at).is_(None),
    )
    .values(ended_at=bindparam("now", type_=UtcDateTime()))
    .returning(col(m.UsageInterval.id))
)


def close_grant_interval(tx: Tx, grant_id: str) -> None:
    """End the grant's open interval at the transaction's time (revocation or offboarding)."""
    _close(tx, m.UsageInterval.grant_id == grant_id)


def close_tenant_intervals(tx: Tx, tenant: m.Tenant) -> None:
    """Offboarding: whatever the tenant still holds ends now."""
    _close(tx, m.UsageInterval.tenant_id == tenant.id)


# --- reading ----------------------------------------------------------------------------------


def parse_time(text: str, parameter: str) -> datetime:
    """An RFC 3339 time with an offset (``Z`` or ``+hh:mm``), as UTC; anything else is a 422."""
    try:
        value = datetime.fromisoformat(text)
        if value.tzinfo is None or "T" not in text.upper():
            raise ValueError(text)
        value = value.astimezone(UTC)
    except (ValueError, OverflowError) as error:
        raise InvalidValueError(
            f"'{parameter}' must be an RFC 3339 time with an offset, e.g. 2026-03-01T00:00:00Z",
            parameter=parameter,
        ) from error
    if not MIN_YEAR <= value.year <= MAX_YEAR:
        raise InvalidValueError(
            f"'{parameter}' must be between the years {MIN_YEAR} and {MAX_YEAR}",
            parameter=parameter,
        )
    return value


def _intervals(
    session: Session, since: datetime, until: datetime, tenant_id: int | None = None
) -> list[engine.UsageInterval]:
    """The intervals that overlap [since, until), each with its allocation's origin.

    An allocation's origin is written once, with it (``orchestrator`` when the UFM-compatible
    API made it), so reading it here gives every interval of the allocation the same origin.
    """
    query = (
        core_select(
            m.UsageInterval, col(m.Tenant.name), col(m.Fabric.name), col(m.Allocation.origin)
        )
        .join(m.Tenant, col(m.Tenant.id) == col(m.UsageInterval.tenant_id))
        .join(m.Fabric, col(m.Fabric.id) == col(m.UsageInterval.fabric_id))
        .join(
            m.Allocation,
            col(m.Allocation.id) == col(m.UsageInterval.allocation_id),
            isouter=True,
        )
        .where(
            col(m.UsageInterval.started_at) < until,
            col(m.UsageInterval.ended_at).is_(None) | (col(m.UsageInterval.ended_at) > since),
        )
        .order_by(col(m.UsageInterval.id))
    )
    if tenant_id is not None:
        query = query.where(col(m.UsageInterval.tenant_id) == tenant_id)
    return [
        engine.UsageInterval(
            tenant=tenant,
            billing_account=row.billing_account,
            fabric=fabric,
            qos_class=row.qos_class,
            resource_type=row.resource_type,
            resource=row.resource,
            ports=row.ports,
            start=row.started_at,
            end=row.ended_at,
            origin=origin,
        )
        for row, tenant, fabric, origin in session.execute(query).all()
    ]


def _checked_range(since: datetime, until: datetime, granularity: str) -> None:
    if granularity not in MAX_RANGE:
        raise InvalidValueError("granularity must be 'hour' or 'day'", parameter="granularity")
    if since >= until:
        raise InvalidValueError("'from' must be before 'to'", parameter="from")
    if until - since > MAX_RANGE[granularity]:
        days = MAX_RANGE[granularity].days
        raise InvalidValueError(
            f"a range of {granularity} records spans at most {days} days",
            parameter="to",
            max_days=days,
        )


def _records(
    uow: UnitOfWork, since: datetime, until: datetime | None, tenant: str | None, granularity: str
) -> tuple[list[engine.UsageRecord], datetime]:
    with uow.transaction(read_only=True) as tx:
        end = tx.now if until is None else until
        _checked_range(since, end, granularity)
        tenant_id = None if tenant is None else m.pk(tenant_named(tx.session, tenant))
        # The engine widens the window to whole periods: fetch what overlaps the widened one.
        period = timedelta(seconds=engine.GRANULARITIES[granularity])
        lo = _floor_to(since, period)
        hi = end if end == _floor_to(end, period) else _floor_to(end, period) + period
        intervals = _intervals(tx.session, lo, hi, tenant_id)
        records = engine.meter(
            intervals, since=since, until=end, now=tx.now, granularity=granularity
        )
        named = usage_partitions(tx.session, records)
        return sorted(named, key=record_key), engine.complete_until(tx.now)


def usage_records(
    uow: UnitOfWork,
    *,
    since: datetime,
    until: datetime | None = None,
    tenant: str | None = None,
    granularity: str = "hour",
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> UsageRecordsPage:
    """One page of the usage records of [since, until) (until defaults to now)."""
    records, complete = _records(uow, since, until, tenant, granularity)
    after = decode_cursor(cursor)
    remaining = [r for r in records if after is None or record_key(r) > after]
    page = remaining[:limit]
    more = len(remaining) > limit
    return UsageRecordsPage(
        data=[engine.record_document(r) for r in page],
        count=len(records),
        complete_until=complete,
        next=encode_cursor(record_key(page[-1])) if more and page else None,
    )


def usage_csv(
    uow: UnitOfWork,
    *,
    since: datetime,
    until: datetime | None = None,
    tenant: str | None = None,
    granularity: str = "hour",
) -> str:
    """The records of [since, until) as RFC 4180 CSV with the FOCUS columns."""
    records, _complete = _records(uow, since, until, tenant, granularity)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(engine.FOCUS_COLUMNS), lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(engine.focus_rows(records))
    return out.getvalue()


def _floor_hour(value: datetime) -> datetime:
    return value.replace(minute=0, second=0, microsecond=0)


def _floor_day(value: datetime) -> datetime:
    return value.replace(hour=0, minute=0, second=0, microsecond=0)


def _floor_to(value: datetime, period: timedelta) -> datetime:
    return _floor_hour(value) if period == HOUR else _floor_day(value)


def _first_start(session: Session, at_or_after: datetime | None = None) -> datetime | None:
    query = core_select(func.min(col(m.UsageInterval.started_at)))
    if at_or_after is not None:
        query = query.where(col(m.UsageInterval.started_at) >= at_or_after)
    value = fetch_all(session, query)[0][0]
    if value is None:
        return None
    # SQLite returns aggregates as naive text-parsed datetimes (no column type applies).
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _final_hourly(
    session: Session, after: tuple[datetime, str] | None, limit: int, now: datetime
) -> list[engine.UsageRecord]:
    """Up to `limit` final hourly records after `after`, in (period_start, id) order.

    They are metered one window at a time from the cursor's hour (or the first interval's) up to
    complete_until.
    """
    complete = engine.complete_until(now)
    first = after[0] if after is not None else _first_start(session)
    found: list[engine.UsageRecord] = []
    start = None if first is None else _floor_hour(first)
    while start is not None and start < complete and len(found) < limit:
        end = min(start + EVENT_WINDOW, complete)
        intervals = _intervals(session, start, end)
        if not intervals:  # a gap: jump to the next interval's hour
            following = _first_start(session, end)
            start = None if following is None else _floor_hour(following)
            continue
        records = usage_partitions(
            session, engine.meter(intervals, since=start, until=end, now=now, granularity="hour")
        )
        found += sorted(
            (r for r in records if r.final and (after is None or record_key(r) > after)),
            key=record_key,
        )
        start = end
    return found[:limit]


def usage_events(
    uow: UnitOfWork, *, cursor: str | None, limit: int = DEFAULT_LIMIT
) -> UsageEventsPage:
    """Final hourly records as CloudEvents after `cursor`, in (period_start, id) order.

    `next` is never null (it is `cursor` itself when nothing is new), so a poller resumes from it
    forever and sees each event once.
    """
    after = decode_cursor(cursor)
    with uow.transaction(read_only=True) as tx:
        records = _final_hourly(tx.session, after, limit, tx.now)
    last = record_key(records[-1]) if records else after
    return UsageEventsPage(data=[engine.cloud_event(r) for r in records], next=encode_cursor(last))
