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
    billing_account: str
    tenant: str
    fabric: str
    resource_type: str = Field(examples=["fabric-capacity", "service-access"])
    qos_class: str
    service: str | None = Field(description="The service of a service-access record, else null")
    period_start: str = Field(description="Inclusive start, RFC 3339 UTC ('Z')")
    period_end: str = Field(description="Exclusive end, RFC 3339 UTC ('Z')")
    node_seconds: int
    port_seconds: int
    access_seconds: int
    node_hours: str = Field(description=HOURS)
    port_hours: str = Field(description=HOURS)
    access_hours: str = Field(description=HOURS)
    final: bool = Field(description="True once the values can no longer change")


class UsageCloudEvent(BaseModel):
    """A usage record as a structured-mode CloudEvent 1.0 (policies.usage.cloud_event)."""

    specversion: str = Field(examples=["1.0"])
    id: str = Field(description="The record id: (source, id) is stable across re-sends")
    source: str
    type: str = Field(examples=["isofabric.usage.hourly.v1"])
    subject: str = Field(description="The tenant")
    time: str = Field(description="End of the period, RFC 3339 UTC ('Z')")
    datacontenttype: str = Field(examples=["application/json"])
    tenantid: str
    billingaccount: str
    fabric: str
    data: UsageRecordView


class UsageRecordsPage(BaseModel):
    """Usage records (documents of policies.usage.record_document), sorted by (period_start, id)."""

    data: list[UsageRecordView]
    count: int = Field(description="Total number of records in the range")
    complete_until: datetime = Field(description="Records ending at or before this are final")
    next: str | None = Field(description="Cursor of the next page, null on the last page")


class UsageEventsPage(BaseModel):
    """Final hourly usage records as CloudEvents 1.0, in (period_start, id) order."""

    data: list[UsageCloudEvent]
    next: str = Field(description="Resume from here; never null (unchanged when nothing is new)")
