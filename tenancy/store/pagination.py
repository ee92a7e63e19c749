"""Keyset pagination with opaque cursors: ``{"data","count","next"}`` for every list."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, TypeVar

from sqlalchemy import func
from sqlmodel import Session, select
from sqlmodel.sql.expression import SelectOfScalar

from policies.errors import InvalidValueError

R = TypeVar("R")

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def encode_cursor(last_key: str) -> str:
    """An opaque cursor that resumes after `last_key` (the list's sort key)."""
    raw = json.dumps({"after": last_key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    """The sort key a cursor resumes after; a cursor this service did not issue is a 422."""
    if cursor is None or cursor == "":
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        after = json.loads(base64.urlsafe_b64decode(padded.encode()))["after"]
    except (binascii.Error, ValueError, KeyError, TypeError) as error:
        raise InvalidValueError("cursor is not valid", parameter="cursor") from error
    if not isinstance(after, str):
        raise InvalidValueError("cursor is not valid", parameter="cursor")
    return after


def next_cursor(keys: list[str], limit: int, has_more: bool) -> str | None:
    """The cursor after the last key of a page, or None on the last page."""
    return encode_cursor(keys[-1]) if has_more and keys and len(keys) >= limit else None


def page_rows(
    session: Session, query: SelectOfScalar[R], key: Any, limit: int, cursor: str | None
) -> tuple[list[R], int, str | None]:
    """One page of an ORM query in `key` order, the total count of matches, and the next cursor."""
    after = decode_cursor(cursor)
    total = session.exec(select(func.count()).select_from(query.subquery())).one()
    if after is not None:
        query = query.where(key > after)
    rows = list(session.exec(query.order_by(key).limit(limit + 1)))
    page = rows[:limit]
    keys = [str(getattr(row, key.key)) for row in page]
    return page, int(total), next_cursor(keys, limit, len(rows) > limit)
