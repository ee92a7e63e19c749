"""Rendered files: an `Artifact` is a path in the bundle and its bytes, with its sha256."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["SECRET_PATHS", "Artifact", "holds_secrets", "manifest"]

# Rendered files that carry secrets: opensm.conf holds the subnet's M_Key, SM_Key and SA_Key
# (policies/infiniband/render.py, OPTIONS_PATH), with which a host could take over the SM's role
# (IBTA Vol. 1, 14.2.4). Such a file is kept only sealed and never shown in clear.
SECRET_PATHS = frozenset({"opensm/opensm.conf"})


@dataclass(frozen=True, slots=True)
class Artifact:
    """One rendered file: its path inside the bundle and its bytes."""

    path: str
    content: bytes

    @property
    def sha256(self) -> str:
        """Hex sha256 of the content (the download's ETag)."""
        return hashlib.sha256(self.content).hexdigest()


def manifest(fabric: str, snapshot_digest: str, files: Iterable[Artifact]) -> dict[str, Any]:
    """The bundle's manifest: the fabric, the verified snapshot's digest and each file.

    Each file is ``{"path", "sha256", "bytes"}``; the API's artifact listing and the CLI's
    manifest.json are this document, so what an agent checks is what the operator downloaded.
    """
    listed = [{"path": f.path, "sha256": f.sha256, "bytes": len(f.content)} for f in files]
    return {"fabric": fabric, "snapshot_digest": snapshot_digest, "files": listed}


def holds_secrets(path: str) -> bool:
    """Whether the rendered file at `path` carries secrets (it is then never stored in clear)."""
    return path in SECRET_PATHS
