"""Records that end stay for history: which of them a read sees.

Releasing an allocation or revoking a grant stamps an end time (`released_at`, `revoked_at`) and
keeps the row, so billing and audit can explain the past. Reads default to the
records still in force; ``?state=`` asks for the ended ones (``released`` / ``revoked``) or all.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeVar

from sqlmodel import col
from sqlmodel.sql.expression import SelectOfScalar

R = TypeVar("R")

ACTIVE = "active"
ALL = "all"
AllocationState = Literal["active", "released", "all"]
GrantState = Literal["active", "revoked", "all"]


def in_state(query: SelectOfScalar[R], ended_at: Any, state: str) -> SelectOfScalar[R]:
    """`query` narrowed to rows in `state`: ``active`` (not ended), ``all``, or the ended ones."""
    if state == ALL:
        return query
    column = col(ended_at)
    return query.where(column.is_(None) if state == ACTIVE else column.is_not(None))


def is_in_state(ended: datetime | None, state: str) -> bool:
    """Whether one row with end time `ended` is in `state` (the same rule as `in_state`)."""
    if state == ALL:
        return True
    return (ended is None) == (state == ACTIVE)
