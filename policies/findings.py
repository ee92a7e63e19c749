"""Findings: what a parser or audit reports about a file, on one ordered severity scale."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    """How bad a finding is.

    CRITICAL: OpenSM would discard the file and fall back to ``Default=0x7fff : ALL=full`` (every
    port a full member of the default partition), or isolation silently changes. WARNING: legal,
    but easy to get wrong or dependent on other settings.
    """

    CRITICAL = "critical"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Finding:
    """One construct OpenSM fails open on or reads differently than it looks.

    `line` is 1-based (None for file-wide findings). `fails_open` is True when this construct
    alone makes OpenSM discard the file (always with severity CRITICAL).
    """

    code: str
    severity: Severity
    line: int | None
    message: str
    fails_open: bool = False
