"""Cursors of the usage records and events feeds: a (period start, record id) position.

Opaque to clients (URL-safe base64 of a small JSON object); a cursor that does not decode to a
UTC time of a plausible year and an id is refused as invalid, never a 500.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime

from policies import usage as engine
from policies.errors import InvalidValueError

# The years a usage time may name (tenancy/usecases/usage.py parses times in the same bounds).
MIN_YEAR, MAX_YEAR = 1970, 9998


def record_key(record: engine.UsageRecord) -> tuple[datetime, str]:
    """Where a record stands in the feed: its period, then its id."""
    return (record.period_start, record.id)


def encode_cursor(key: tuple[datetime, str] | None) -> str:
    """The opaque cursor of a feed position (None: the beginning)."""
    body: dict[str, str] = {}
    if key is not None:
        body = {"period_start": key[0].isoformat(), "id": key[1]}
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """The (period_start, id) a cursor resumes after; None for the beginning."""
    if not cursor:
        return None
    try:
        body = json.loads(base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode()))
        if body == {}:
            return None
        start, record_id = body["period_start"], body["id"]
        if not isinstance(start, str) or not isinstance(record_id, str):
            raise TypeError(start)
        period_start = datetime.fromisoformat(start)
        if period_start.tzinfo is None:
            raise ValueError(start)
        period_start = period_start.astimezone(UTC)
        if not MIN_YEAR <= period_start.year <= MAX_YEAR:
            raise ValueError(start)
    except (binascii.Error, ValueError, KeyError, TypeError, OverflowError) as error:
        raise InvalidValueError("cursor is not valid", parameter="cursor") from error
    return period_start, record_id
