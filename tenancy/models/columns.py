"""Column types and helpers every table module shares."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import Column, DateTime, Dialect, TypeDecorator


def utcnow() -> datetime:
    """The current time, UTC-aware: the default of the ``created_at`` columns."""
    return datetime.now(UTC)


class HasId(Protocol):
    """A row with an integer primary key, which is None until the row is flushed."""

    id: int | None


def pk(row: HasId) -> int:
    """The primary key of a row that has been flushed (SQLModel types ids as optional)."""
    if row.id is None:
        raise RuntimeError(f"{type(row).__name__} has not been flushed yet")
    return row.id


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend.

    SQLite has no time zone type: it stores the wall-clock text and returns naive datetimes, so
    values are normalised to UTC on the way in and tagged as UTC on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Convert an aware datetime to UTC before it is stored.

        Raises:
            ValueError: `value` is naive, so its time zone would be a guess.
        """
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous; use UTC-aware ones")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return a stored value as an aware UTC datetime; SQLite's naive ones are tagged UTC."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def ts_column(nullable: bool = False) -> Column[datetime]:
    """A UTC timestamp column (a fresh Column per field: SQLAlchemy binds a Column to one table)."""
    return Column(UtcDateTime(), nullable=nullable)
