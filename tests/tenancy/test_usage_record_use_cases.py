"""Usage records and events without HTTP: metered from the recorded intervals on a literal
timeline, hourly and daily, as FOCUS CSV and as a resumable feed of final hourly events."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Any

import pytest

from policies.errors import InvalidValueError, NotFoundError
from policies.usage import FINALITY_GRACE_SECONDS, FOCUS_COLUMNS
from tenancy.schemas import UsageRecordView
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, shared_services, usage
from tests.builders import FakeClock, Onboarded

FROM = datetime(2026, 3, 1, tzinfo=UTC)


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 3, 1, hour, minute, tzinfo=UTC)


@pytest.fixture
def timeline(uow: UnitOfWork, onboarded: Onboarded, clock: FakeClock) -> UnitOfWork:
    """12:00 onboarded (acme: gpu0001-2 with 2 ports each + storage; research and globex 2 nodes
    each); 12:30 acme releases its nodes; 13:15 acme's grant is revoked; now is 14:20."""
    clock.advance(30 * 60)
    allocations.release_allocation(
        uow, tenant_name="acme", allocation_id=onboarded.allocation_ids["acme"]
    )
    clock.advance(45 * 60)
    shared_services.revoke_grant(uow, tenant_name="acme", grant_id=onboarded.grant_ids["acme"])
    clock.advance(65 * 60)
    return uow


def brief(record: UsageRecordView) -> tuple[Any, ...]:
    return (
        record.period_start,
        record.resource_type,
        record.service,
        record.node_seconds,
        record.port_seconds,
        record.access_seconds,
        record.final,
    )


def test_a_tenants_hourly_records_are_exact_for_a_literal_timeline(timeline):
    page = usage.usage_records(timeline, since=FROM, tenant="acme")

    assert page.complete_until == at(14)
    assert (page.count, page.next) == (3, None)
    assert sorted(brief(r) for r in page.data) == [
        ("2026-03-01T12:00:00Z", "fabric-capacity", None, 3600, 7200, 0, True),
        ("2026-03-01T12:00:00Z", "service-access", "storage", 0, 0, 3600, True),
        ("2026-03-01T13:00:00Z", "service-access", "storage", 0, 0, 900, True),
    ]


def test_a_capacity_record_carries_the_tenants_billing_account_and_class(timeline):
    page = usage.usage_records(timeline, since=FROM, tenant="acme")

    capacity = next(r for r in page.data if r.resource_type == "fabric-capacity")
    assert capacity.model_dump(exclude={"id"}) == {
        "billing_account": "acme",
        "tenant": "acme",
        "fabric": "ib-east",
        "resource_type": "fabric-capacity",
        "qos_class": "gold",
        "service": None,
        "partition": "default",
        "origin": None,
        "period_start": "2026-03-01T12:00:00Z",
        "period_end": "2026-03-01T13:00:00Z",
        "node_seconds": 3600,
        "port_seconds": 7200,
        "access_seconds": 0,
        "node_hours": "1.000000",
        "port_hours": "2.000000",
        "access_hours": "0.000000",
        "final": True,
    }
    assert capacity.id.startswith("usg_")


def test_the_current_hour_is_reported_up_to_now_and_not_final(timeline):
    page = usage.usage_records(timeline, since=FROM, tenant="research")

    assert [brief(r) for r in page.data] == [
        ("2026-03-01T12:00:00Z", "fabric-capacity", None, 7200, 14400, 0, True),
        ("2026-03-01T13:00:00Z", "fabric-capacity", None, 7200, 14400, 0, True),
        ("2026-03-01T14:00:00Z", "fabric-capacity", None, 2400, 4800, 0, False),
    ]


def test_daily_records_sum_the_day_so_far(timeline):
    page = usage.usage_records(
        timeline,
        since=FROM,
        until=datetime(2026, 3, 2, tzinfo=UTC),
        tenant="research",
        granularity="day",
    )

    [record] = page.data
    assert brief(record) == (
        "2026-03-01T00:00:00Z",
        "fabric-capacity",
        None,
        16800,
        33600,
        0,
        False,
    )
    assert (record.period_end, record.node_hours) == ("2026-03-02T00:00:00Z", "4.666667")


def test_a_range_ending_in_the_past_holds_only_that_range(timeline):
    page = usage.usage_records(timeline, since=FROM, until=at(13), tenant="acme")

    assert {r.period_start for r in page.data} == {"2026-03-01T12:00:00Z"}


