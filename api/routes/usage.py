"""Routes under /v1/usage: usage records (JSON and FOCUS CSV) and the CloudEvents feed."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response

from api.deps import Listing, Uow, authorized_router
from tenancy.schemas import SLUG_PATTERN, UsageEventsPage, UsageRecordsPage
from tenancy.schemas.common import TIME_TEXT_PATTERN
from tenancy.usecases import usage

router = authorized_router(prefix="/v1/usage", tags=["usage"])

TIME = TIME_TEXT_PATTERN
From = Annotated[
    str,
    Query(
        alias="from",
        pattern=TIME,
        description="Start of the range, RFC 3339 with an offset (e.g. 2026-03-01T00:00:00Z)",
    ),
]
To = Annotated[
    str | None,
    Query(
        pattern=TIME,
        description="End of the range (exclusive), RFC 3339 with an offset; defaults to now",
    ),
]
TenantFilter = Annotated[
    str | None, Query(pattern=SLUG_PATTERN, description="Only this tenant's records (its name)")
]
Granularity = Annotated[
    str,
    Query(
        pattern="^(hour|day)$",
        description="Record period: hour (a range of at most 31 days) or day (at most 366), "
        "periods aligned on UTC",
    ),
]


@router.get("/records")
def list_usage_records(
    uow: Uow,
    listing: Listing,
    from_: From,
    to: To = None,
    tenant: TenantFilter = None,
    granularity: Granularity = "hour",
) -> UsageRecordsPage:
    """Usage records of [from, to) per billing account, tenant, fabric, resource type, QoS class
    and service, sorted by (period_start, id); the current period is included with
    `final: false`. Hourly ranges span at most 31 days, daily ones 366.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    return usage.usage_records(
        uow,
        since=usage.parse_time(from_, "from"),
        until=None if to is None else usage.parse_time(to, "to"),
        tenant=tenant,
        granularity=granularity,
        limit=listing.limit,
        cursor=listing.cursor,
    )


@router.get(
    "/records.csv",
    response_class=Response,
    responses={200: {"content": {"text/csv": {}}, "description": "FOCUS-style CSV"}},
)
def usage_records_csv(
    uow: Uow,
    from_: From,
    to: To = None,
    tenant: TenantFilter = None,
    granularity: Granularity = "hour",
) -> Response:
    """The same records as RFC 4180 CSV whose header is the FOCUS columns."""
    text = usage.usage_csv(
        uow,
        since=usage.parse_time(from_, "from"),
        until=None if to is None else usage.parse_time(to, "to"),
        tenant=tenant,
        granularity=granularity,
    )
    return Response(
        content=text,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="usage.csv"'},
    )


@router.get("/events")
def list_usage_events(uow: Uow, listing: Listing) -> UsageEventsPage:
    """Final hourly usage records as CloudEvents 1.0 (type isofabric.usage.hourly.v1), in
    (period_start, id) order. Resume from `next`: it is never null and stays the same when
    nothing is new, so a poller sees every event exactly once.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    return usage.usage_events(uow, cursor=listing.cursor, limit=listing.limit)
