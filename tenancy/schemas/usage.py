"""Usage pages for billing: records and events."""

from __future__ import annotations

from datetime import datetime

from pydantic import (
    BaseModel,
    Field,
)

HOURS = "Decimal string, 6 places: consumers may parse JSON numbers as IEEE doubles"


class UsageRecordView(BaseModel):
    """One usage record (policies.usage.record_document): RFC 3339 UTC times, integer seconds."""

    id: str = Field(description="Deterministic: 'usg_' + 32 hex digits")
    billing_account: str = Field(description="The tenant's billing account")
    tenant: str = Field(description="The tenant's name")
    fabric: str = Field(description="The fabric's name")
    resource_type: str = Field(
        examples=["fabric-capacity", "service-access"],
        description="'fabric-capacity' (nodes and their ports held) or 'service-access' (a "
        "granted shared service)",
    )
    qos_class: str = Field(description="The tenant's QoS class during the period")
    service: str | None = Field(description="The service of a service-access record, else null")
    partition: str | None = Field(
        default=None,
        description="The partition the usage was under: 'default' (the tenant's nodes' "
        "partition) for fabric capacity on InfiniBand, null elsewhere; a node-hour is counted "
        "once per node, never once per partition",
    )
    origin: str | None = Field(
        default=None,
        examples=["orchestrator"],
        description="'orchestrator' when the nodes were allocated through the UFM-compatible "
        "API (a scheduler's request), else null; usage of both origins in one period is two "
        "records, and a record without an origin has the id it had before origins existed",
    )
    period_start: str = Field(description="Inclusive start, RFC 3339 UTC ('Z')")
    period_end: str = Field(description="Exclusive end, RFC 3339 UTC ('Z')")
    node_seconds: int = Field(description="Sum of the seconds nodes were held in the period")
    port_seconds: int = Field(
        description="Sum over nodes of the seconds held times the node's port count"
    )
    access_seconds: int = Field(description="Seconds the service was granted in the period")
    node_hours: str = Field(description=HOURS)
    port_hours: str = Field(description=HOURS)
    access_hours: str = Field(description=HOURS)
    final: bool = Field(description="True once the values can no longer change")


class UsageCloudEvent(BaseModel):
    """A usage record as a structured-mode CloudEvent 1.0 (policies.usage.cloud_event)."""

    specversion: str = Field(examples=["1.0"], description="CloudEvents version: '1.0'")
    id: str = Field(description="The record id: (source, id) is stable across re-sends")
    source: str = Field(
        examples=["/isofabric/fabrics/ib-east"], description="'/isofabric/fabrics/<fabric>'"
    )
    type: str = Field(
        examples=["isofabric.usage.hourly.v1"],
        description="'isofabric.usage.hourly.v1' (or '.daily.v1' for a daily record)",
    )
    subject: str = Field(description="The tenant")
    time: str = Field(description="End of the period, RFC 3339 UTC ('Z')")
    datacontenttype: str = Field(
        examples=["application/json"], description="Media type of `data`: 'application/json'"
    )
    tenantid: str = Field(description="The tenant's name (extension attribute)")
    billingaccount: str = Field(description="The billing account (extension attribute)")
    fabric: str = Field(description="The fabric's name (extension attribute)")
    data: UsageRecordView = Field(description="The usage record")


class UsageRecordsPage(BaseModel):
    """Usage records (documents of policies.usage.record_document), sorted by (period_start, id)."""

    data: list[UsageRecordView] = Field(description="This page's records")
    count: int = Field(description="Total number of records in the range")
    complete_until: datetime = Field(description="Records ending at or before this are final")
    next: str | None = Field(description="Cursor of the next page, null on the last page")


class UsageEventsPage(BaseModel):
    """Final hourly usage records as CloudEvents 1.0, in (period_start, id) order."""

    data: list[UsageCloudEvent] = Field(description="This page's events")
    next: str = Field(description="Resume from here; never null (unchanged when nothing is new)")
