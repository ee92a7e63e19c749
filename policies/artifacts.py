"""Rendered files: an `Artifact` is a path in the bundle and its bytes, with its sha256."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = ["Artifact"]


@dataclass(frozen=True, slots=True)
class Artifact:
    """One rendered file: its path inside the bundle and its bytes."""

    path: str
    content: bytes

    @property
    def sha256(self) -> str:
        """Hex sha256 of the content (the download's ETag)."""
        return hashlib.sha256(self.content).hexdigest()
