"""Usage metering: allocation timelines in, immutable per-period usage records out.

A tenant holds nodes (each with a port count) and granted services over time. `meter` turns those
holdings into one `UsageRecord` per (billing account, tenant, fabric, meter, QoS class, service,
origin, period), where a period is a whole UTC hour (or UTC day). The records are exported three
ways: `record_document` (the JSON body of the pull API), `cloud_event` (a structured-mode
CloudEvent 1.0 for push) and `focus_rows` (a CSV-ready row set named after FinOps FOCUS usage
columns), all in `exports`.

Contracts an integrator can rely on (ecosystem.md section 6.3):

* Windows are half-open `[period_start, period_end)` in UTC, written in RFC 3339 with `Z`.
* Record ids are deterministic: the same key always yields the same id, so re-sending is
  idempotent end to end (CloudEvent `id`, Lago `transaction_id`, Stripe `identifier`). A
  record without an origin has the id it had before origins existed.
* Quantities are exact integer seconds; the derived hours are decimal strings, never floats.
* `final` marks a record whose period ended at or before `complete_until(now)`: its values will
  not change. The current, unfinished period is reported with `final=False`.

Pure engine: no I/O, no clock (`now` is passed in), no randomness.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from policies.errors import InvalidValueError

#: Period length in seconds per supported granularity. POSIX time has no leap seconds, so every
#: UTC hour is 3600 s and every UTC day 86400 s, and both grids are aligned with the epoch.
GRANULARITIES: dict[str, int] = {"hour": 3600, "day": 86400}


NODE = "node"
SERVICE = "service"
FABRIC_CAPACITY = "fabric-capacity"
SERVICE_ACCESS = "service-access"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_HOUR = 3600
_MICRO_PER_UNIT = 10**6  # hours are written with 6 decimals

# (billing account, tenant, fabric, resource type, QoS class, service, origin, period start)
_Key = tuple[str, str, str, str, str, str | None, str | None, int]


@dataclass(frozen=True, slots=True)
class UsageInterval:
    """A holding: a node (with its port count) or a granted service, from start until end.

    Attributes:
        tenant: Tenant name.
        billing_account: The tenant's external billing account (customer) id.
        fabric: Fabric the holding lives on.
        qos_class: The tenant's QoS class name.
        resource_type: "node" or "service".
        resource: Node name or service name.
        ports: Ports of the node (0 for a service).
        start: Tz-aware start of the holding.
        end: Tz-aware end of the holding; None while it is still held.
        origin: Who made the holding when not an operator's own call: ``orchestrator`` for a
            node an orchestrator's request allocated (the UFM-compatible API); None otherwise.
    """

    tenant: str
    billing_account: str
    fabric: str
    qos_class: str
    resource_type: str
    resource: str
    ports: int
    start: datetime
    end: datetime | None
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """Usage of one (billing account, tenant, fabric, meter, class, service, origin) in one period.

    Attributes:
        id: Deterministic id, "usg_" + 32 hex digits (see `_record_id`).
        billing_account: External billing account id.
        tenant: Tenant name.
        fabric: Fabric name.
        resource_type: "fabric-capacity" (nodes and ports) or "service-access".
        qos_class: The tenant's QoS class.
        service: The service name for service-access records, else None.
        period_start: Inclusive UTC start of the period.
        period_end: Exclusive UTC end of the period.
        node_seconds: Sum of seconds nodes were held in the period.
        port_seconds: Sum over nodes of held seconds times the node's ports.
        access_seconds: Sum of seconds the service was granted in the period.
        final: True when period_end <= complete_until(now): the values will not change.
        partition: The partition the usage was under where the fabric has one: ``default``
            (the partition of the tenant's nodes) for fabric capacity on InfiniBand, else None.
            A node-hour is counted once per node and class, never once per partition the
            node's ports are in; the partition is not part of the id.
        origin: ``orchestrator`` when the holdings were made by an orchestrator (the
            UFM-compatible API allocated the nodes), else None. Holdings of both origins in one
            period are two records; the origin is part of the id only when it is not None, so
            a record without one keeps the id it had before origins existed.
    """

    id: str
    billing_account: str
    tenant: str
    fabric: str
    resource_type: str
    qos_class: str
    service: str | None
    period_start: datetime
    period_end: datetime
    node_seconds: int
    port_seconds: int
    access_seconds: int
    final: bool
    partition: str | None = None
    origin: str | None = None

    @property
    def node_hours(self) -> str:
        """Node seconds as hours, 6 decimals, half-even (see `hours`)."""
        return hours(self.node_seconds)

    @property
    def port_hours(self) -> str:
        """Port seconds as hours, 6 decimals, half-even (see `hours`)."""
        return hours(self.port_seconds)

    @property
    def access_hours(self) -> str:
        """Access seconds as hours, 6 decimals, half-even (see `hours`)."""
        return hours(self.access_seconds)


def hours(seconds: int) -> str:
    """Write integer seconds as decimal hours with exactly 6 decimals, rounding half to even.

    Equal to `str((Decimal(seconds) / 3600).quantize(Decimal("0.000001"), ROUND_HALF_EVEN))`
    computed exactly: micro-hours = seconds * 10**6 / 3600 = seconds * 2500 / 9, so the result is
    an integer division by 9 with a half-even correction. (Since 9 is odd, an exact tie never
    occurs for integer seconds; the rule is kept so the contract holds as stated.)

    Args:
        seconds: A whole number of seconds (may be negative, e.g. for a compensating record).

    Returns:
        A string like "0.000278" (1 s) or "1.000000" (3600 s).
    """
    quotient, remainder = divmod(abs(seconds) * _MICRO_PER_UNIT, _HOUR)
    if 2 * remainder > _HOUR or (2 * remainder == _HOUR and quotient % 2 == 1):
        quotient += 1
    whole, fraction = divmod(quotient, _MICRO_PER_UNIT)
    sign = "-" if seconds < 0 and quotient else ""
    return f"{sign}{whole}.{fraction:06d}"


# A change is stamped with its transaction's start time but becomes visible at commit: an hour is
# declared final only once every transaction that could still add seconds to it has committed.
FINALITY_GRACE_SECONDS = 300


def complete_until(now: datetime) -> datetime:
    """Return the watermark: the start of the UTC hour that contained `now` minus a grace period.

    Every period ending at or before it is final: holdings are clipped to `now`, and the grace
    (`FINALITY_GRACE_SECONDS`) covers changes stamped before an hour boundary that commit after
    it. Integrators close invoices up to this instant.

    Args:
        now: Tz-aware current time.

    Returns:
        ``now - grace`` truncated to the hour, in UTC.

    Raises:
        InvalidValueError: `now` is naive.
    """
    return _to_datetime(_floor(_epoch_seconds(now, "now") - FINALITY_GRACE_SECONDS, _HOUR))


def meter(
    intervals: Iterable[UsageInterval],
    *,
    since: datetime,
    until: datetime,
    now: datetime,
    granularity: str = "hour",
) -> list[UsageRecord]:
    """Meter holdings into one record per key and period with non-zero usage.

    Rules, in order:

    1. Every instant (interval start and end, `now`) is truncated down to a whole second, so
       every quantity is an integer number of seconds and sums are exact.
    2. The window is widened to whole periods: from the start of the period containing `since`
       to the end of the period containing the last instant before `until`. A record thus always
       covers its full period, so its id names one value whatever window was asked for.
    3. Each interval is clipped to `[start, min(end or now, now))` and to the widened window,
       then split exactly at period boundaries.
    4. Node intervals add their seconds to `node_seconds` and seconds * ports to `port_seconds` of
       a "fabric-capacity" record; service intervals add to `access_seconds` of a
       "service-access" record for that service.
    5. The current, unfinished period is included with `final=False`.

    Args:
        intervals: The holdings; order does not matter.
        since: Tz-aware inclusive start of the requested window.
        until: Tz-aware exclusive end of the requested window.
        now: Tz-aware current time (the engine has no clock).
        granularity: "hour" or "day".

    Returns:
        Records sorted by (period_start, billing_account, tenant, fabric, resource_type,
        qos_class, service, origin), with None sorting as "".

    Raises:
        InvalidValueError: A naive datetime, since >= until, an unknown granularity, an unknown
            resource type, negative ports, or an interval ending before it starts.
    """
    period = GRANULARITIES.get(granularity)
    if period is None:
        raise InvalidValueError(
            f"unknown granularity {granularity!r}; expected one of {sorted(GRANULARITIES)}"
        )
    lo, hi = _epoch_seconds(since, "since"), _epoch_seconds(until, "until")
    if since >= until:
        raise InvalidValueError("since must be before until")
    window = (_floor(lo, period), _floor(hi - 1, period) + period)
    current = _epoch_seconds(now, "now")
    totals: dict[_Key, list[int]] = {}
    for interval in intervals:
        _accumulate(totals, interval, window, current, period)
    watermark = _floor(current - FINALITY_GRACE_SECONDS, _HOUR)  # = complete_until(now)
    records = [
        _make_record(key, values, period, granularity, watermark)
        for key, values in totals.items()
        if any(values)
    ]
    records.sort(key=_sort_key)
    return records


# --- internals -------------------------------------------------------------------------------


def _epoch_seconds(moment: datetime, name: str) -> int:
    """Whole seconds since the epoch, truncated toward the past (floor), exactly.

    Raises:
        InvalidValueError: `moment` is naive.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidValueError(f"{name} must be a timezone-aware datetime")
    # timedelta // timedelta is exact integer floor division (no float rounding).
    return (moment - _EPOCH) // _SECOND


def _to_datetime(seconds: int) -> datetime:
    """UTC datetime for whole epoch seconds."""
    return _EPOCH + timedelta(seconds=seconds)


def _floor(seconds: int, period: int) -> int:
    """Start of the period containing `seconds` (grids are epoch-aligned)."""
    return seconds - seconds % period


def rfc3339(moment: datetime) -> str:
    """RFC 3339 UTC with "Z"; microseconds only when present."""
    utc = moment.astimezone(UTC)
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if utc.microsecond else "%Y-%m-%dT%H:%M:%SZ"
    return utc.strftime(fmt)


def _clip(interval: UsageInterval, window: tuple[int, int], now: int) -> tuple[int, int] | None:
    """The interval's held seconds `[start, min(end or now, now))` within the window, if any."""
    if interval.resource_type not in (NODE, SERVICE):
        raise InvalidValueError(
            f"resource_type must be {NODE!r} or {SERVICE!r}, not {interval.resource_type!r}"
        )
    if interval.ports < 0:
        raise InvalidValueError(f"ports must not be negative ({interval.resource!r})")
    start = _epoch_seconds(interval.start, "start")
    end = now if interval.end is None else min(_epoch_seconds(interval.end, "end"), now)
    if interval.end is not None and interval.end < interval.start:
        raise InvalidValueError(f"interval of {interval.resource!r} ends before it starts")
    lo, hi = max(start, window[0]), min(end, window[1])
    return (lo, hi) if lo < hi else None


def _accumulate(
    totals: dict[_Key, list[int]],
    interval: UsageInterval,
    window: tuple[int, int],
    now: int,
    period: int,
) -> None:
    """Add one interval's seconds, split at period boundaries, to `totals`."""
    clipped = _clip(interval, window, now)
    if clipped is None:
        return
    is_node = interval.resource_type == NODE
    resource_type = FABRIC_CAPACITY if is_node else SERVICE_ACCESS
    service = None if is_node else interval.resource
    lo, hi = clipped
    period_start = _floor(lo, period)
    while period_start < hi:
        held = min(hi, period_start + period) - max(lo, period_start)
        key = (
            interval.billing_account,
            interval.tenant,
            interval.fabric,
            resource_type,
            interval.qos_class,
            service,
            interval.origin,
            period_start,
        )
        values = totals.setdefault(key, [0, 0, 0])
        if is_node:
            values[0] += held
            values[1] += held * interval.ports
        else:
            values[2] += held
        period_start += period


def _record_id(key: _Key, granularity: str, period_start: str) -> str:
    """Deterministic id: "usg_" + the first 32 hex digits of SHA-256 over the key.

    The key is hashed as a compact JSON array (billing_account, tenant, fabric, resource_type,
    qos_class, service or "", granularity, period_start in RFC 3339, then the origin if there is
    one), which is unambiguous even when a name contains a separator. A key without an origin
    hashes as it did before origins existed, so its id is unchanged. 36 characters stay within
    the 100 that Stripe and Lago accept for an event identifier.
    """
    billing_account, tenant, fabric, resource_type, qos_class, service, origin, _ = key
    material = [
        billing_account,
        tenant,
        fabric,
        resource_type,
        qos_class,
        service or "",
        granularity,
        period_start,
        *([origin] if origin is not None else []),
    ]
    encoded = json.dumps(material, ensure_ascii=True, separators=(",", ":")).encode()
    return "usg_" + hashlib.sha256(encoded).hexdigest()[:32]


def _make_record(
    key: _Key,
    values: list[int],
    period: int,
    granularity: str,
    watermark: int,
) -> UsageRecord:
    """Build the record of one key and period."""
    billing_account, tenant, fabric, resource_type, qos_class, service, origin, start = key
    period_start = _to_datetime(start)
    return UsageRecord(
        id=_record_id(key, granularity, rfc3339(period_start)),
        billing_account=billing_account,
        tenant=tenant,
        fabric=fabric,
        resource_type=resource_type,
        qos_class=qos_class,
        service=service,
        period_start=period_start,
        period_end=_to_datetime(start + period),
        node_seconds=values[0],
        port_seconds=values[1],
        access_seconds=values[2],
        final=start + period <= watermark,
        origin=origin,
    )


def _sort_key(record: UsageRecord) -> tuple[datetime, str, str, str, str, str, str, str]:
    """The documented record order; None service sorts as ""."""
    return (
        record.period_start,
        record.billing_account,
        record.tenant,
        record.fabric,
        record.resource_type,
        record.qos_class,
        record.service or "",
        record.origin or "",
    )
