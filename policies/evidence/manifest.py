"""The signed artifact manifest: which files, with which sha256, belong to a verified snapshot.

The manifest (`policies.artifacts.manifest`) plus a type URI is signed as a DSSE envelope
(payload type `MANIFEST_PAYLOAD_TYPE`, RFC 8785 canonical JSON) with the service's Ed25519 key.
A deploy agent that pins the service's public key can then tell that each file it downloads
comes from this service and belongs to the verified snapshot `snapshot_digest`, whatever the
transport or a proxy in between did. Pure: keys are passed in.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from policies.artifacts import Artifact, manifest
from policies.digest import SNAPSHOT_DIGEST_PATTERN
from policies.errors import InvalidValueError
from policies.evidence.dsse import open_envelope, sign_envelope

__all__ = [
    "MANIFEST_PAYLOAD_TYPE",
    "MANIFEST_TYPE",
    "FileRule",
    "ManifestFile",
    "SignedManifest",
    "files_taken",
    "position_text",
    "sign_manifest",
    "verify_manifest",
]

MANIFEST_PAYLOAD_TYPE = "application/vnd.isofabric.artifact-manifest+json"
MANIFEST_TYPE = "https://isofabric.dev/artifact-manifest/v1"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_DIGEST = re.compile(SNAPSHOT_DIGEST_PATTERN)
# Bundle paths: "partitions.conf", "leaf01/frr.conf"; no absolute path, no "..", no dot files.
_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """One file the manifest binds: its path in the bundle, sha256 (hex) and size in bytes."""

    path: str
    sha256: str
    bytes: int


@dataclass(frozen=True, slots=True)
class SignedManifest:
    """What a verified manifest says: the fabric, the snapshot digest and its files by path.

    `(epoch, sequence)` is its position in the fabric's order of manifests, compared as a pair.
    """

    fabric: str
    snapshot_digest: str
    files: Mapping[str, ManifestFile]
    sequence: int
    epoch: int = 0

    @property
    def position(self) -> tuple[int, int]:
        """``(epoch, sequence)``: a later manifest has a greater pair."""
        return (self.epoch, self.sequence)


def position_text(position: tuple[int, int]) -> str:
    """A manifest position as every message and API names it: ``epoch:sequence``."""
    return f"{position[0]}:{position[1]}"


def sign_manifest(
    fabric: str,
    snapshot_digest: str,
    files: Iterable[Artifact],
    key: Ed25519PrivateKey,
    *,
    sequence: int,
    epoch: int = 0,
) -> dict[str, Any]:
    """A DSSE envelope over the manifest of `files` rendered from snapshot `snapshot_digest`.

    `sequence` orders the fabric's snapshots (the audit index of the change that made this one,
    so a state that recurs gets a higher one) within an `epoch`, which a database restore
    advances (the audit index goes back with the database): an agent refuses a manifest whose
    ``(epoch, sequence)`` is below the one it installed, so a replayed envelope cannot bring back
    a removed key, and the first manifest after a restore is still accepted.
    """
    document = {
        "_type": MANIFEST_TYPE,
        **manifest(fabric, snapshot_digest, files),
        "sequence": sequence,
        "epoch": epoch,
    }
    return sign_envelope(document, key, MANIFEST_PAYLOAD_TYPE)


def verify_manifest(
    envelope: Mapping[str, Any], keys: Sequence[Ed25519PublicKey], *, fabric: str
) -> SignedManifest:
    """The manifest in `envelope`, if one of `keys` signed it and it is for `fabric`.

    Contract: nothing in the result is taken from an unsigned source; a manifest for another
    fabric, of another type, or with a malformed file entry is refused, never trimmed.

    Raises:
        InvalidValueError: Bad envelope or signature, wrong type or fabric, malformed entries.
    """
    try:
        document = json.loads(open_envelope(envelope, keys, MANIFEST_PAYLOAD_TYPE))
    except ValueError as error:
        raise InvalidValueError("the manifest payload is not JSON") from error
    if not isinstance(document, dict) or document.get("_type") != MANIFEST_TYPE:
        raise InvalidValueError(f"the payload is not an artifact manifest ({MANIFEST_TYPE})")
    if document.get("fabric") != fabric:
        raise InvalidValueError(
            f"the manifest is for fabric {document.get('fabric')!r}, not {fabric!r}"
        )
    digest = document.get("snapshot_digest")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise InvalidValueError("the manifest's snapshot_digest is not v2:<hex> (or sha256:<hex>)")
    files = [_file(entry) for entry in _list(document.get("files"))]
    if len({f.path for f in files}) != len(files):
        raise InvalidValueError("the manifest lists a path twice")
    sequence = _whole(document.get("sequence"), "sequence")
    # Manifests signed before epochs existed carry none: they belong to the first epoch.
    epoch = _whole(document.get("epoch", 0), "epoch")
    return SignedManifest(fabric, digest, {f.path: f for f in files}, sequence, epoch)


def _whole(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidValueError(f"the manifest's {what} is not a whole number")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidValueError("the manifest's files is not a list")
    return value


def _file(entry: Any) -> ManifestFile:
    if not isinstance(entry, dict):
        raise InvalidValueError("a manifest file entry is not an object")
    path, sha256, size = entry.get("path"), entry.get("sha256"), entry.get("bytes")
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise InvalidValueError(f"manifest path {path!r} is not a relative bundle path")
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise InvalidValueError(f"manifest sha256 of {path!r} is not 64 hex digits")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise InvalidValueError(f"manifest size of {path!r} is not a byte count")
    return ManifestFile(path, sha256, size)


@dataclass(frozen=True)
class FileRule:
    """Which files of a manifest a deploy agent takes, by path, and which of them it needs.

    `paths` names the files it installs; a manifest file outside them is refused when
    `others_refused` (an OpenSM host's manifest lists only its files), else left alone (a RoCE
    manifest lists every leaf's files; a leaf takes its own). `required` are paths that must be
    listed. With `by_base_name`, `paths` and `required` are base names (OpenSM's files may carry an
    ``opensm/`` prefix).
    """

    paths: frozenset[str]
    required: frozenset[str] = field(default_factory=frozenset)
    others_refused: bool = True
    by_base_name: bool = False

    def takes(self, path: str) -> bool:
        """True when `path` is one of this agent's files."""
        return (posixpath.basename(path) if self.by_base_name else path) in self.paths


def files_taken(signed: SignedManifest, rule: FileRule) -> tuple[ManifestFile, ...]:
    """The files of a verified manifest that `rule` takes, sorted by base name.

    Contract: each taken file is listed once by base name and every required file is there; a
    file the rule does not take is refused when `rule.others_refused`, else left out.

    Raises:
        InvalidValueError: a file the rule refuses, a base name twice, or a required file missing.
    """
    taken = [_taken(f, rule) for f in signed.files.values()]
    files = tuple(sorted((f for f in taken if f is not None), key=lambda f: _base(f.path)))
    names = [_base(f.path) for f in files]
    listed = {_base(f.path) if rule.by_base_name else f.path for f in files}
    if len(set(names)) != len(names) or not rule.required <= listed:
        wanted = ", ".join(sorted(rule.required))
        raise InvalidValueError(f"the manifest must list {wanted} and each file once: {names}")
    return files


def _taken(entry: ManifestFile, rule: FileRule) -> ManifestFile | None:
    if rule.takes(entry.path):
        return entry
    if not rule.others_refused:
        return None
    raise InvalidValueError(
        f"the manifest lists {entry.path!r}, not one of {', '.join(sorted(rule.paths))}"
    )


def _base(path: str) -> str:
    return posixpath.basename(path)
