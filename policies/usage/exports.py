"""Usage records as integrators consume them: the pull API's JSON, CloudEvents and FOCUS CSV rows.

`record_document` is the JSON body of the pull API, `cloud_event` a structured-mode CloudEvent 1.0
for push, and `focus_rows` a CSV-ready row set named after FinOps FOCUS usage columns.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from policies.usage.metering import SERVICE_ACCESS, UsageRecord, rfc3339

#: Column order of `focus_rows`: FOCUS v1.2 usage columns (ChargePeriodStart inclusive,
#: ChargePeriodEnd exclusive, ecosystem.md 6.2) plus the tenant, the fabric and the origin
#: (``orchestrator`` or empty; last, so that readers of the earlier columns by position work).
FOCUS_COLUMNS: tuple[str, ...] = (
    "BillingAccountId",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ResourceId",
    "ResourceType",
    "SkuId",
    "ConsumedQuantity",
    "ConsumedUnit",
    "Tenant",
    "Fabric",
    "Origin",
)


def record_document(record: UsageRecord) -> dict[str, Any]:
    """Render a record as the JSON document of the usage API and CloudEvent data.

    Args:
        record: The record.

    Returns:
        A JSON-ready dict with RFC 3339 UTC "Z" times, integer seconds and decimal-string hours
        (strings, because consumers may parse numbers as IEEE doubles; ecosystem.md 6.3).
    """
    return {
        "id": record.id,
        "billing_account": record.billing_account,
        "tenant": record.tenant,
        "fabric": record.fabric,
        "resource_type": record.resource_type,
        "qos_class": record.qos_class,
        "service": record.service,
        "partition": record.partition,
        "origin": record.origin,
        "period_start": rfc3339(record.period_start),
        "period_end": rfc3339(record.period_end),
        "node_seconds": record.node_seconds,
        "port_seconds": record.port_seconds,
        "access_seconds": record.access_seconds,
        "node_hours": record.node_hours,
        "port_hours": record.port_hours,
        "access_hours": record.access_hours,
        "final": record.final,
    }


def cloud_event(
    record: UsageRecord, *, source_prefix: str = "/isofabric/fabrics"
) -> dict[str, Any]:
    """Render a record as a structured-mode CloudEvent 1.0 (`application/cloudevents+json`).

    `id` is the record id, so (source, id) is stable across re-sends and consumers dedupe on it
    (CloudEvents 1.0 "id"; ecosystem.md 6.1). `subject` is the tenant, which OpenMeter aggregates
    by (ecosystem.md 6.2). Extension attribute names are lowercase alphanumeric, at most 20
    characters, as the spec and the v2 SDK require (so `tenantid`, not `tenant_id`).

    Args:
        record: The record.
        source_prefix: URI-reference prefix; the fabric name is appended.

    Returns:
        The event as a JSON-ready dict. The type is "isofabric.usage.hourly.v1" for hourly
        records and "isofabric.usage.daily.v1" for daily ones.
    """
    daily = record.period_end - record.period_start == timedelta(days=1)
    return {
        "specversion": "1.0",
        "id": record.id,
        "source": f"{source_prefix}/{record.fabric}",
        "type": "isofabric.usage.daily.v1" if daily else "isofabric.usage.hourly.v1",
        "subject": record.tenant,
        "time": rfc3339(record.period_end),
        "datacontenttype": "application/json",
        "tenantid": record.tenant,
        "billingaccount": record.billing_account,
        "fabric": record.fabric,
        "data": record_document(record),
    }


def focus_rows(records: Iterable[UsageRecord]) -> list[dict[str, str]]:
    """Render records as rows keyed by `FOCUS_COLUMNS`, one row per record and quantity.

    A "fabric-capacity" record gives a "node-hour" row then a "port-hour" row; a
    "service-access" record gives one "access-hour" row. Column names follow FOCUS v1.2 usage
    columns (ecosystem.md 6.2); the service emits usage, not cost, so no cost columns.

    Args:
        records: Records, e.g. from `meter`; row order follows record order.

    Returns:
        Rows whose keys are exactly `FOCUS_COLUMNS`, all values strings.
    """
    rows: list[dict[str, str]] = []
    for record in records:
        for resource_id, sku, quantity, unit in _focus_quantities(record):
            row = (
                record.billing_account,
                rfc3339(record.period_start),
                rfc3339(record.period_end),
                resource_id,
                record.resource_type,
                sku,
                quantity,
                unit,
                record.tenant,
                record.fabric,
                record.origin or "",
            )
            rows.append(dict(zip(FOCUS_COLUMNS, row, strict=True)))
    return rows


def _focus_quantities(record: UsageRecord) -> list[tuple[str, str, str, str]]:
    """(ResourceId, SkuId, ConsumedQuantity, ConsumedUnit) for each quantity of a record."""
    base = f"{record.fabric}/{record.tenant}"
    if record.resource_type == SERVICE_ACCESS:
        service = record.service or ""
        return [(f"{base}/{service}", f"service:{service}", record.access_hours, "access-hour")]
    return [
        (base, record.qos_class, record.node_hours, "node-hour"),
        (base, record.qos_class, record.port_hours, "port-hour"),
    ]
