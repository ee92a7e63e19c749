"""Pure identifier-pool arithmetic (no database): which value to hand out next."""

from __future__ import annotations

from collections.abc import Collection


def lowest_free(first: int, last: int, taken: Collection[int]) -> int | None:
    """The smallest value in ``[first, last]`` not in `taken`, or None when the range is full.

    Lowest-first keeps keys dense and predictable for operators reading partitions.conf.
    """
    blocked = taken if isinstance(taken, set | frozenset) else set(taken)
    for value in range(first, last + 1):
        if value not in blocked:
            return value
    return None
