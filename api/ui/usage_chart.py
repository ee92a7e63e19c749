"""The tenant page's usage chart: node-hours per day over the last 30 days, by QoS class.

The numbers come from the use case behind GET /v1/usage/records (tenancy/usecases/usage.py,
granularity ``day``, the tenant filter): its fabric-capacity records are summed per (day, QoS class)
across fabrics. The chart itself is drawn in the browser by Chart.js (static/tenant.js) from the
JSON this module builds, embedded in the page as a non-executed ``application/json`` block (CSP).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from tenancy.store.pagination import MAX_LIMIT
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import usage

DAYS = 30
CAPACITY = "fabric-capacity"  # node and port records; "service-access" ones carry no nodes


def usage_window(now: datetime, days: int = DAYS) -> tuple[datetime, list[str]]:
    """The first instant of the window (UTC midnight `days - 1` days ago) and its day labels.

    Today is the last day (still growing), so the window is [start, now).
    """
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = today - timedelta(days=days - 1)
    return start, [(start + timedelta(days=i)).date().isoformat() for i in range(days)]


def usage_chart(uow: UnitOfWork, *, tenant: str) -> dict[str, Any]:
    """The chart's data: day labels, one series of node-hours per QoS class, and the unit.

    Blocking (database reads). The window ends at the unit of work's clock, like the API's.

    Raises:
        NotFoundError: no tenant has this name.
    """
    start, labels = usage_window(uow.clock())
    records: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:  # every page: a tenant has a handful of records per day
        page = usage.usage_records(
            uow, since=start, tenant=tenant, granularity="day", limit=MAX_LIMIT, cursor=cursor
        )
        records.extend(r.model_dump(mode="json") for r in page.data)
        cursor = page.next
        if cursor is None:
            return chart_data(records, labels)


def chart_data(records: list[dict[str, Any]], labels: list[str]) -> dict[str, Any]:
    """Sum the records' `node_hours` per (day, QoS class) into one series per class.

    `records` are usage record documents (policies.usage.record_document); hours are decimal
    strings there, summed exactly and rounded to 0.01 only at the end.
    """
    totals: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for record in records:
        if record["resource_type"] != CAPACITY:
            continue
        day = str(record["period_start"])[:10]
        totals[str(record["qos_class"])][day] += Decimal(str(record["node_hours"]))
    series = [
        {
            "qos_class": qos,
            "node_hours": [float(round(by_day.get(day, Decimal(0)), 2)) for day in labels],
        }
        for qos, by_day in sorted(totals.items())
    ]
    return {"unit": "node-hours", "labels": labels, "series": series}
