"""Usage metering for billing: holdings in, immutable per-period records out, exported three ways.

`metering` turns allocation and grant timelines into `UsageRecord`s; `exports` writes them as the
pull API's JSON, CloudEvents and FOCUS CSV rows. Pure: no I/O, no clock (`now` is passed in).
"""

from policies.usage.exports import FOCUS_COLUMNS, cloud_event, focus_rows, record_document
from policies.usage.metering import (
    FABRIC_CAPACITY,
    FINALITY_GRACE_SECONDS,
    GRANULARITIES,
    NODE,
    SERVICE,
    SERVICE_ACCESS,
    UsageInterval,
    UsageRecord,
    complete_until,
    hours,
    meter,
)

__all__ = [
    "FABRIC_CAPACITY",
    "FINALITY_GRACE_SECONDS",
    "FOCUS_COLUMNS",
    "GRANULARITIES",
    "NODE",
    "SERVICE",
    "SERVICE_ACCESS",
    "UsageInterval",
    "UsageRecord",
    "cloud_event",
    "complete_until",
    "focus_rows",
    "hours",
    "meter",
    "record_document",
]
