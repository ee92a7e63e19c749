"""Usage pages for billing: records and events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import (
    BaseModel,
    Field,
)


class UsageRecordsPage(BaseModel):
    """Usage records (documents of policies.usage.record_document), sorted by (period_start, id)."""

    data: list[dict[str, Any]]
    count: int = Field(description="Total number of records in the range")
    complete_until: datetime = Field(description="Records ending at or before this are final")
    next: str | None = Field(description="Cursor of the next page, null on the last page")


class UsageEventsPage(BaseModel):
    """Final hourly usage records as CloudEvents 1.0, in (period_start, id) order."""

    data: list[dict[str, Any]]
    next: str = Field(description="Resume from here; never null (unchanged when nothing is new)")