def test_the_records_page_by_period_and_id_and_cover_every_tenant(timeline):
    everything = usage.usage_records(timeline, since=FROM, limit=1000)
    pages, cursor = [], None
    while True:
        page = usage.usage_records(timeline, since=FROM, limit=2, cursor=cursor)
        pages.append(page)
        cursor = page.next
        if cursor is None:
            break

    assert [r for p in pages for r in p.data] == everything.data
    assert {p.count for p in pages} == {everything.count}
    assert {r.tenant for r in everything.data} == {"acme", "research", "globex"}
    keys = [(r.period_start, r.id) for r in everything.data]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_the_csv_has_exactly_the_focus_columns_and_a_row_per_quantity(timeline):
    text = usage.usage_csv(timeline, since=FROM, tenant="acme")

    header, *rows = list(csv.reader(io.StringIO(text, newline="")))
    assert text.count("\r\n") == 5
    assert header == list(FOCUS_COLUMNS)
    assert sorted(
        (r[header.index("ConsumedUnit")], r[header.index("ConsumedQuantity")]) for r in rows
    ) == [
        ("access-hour", "0.250000"),
        ("access-hour", "1.000000"),
        ("node-hour", "1.000000"),
        ("port-hour", "2.000000"),
    ]
    assert {r[header.index("BillingAccountId")] for r in rows} == {"acme"}


@pytest.mark.parametrize(
    ("since", "until", "granularity", "parameter"),
    [
        (at(12), at(12), "hour", "from"),
        (at(13), at(12), "hour", "from"),
        (datetime(2026, 1, 1, tzinfo=UTC), FROM, "hour", "to"),
        (datetime(2024, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC), "day", "to"),
        (FROM, None, "week", "granularity"),
    ],
    ids=["empty", "backwards", "59-days-hourly", "2-years-daily", "weekly"],
)
def test_a_range_the_meter_does_not_serve_is_refused_naming_the_parameter(
    timeline, since, until, granularity, parameter
):
    with pytest.raises(InvalidValueError) as refused:
        usage.usage_records(timeline, since=since, until=until, granularity=granularity)

    assert refused.value.extensions["parameter"] == parameter


def test_a_59_day_range_of_daily_records_is_served(timeline):
    page = usage.usage_records(timeline, since=datetime(2026, 1, 1, tzinfo=UTC), granularity="day")

    assert page.data
    assert all(r.period_start.endswith("T00:00:00Z") for r in page.data)


def test_records_of_an_unknown_tenant_are_not_found(timeline):
    with pytest.raises(NotFoundError, match="initech"):
        usage.usage_records(timeline, since=FROM, tenant="initech")


@pytest.mark.parametrize(
    "text", ["yesterday", "2026-03-01T00:00:00", "2026-03-01", "0001-01-01T00:00:00Z"]
)
def test_a_time_without_an_offset_or_out_of_range_is_refused(text):
    with pytest.raises(InvalidValueError) as refused:
        usage.parse_time(text, "from")

    assert refused.value.extensions == {"parameter": "from"}


def test_an_offset_time_is_read_as_utc():
    assert usage.parse_time("2026-03-01T13:00:00+01:00", "from") == at(12)


# --- the event feed ------------------------------------------------------------------------------


def test_events_are_the_final_hourly_records_as_cloud_events_in_order(timeline):
    page = usage.usage_events(timeline, cursor=None)

    finals = [r for r in usage.usage_records(timeline, since=FROM).data if r.final]
    assert [e.data for e in page.data] == finals
    for event in page.data:
        assert (event.specversion, event.type) == ("1.0", "isofabric.usage.hourly.v1")
        assert (event.id, event.subject) == (event.data.id, event.data.tenant)
    again = usage.usage_events(timeline, cursor=page.next)
    assert (again.data, again.next) == ([], page.next)


def test_an_hour_becomes_an_event_once_it_and_the_finality_grace_have_passed(timeline, clock):
    page = usage.usage_events(timeline, cursor=None)
    clock.advance(40 * 60 + FINALITY_GRACE_SECONDS - 1)  # 15:04:59, still within the grace
    within = usage.usage_events(timeline, cursor=page.next)
    clock.advance(1)

    later = usage.usage_events(timeline, cursor=within.next)

    assert (within.data, within.next) == ([], page.next)
    assert {e.data.period_start for e in later.data} == {"2026-03-01T14:00:00Z"}
    assert {e.data.tenant for e in later.data} == {"research", "globex"}


def test_the_event_feed_starts_with_a_usable_cursor_when_empty(uow):
    page = usage.usage_events(uow, cursor=None)

    assert page.data == [] and page.next
    assert usage.usage_events(uow, cursor=page.next).data == []


def test_a_cursor_that_is_not_ours_is_refused(uow):
    with pytest.raises(InvalidValueError, match="cursor"):
        usage.usage_events(uow, cursor="bm90LWpzb24")
