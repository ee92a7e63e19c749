"""Usage metering: exact hourly/daily split, watermark, deterministic ids and the export shapes."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.errors import InvalidValueError
from policies.usage import (
    FINALITY_GRACE_SECONDS,
    FOCUS_COLUMNS,
    UsageInterval,
    UsageRecord,
    cloud_event,
    complete_until,
    focus_rows,
    hours,
    meter,
    record_document,
)

T0 = datetime(2025, 3, 1, tzinfo=UTC)
H = timedelta(hours=1)


def node(
    start: datetime,
    end: datetime | None,
    *,
    ports: int = 4,
    tenant: str = "acme",
    qos: str = "gold",
    name: str = "n1",
    account: str = "ba-1",
) -> UsageInterval:
    return UsageInterval(
        tenant=tenant,
        billing_account=account,
        fabric="fab1",
        qos_class=qos,
        resource_type="node",
        resource=name,
        ports=ports,
        start=start,
        end=end,
    )


def service(
    start: datetime, end: datetime | None, *, name: str = "storage", tenant: str = "acme"
) -> UsageInterval:
    return UsageInterval(
        tenant=tenant,
        billing_account="ba-1",
        fabric="fab1",
        qos_class="gold",
        resource_type="service",
        resource=name,
        ports=0,
        start=start,
        end=end,
    )


# --- hours() ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0.000000"),
        (1, "0.000278"),  # 0.000277777...
        (5, "0.001389"),  # 0.001388888...
        (9, "0.002500"),  # exact
        (1800, "0.500000"),
        (3600, "1.000000"),
        (3601, "1.000278"),
        (-1, "-0.000278"),
        (36 * 10**20, "1" + "0" * 18 + ".000000"),  # beyond 2**53: still exact
    ],
)
def test_hours_writes_six_decimals(seconds, expected):
    assert hours(seconds) == expected


def _decimal_reference(seconds: int) -> str:
    with localcontext() as ctx:
        ctx.prec = 100
        return str(
            (Decimal(seconds) / Decimal(3600)).quantize(Decimal("0.000001"), ROUND_HALF_EVEN)
        )


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_hours_equals_decimal_half_even_quantize(seconds):
    """Micro-hours = s * 2500 / 9: a true tie (remainder 4.5/9) cannot occur for whole seconds,
    so half-even is checked against the Decimal definition rather than at a literal tie."""
    assert hours(seconds) == _decimal_reference(seconds)


# --- complete_until ---------------------------------------------------------------------------


def test_complete_until_is_the_start_of_the_hour_that_held_now_minus_the_grace():
    now = datetime(2025, 3, 1, 14, 59, 59, 999999, tzinfo=timezone(timedelta(hours=2)))
    assert complete_until(now) == datetime(2025, 3, 1, 12, tzinfo=UTC)
    # Just after the hour, the hour that ended is not final yet: a change stamped before the
    # boundary may still be committing.
    assert complete_until(T0 + timedelta(seconds=1)) == T0 - timedelta(hours=1)
    assert complete_until(T0 + timedelta(minutes=5)) == T0


# --- meter: literal cases ---------------------------------------------------------------------


def test_an_interval_crossing_two_hour_boundaries_splits_exactly():
    start = T0 + timedelta(minutes=30)
    end = T0 + 2 * H + timedelta(minutes=15)
    records = meter([node(start, end, ports=4)], since=T0, until=T0 + 3 * H, now=T0 + 5 * H)

    assert [(r.period_start, r.period_end) for r in records] == [
        (T0, T0 + H),
        (T0 + H, T0 + 2 * H),
        (T0 + 2 * H, T0 + 3 * H),
    ]
    assert [r.node_seconds for r in records] == [1800, 3600, 900]
    assert [r.port_seconds for r in records] == [7200, 14400, 3600]
    assert [r.access_seconds for r in records] == [0, 0, 0]
    assert [r.node_hours for r in records] == ["0.500000", "1.000000", "0.250000"]
    assert all(r.final and r.resource_type == "fabric-capacity" for r in records)
    assert all(r.service is None for r in records)


def test_an_open_interval_is_billed_up_to_now_and_the_current_period_is_not_final():
    now = T0 + H + timedelta(minutes=20, seconds=5, microseconds=700)
    records = meter([node(T0, None, ports=2)], since=T0, until=T0 + 24 * H, now=now)

    assert [r.node_seconds for r in records] == [3600, 1205]
    assert [r.port_seconds for r in records] == [7200, 2410]
    assert [r.final for r in records] == [True, False]


def test_an_interval_ending_after_now_is_clipped_to_now():
    now = T0 + timedelta(minutes=30)
    records = meter([node(T0, T0 + 10 * H)], since=T0, until=T0 + 10 * H, now=now)
    assert [(r.node_seconds, r.final) for r in records] == [(1800, False)]


def test_a_service_grant_gives_access_seconds():
    start = T0 + timedelta(minutes=50)
    records = meter(
        [service(start, start + timedelta(minutes=20))], since=T0, until=T0 + 2 * H, now=T0 + 3 * H
    )

    assert [(r.resource_type, r.service, r.access_seconds) for r in records] == [
        ("service-access", "storage", 600),
        ("service-access", "storage", 600),
    ]
    assert all(r.node_seconds == 0 and r.port_seconds == 0 for r in records)
    assert records[0].access_hours == "0.166667"


def test_day_granularity_uses_whole_utc_days():
    start = T0 + 20 * H
    end = T0 + 30 * H
    records = meter(
        [node(start, end, ports=1)], since=T0, until=T0 + 48 * H, now=T0 + 25 * H, granularity="day"
    )

    assert [(r.period_start, r.period_end) for r in records] == [
        (T0, T0 + 24 * H),
        (T0 + 24 * H, T0 + 48 * H),
    ]
    assert [r.node_seconds for r in records] == [4 * 3600, 3600]  # clipped to now
    assert [r.final for r in records] == [True, False]


def test_microseconds_are_truncated_to_whole_seconds():
    start = T0 + timedelta(seconds=10, microseconds=999_999)
    end = T0 + timedelta(seconds=20, microseconds=1)
    (record,) = meter([node(start, end, ports=3)], since=T0, until=T0 + H, now=T0 + 2 * H)
    assert (record.node_seconds, record.port_seconds) == (10, 30)


def test_an_unaligned_window_is_widened_to_whole_periods():
    """A record always covers its whole period, so its id names one value."""
    interval = node(T0, T0 + 2 * H)
    wide = meter([interval], since=T0, until=T0 + 2 * H, now=T0 + 3 * H)
    narrow = meter(
        [interval],
        since=T0 + timedelta(minutes=59),
        until=T0 + H + timedelta(minutes=1),
        now=T0 + 3 * H,
    )
    assert narrow == wide


def test_records_are_grouped_per_key_and_sorted():
    intervals = [
        node(T0, T0 + H, tenant="zeta", name="a"),
        node(T0, T0 + H, tenant="acme", name="b", ports=1),
        node(T0, T0 + H, tenant="acme", name="c", ports=2),
        service(T0, T0 + H, name="dns"),
        node(T0 + H, T0 + 2 * H, tenant="acme", qos="bronze"),
    ]
    after_grace = T0 + 2 * H + timedelta(seconds=FINALITY_GRACE_SECONDS)
    records = meter(intervals, since=T0, until=T0 + 2 * H, now=after_grace)

    keys = [(r.period_start, r.tenant, r.resource_type, r.qos_class, r.service) for r in records]
    assert keys == [
        (T0, "acme", "fabric-capacity", "gold", None),
        (T0, "acme", "service-access", "gold", "dns"),
        (T0, "zeta", "fabric-capacity", "gold", None),
        (T0 + H, "acme", "fabric-capacity", "bronze", None),
    ]
    assert (records[0].node_seconds, records[0].port_seconds) == (7200, 3 * 3600)
    assert all(r.final for r in records)  # period_end == complete_until(now) is final


def test_zero_usage_gives_no_record():
    assert meter([node(T0, T0)], since=T0, until=T0 + H, now=T0 + H) == []
    assert meter([node(T0 + 5 * H, None)], since=T0, until=T0 + H, now=T0 + 9 * H) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"since": datetime(2025, 3, 1), "until": T0 + H, "now": T0},
        {"since": T0, "until": datetime(2025, 3, 2), "now": T0},
        {"since": T0, "until": T0 + H, "now": datetime(2025, 3, 1)},
        {"since": T0, "until": T0, "now": T0},
        {"since": T0 + H, "until": T0, "now": T0},
        {"since": T0, "until": T0 + H, "now": T0, "granularity": "minute"},
    ],
)
def test_invalid_arguments_raise_validation_error(kwargs):
    with pytest.raises(InvalidValueError):
        meter([], **kwargs)


@pytest.mark.parametrize(
    "interval",
    [
        node(datetime(2025, 3, 1), None),
        node(T0, datetime(2025, 3, 2)),
        node(T0 + H, T0),
        node(T0, T0 + H, ports=-1),
        replace(node(T0, T0 + H), resource_type="gpu"),
    ],
)
def test_invalid_intervals_raise_validation_error(interval):
    with pytest.raises(InvalidValueError):
        meter([interval], since=T0, until=T0 + 2 * H, now=T0 + 2 * H)


# --- exports ----------------------------------------------------------------------------------


def _one_capacity_record() -> UsageRecord:
    (record,) = meter([node(T0, T0 + H, ports=8)], since=T0, until=T0 + H, now=T0 + 2 * H)
    return record


def test_record_document_has_the_documented_fields():
    record = _one_capacity_record()
    doc = record_document(record)
    assert doc == {
        "id": record.id,
        "billing_account": "ba-1",
        "tenant": "acme",
        "fabric": "fab1",
        "resource_type": "fabric-capacity",
        "qos_class": "gold",
        "service": None,
        "partition": None,
        "origin": None,
        "period_start": "2025-03-01T00:00:00Z",
        "period_end": "2025-03-01T01:00:00Z",
        "node_seconds": 3600,
        "port_seconds": 28800,
        "access_seconds": 0,
        "node_hours": "1.000000",
        "port_hours": "8.000000",
        "access_hours": "0.000000",
        "final": True,
    }
    assert re.fullmatch(r"usg_[0-9a-f]{32}", record.id)


def test_an_orchestrators_nodes_are_a_record_of_their_own_and_other_ids_stay_as_they_were():
    by_operator = node(T0, T0 + H, name="n1")
    by_orchestrator = replace(node(T0 + H / 2, None, name="n2", ports=2), origin="orchestrator")

    records = meter([by_orchestrator, by_operator], since=T0, until=T0 + H, now=T0 + 2 * H)

    assert [(r.origin, r.node_seconds, r.port_seconds) for r in records] == [
        (None, 3600, 14400),
        ("orchestrator", 1800, 3600),
    ]
    # The id of a record without an origin is the one it had before origins existed.
    assert records[0].id == _one_capacity_record().id == "usg_fd80d7164754fc97c48a35b4100db49b"
    assert records[1].id != records[0].id and re.fullmatch(r"usg_[0-9a-f]{32}", records[1].id)
    assert [record_document(r)["origin"] for r in records] == [None, "orchestrator"]
    assert cloud_event(records[1])["data"]["origin"] == "orchestrator"
    assert FOCUS_COLUMNS[-1] == "Origin"
    assert [(row["ConsumedUnit"], row["Origin"]) for row in focus_rows(records)] == [
        ("node-hour", ""),
        ("port-hour", ""),
        ("node-hour", "orchestrator"),
        ("port-hour", "orchestrator"),
    ]


def test_cloud_event_is_structured_cloudevents_1_0():
    record = _one_capacity_record()
    event = cloud_event(record)
    assert {k: v for k, v in event.items() if k != "data"} == {
        "specversion": "1.0",
        "id": record.id,
        "source": "/isofabric/fabrics/fab1",
        "type": "isofabric.usage.hourly.v1",
        "subject": "acme",
        "time": "2025-03-01T01:00:00Z",
        "datacontenttype": "application/json",
        "tenantid": "acme",
        "billingaccount": "ba-1",
        "fabric": "fab1",
    }
    assert event["data"] == record_document(record)
    assert cloud_event(record, source_prefix="/x")["source"] == "/x/fab1"
    core = {"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"}
    for name in set(event) - core:
        assert re.fullmatch(r"[a-z0-9]{1,20}", name)  # CloudEvents extension naming


def test_cloud_event_of_a_daily_record_says_daily():
    (record,) = meter(
        [node(T0, T0 + H)], since=T0, until=T0 + H, now=T0 + 48 * H, granularity="day"
    )
    assert cloud_event(record)["type"] == "isofabric.usage.daily.v1"


def test_focus_rows_give_one_row_per_quantity():
    capacity = _one_capacity_record()
    (access,) = meter([service(T0, T0 + 2 * H / 4)], since=T0, until=T0 + H, now=T0 + H)
    rows = focus_rows([capacity, access])

    assert all(tuple(row) == FOCUS_COLUMNS for row in rows)
    assert [
        (r["ResourceId"], r["SkuId"], r["ConsumedQuantity"], r["ConsumedUnit"]) for r in rows
    ] == [
        ("fab1/acme", "gold", "1.000000", "node-hour"),
        ("fab1/acme", "gold", "8.000000", "port-hour"),
        ("fab1/acme/storage", "service:storage", "0.500000", "access-hour"),
    ]
    assert rows[2]["ResourceType"] == "service-access"
    assert rows[0]["ChargePeriodStart"] == "2025-03-01T00:00:00Z"
    assert rows[0]["ChargePeriodEnd"] == "2025-03-01T01:00:00Z"
    assert (rows[0]["BillingAccountId"], rows[0]["Tenant"], rows[0]["Fabric"]) == (
        "ba-1",
        "acme",
        "fab1",
    )


# --- properties -------------------------------------------------------------------------------

SPAN = 3 * 24 * 3600  # timelines within three days

_offsets = st.integers(min_value=0, max_value=SPAN * 10**6)  # microseconds from T0


@st.composite
def timelines(draw):
    count = draw(st.integers(min_value=0, max_value=8))
    intervals: list[UsageInterval] = []
    for _ in range(count):
        a, b = sorted((draw(_offsets), draw(_offsets)))
        open_ended = draw(st.booleans())
        intervals.append(
            node(
                T0 + timedelta(microseconds=a),
                None if open_ended else T0 + timedelta(microseconds=b),
                ports=draw(st.integers(min_value=0, max_value=64)),
                tenant=draw(st.sampled_from(["acme", "globex"])),
                qos=draw(st.sampled_from(["gold", "bronze"])),
                name=f"n{len(intervals)}",
            )
        )
    hour = st.integers(min_value=0, max_value=SPAN // 3600)
    lo, hi = sorted(draw(st.lists(hour, min_size=2, max_size=2, unique=True)))
    now = T0 + timedelta(microseconds=draw(_offsets))
    return intervals, T0 + lo * H, T0 + hi * H, now


def _seconds(moment: datetime) -> int:
    return (moment - T0) // timedelta(seconds=1)


def _expected(
    intervals: list[UsageInterval], since: datetime, until: datetime, now: datetime
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """Held seconds per (tenant, class): truncate to seconds, clip to [since, until) and now."""
    nodes: defaultdict[tuple[str, str], int] = defaultdict(int)
    ports: defaultdict[tuple[str, str], int] = defaultdict(int)
    for iv in intervals:
        end = now if iv.end is None else min(iv.end, now)
        lo = max(_seconds(iv.start), _seconds(since))
        hi = min(_seconds(end), _seconds(until))
        held = max(0, hi - lo)
        nodes[iv.tenant, iv.qos_class] += held
        ports[iv.tenant, iv.qos_class] += held * iv.ports
    return {k: v for k, v in nodes.items() if v}, {k: v for k, v in ports.items() if v}


@settings(max_examples=150, deadline=None)
@given(timelines())
def test_hourly_sums_equal_held_durations_exactly(case):
    intervals, since, until, now = case
    records = meter(intervals, since=since, until=until, now=now)

    nodes: defaultdict[tuple[str, str], int] = defaultdict(int)
    ports: defaultdict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        nodes[r.tenant, r.qos_class] += r.node_seconds
        ports[r.tenant, r.qos_class] += r.port_seconds
    expected_nodes, expected_ports = _expected(intervals, since, until, now)
    assert dict(nodes) == expected_nodes
    assert {k: v for k, v in ports.items() if v} == expected_ports


@settings(max_examples=100, deadline=None)
@given(timelines())
def test_no_record_spans_a_period_boundary(case):
    intervals, since, until, now = case
    watermark = complete_until(now)
    for r in meter(intervals, since=since, until=until, now=now):
        assert r.period_end - r.period_start == H
        assert r.period_start.minute == r.period_start.second == r.period_start.microsecond == 0
        assert since <= r.period_start < until
        assert 0 < r.node_seconds <= 3600 * 8
        assert r.final == (r.period_end <= watermark)


@settings(max_examples=100, deadline=None)
@given(timelines())
def test_meter_is_deterministic_and_ids_are_unique(case):
    intervals, since, until, now = case
    first = meter(intervals, since=since, until=until, now=now)
    again = meter(list(reversed(intervals)), since=since, until=until, now=now)
    assert first == again
    assert len({r.id for r in first}) == len(first)


_KEY_CHANGES: dict[str, dict[str, Any]] = {
    "billing_account": {"billing_account": "ba-2"},
    "tenant": {"tenant": "globex"},
    "fabric": {"fabric": "fab2"},
    "qos_class": {"qos_class": "bronze"},
    "service": {"resource": "ntp"},
    "resource_type": {"resource_type": "node", "ports": 1},
    "period": {"start": T0 + H, "end": T0 + 2 * H},
    "granularity": {},
}


@given(st.sampled_from(sorted(_KEY_CHANGES)))
def test_ids_differ_when_any_key_field_differs(field: str) -> None:
    interval = service(T0, T0 + H, name="dns")
    changed = replace(interval, **_KEY_CHANGES[field])
    granularity = "day" if field == "granularity" else "hour"
    (base,) = meter([interval], since=T0, until=T0 + 2 * H, now=T0 + 48 * H)
    (other,) = meter(
        [changed], since=T0, until=T0 + 2 * H, now=T0 + 48 * H, granularity=granularity
    )
    assert other.id != base.id
