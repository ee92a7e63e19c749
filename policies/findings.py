"""Findings: what a parser or audit reports about a file, on one ordered severity scale."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Finding", "Severity"]


class Severity(StrEnum):
    """How bad a finding is, ordered ``critical > error > warning > info``.

    CRITICAL: the consuming software would fail open or isolation silently changes (OpenSM discards
    partitions.conf and falls back to ``Default=0x7fff : ALL=full``; SONiC merges a key that
    joins two tenants). ERROR: the software refuses the construct or applies it differently (FRR).
    WARNING: legal, but easy to get wrong or dependent on other settings. INFO: a fact to judge.

    Members compare by that order (``Severity.ERROR > Severity.WARNING``); their values are the
    strings reports have always carried.
    """

    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for info up to 3 for critical."""
        return _RANK[self]

    def __lt__(self, other: object) -> bool:
        return self.rank < _rank_of(other)

    def __le__(self, other: object) -> bool:
        return self.rank <= _rank_of(other)

    def __gt__(self, other: object) -> bool:
        return self.rank > _rank_of(other)

    def __ge__(self, other: object) -> bool:
        return self.rank >= _rank_of(other)


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2, Severity.CRITICAL: 3}


def _rank_of(other: object) -> int:
    if not isinstance(other, Severity):
        raise TypeError(f"a Severity compares only with a Severity, not {type(other).__name__}")
    return other.rank


@dataclass(frozen=True, slots=True)
class Finding:
    """A construct the consuming software rejects, fails open on, or reads otherwise than it looks.

    `line` is 1-based where the format has lines (None for file-wide findings and for JSON);
    `key` names the place in a keyed document (config_db ``VRF|Vrf50001``) or, in frr.conf, the
    block and value a finding is about (``Vrf50001|65000:50000``). `fails_open` is True when
    this construct alone makes OpenSM discard partitions.conf (always CRITICAL).
    """

    code: str
    severity: Severity
    message: str
    line: int | None = None
    key: str | None = None
    fails_open: bool = False
