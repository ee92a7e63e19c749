"""The signed artifact manifest: verify its DSSE envelope with the pinned keys, read its files.

The service signs ``GET /v1/fabrics/{fabric}/signed-manifest``: a DSSE envelope whose payload is
the RFC 8785 JSON of ``{"_type", "fabric", "snapshot_digest", "files": [{"path", "sha256",
"bytes"}]}`` and whose Ed25519 signature covers DSSE PAE(payloadType, payload). The agent trusts
nothing else the server says: the files it installs must have these sha256 digests.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from policies.errors import InvalidValueError
from policies.evidence.audit_log import load_public_key
from policies.evidence.dsse import pae

PAYLOAD_TYPE = "application/vnd.isofabric.artifact-manifest+json"
MANIFEST_TYPE = "https://isofabric.dev/artifact-manifest/v1"
# The files an OpenSM host installs, by base name (the manifest may prefix them with "opensm/").
INSTALLABLE = ("opensm.conf", "partitions.conf", "qos-policy.conf")
PARTITIONS = "partitions.conf"
OPTIONS = "opensm.conf"
_HEX_SHA256 = re.compile(r"[0-9a-f]{64}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class ManifestError(ValueError):
    """The envelope or its manifest is not one this agent may act on (refuse, install nothing)."""


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """One file of the manifest: `path` as the server names it, `name` in the conf dir."""

    path: str
    sha256: str
    size: int

    @property
    def name(self) -> str:
        """The file's name in the conf dir (the last component of `path`)."""
        return posixpath.basename(self.path)


@dataclass(frozen=True, slots=True)
class Manifest:
    """A verified manifest: the snapshot digest and the files, sorted by name."""

    fabric: str
    digest: str
    files: tuple[ManifestFile, ...]

    def file(self, name: str) -> ManifestFile | None:
        """The file installed as `name`, if the manifest has one."""
        return next((f for f in self.files if f.name == name), None)


def load_trusted_keys(path: Path) -> list[Ed25519PublicKey]:
    """The pinned keys: one Ed25519 public key PEM, or a keyring (JSON Lines; every key trusted).

    Raises:
        ManifestError: the file holds neither.
    """
    text = path.read_text()
    try:
        if text.lstrip().startswith("-----BEGIN"):
            keys = [load_public_key(text)]
        else:  # the service's keyring format; imported here, the agent needs it rarely
            from tenancy.key_store import keyring_keys, read_keyring

            keys = list(keyring_keys(read_keyring(path)).values())
    except (ValueError, InvalidValueError) as error:  # cryptography raises ValueError
        raise ManifestError(
            f"{path}: not an Ed25519 public key PEM nor a keyring: {error}"
        ) from error
    if not keys:
        raise ManifestError(f"{path}: the keyring holds no key")
    return keys


def verify_manifest(
    envelope: Mapping[str, Any], keys: Sequence[Ed25519PublicKey], fabric: str
) -> Manifest:
    """Check the envelope's signature with any of `keys` and return the manifest it carries.

    Raises:
        ManifestError: wrong payloadType, no signature verifying with a pinned key, a payload that
            is not a manifest of `fabric` with the expected ``_type``, or a file this agent does
            not install (unknown name, twice the same name, a malformed digest).
    """
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise ManifestError(f"payloadType is not {PAYLOAD_TYPE}")
    body = _unb64(envelope.get("payload"), "payload")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise ManifestError("the envelope has no signatures")
    message = pae(PAYLOAD_TYPE, body)
    if not any(_verifies(key, _signature(entry), message) for entry in signatures for key in keys):
        raise ManifestError("no signature of the manifest verifies with a pinned key")
    return _manifest(body, fabric)


def _unb64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise ManifestError(f"{what} is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ManifestError(f"{what} is not valid base64") from error


def _signature(entry: Any) -> bytes:
    return _unb64(entry.get("sig") if isinstance(entry, dict) else None, "signature")


def _verifies(key: Ed25519PublicKey, signature: bytes, message: bytes) -> bool:
    try:
        key.verify(signature, message)
    except InvalidSignature:
        return False
    return True


def _manifest(body: bytes, fabric: str) -> Manifest:
    try:
        document = json.loads(body)
    except ValueError as error:
        raise ManifestError("the payload is not JSON") from error
    if not isinstance(document, dict) or document.get("_type") != MANIFEST_TYPE:
        raise ManifestError(f"the payload is not an artifact manifest ({MANIFEST_TYPE})")
    if document.get("fabric") != fabric:
        raise ManifestError(
            f"the manifest is for fabric {document.get('fabric')!r}, not {fabric!r}"
        )
    digest = document.get("snapshot_digest")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ManifestError("snapshot_digest is not sha256:<64 hex>")
    files = tuple(sorted((_file(entry) for entry in _list(document)), key=lambda f: f.name))
    names = [f.name for f in files]
    if len(set(names)) != len(names) or PARTITIONS not in names:
        raise ManifestError(f"the manifest must list {PARTITIONS} and each file once: {names}")
    return Manifest(fabric, digest, files)


def _list(document: dict[str, Any]) -> list[Any]:
    files = document.get("files")
    if not isinstance(files, list):
        raise ManifestError("the manifest has no file list")
    return files


def _file(entry: Any) -> ManifestFile:
    if not isinstance(entry, dict):
        raise ManifestError("a manifest file entry is not an object")
    path, sha256, size = entry.get("path"), entry.get("sha256"), entry.get("bytes")
    if not isinstance(path, str) or posixpath.basename(path) not in INSTALLABLE:
        raise ManifestError(f"the manifest lists {path!r}, not one of {', '.join(INSTALLABLE)}")
    if not isinstance(sha256, str) or not _HEX_SHA256.fullmatch(sha256):
        raise ManifestError(f"{path}: sha256 is not 64 lower-case hex digits")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ManifestError(f"{path}: bytes is not a size")
    return ManifestFile(path, sha256, size)
