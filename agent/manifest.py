"""The signed artifact manifest: verify its DSSE envelope with the pinned keys, read its files.

The service signs ``GET /v1/fabrics/{fabric}/signed-manifest``: a DSSE envelope whose payload is
the RFC 8785 JSON of ``{"_type", "fabric", "snapshot_digest", "files": [{"path", "sha256",
"bytes"}], "sequence"}`` and whose Ed25519 signature covers DSSE PAE(payloadType, payload). The
agent trusts nothing else the server says: the files it installs must have these sha256 digests.
``(epoch, sequence)`` (the epoch a database restore advances, and the audit index of the
snapshot's change) orders the fabric's manifests: the agent refuses one older than the manifest
it installed last (a replay, or a stale server).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from policies.errors import InvalidValueError
from policies.evidence import manifest as evidence_manifest
from policies.evidence.dsse import key_id, signed_by
from policies.evidence.manifest import FileRule

PAYLOAD_TYPE = evidence_manifest.MANIFEST_PAYLOAD_TYPE
MANIFEST_TYPE = evidence_manifest.MANIFEST_TYPE
# The files an OpenSM host installs, by base name (the manifest may prefix them with "opensm/").
INSTALLABLE = ("opensm.conf", "partitions.conf", "qos-policy.conf")
PARTITIONS = "partitions.conf"
OPTIONS = "opensm.conf"


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
    """A verified manifest: the snapshot digest, the files sorted by name, and its position."""

    fabric: str
    digest: str
    files: tuple[ManifestFile, ...]
    sequence: int
    epoch: int = 0
    signer: str | None = None  # the keyid of the key that signed it

    @property
    def position(self) -> tuple[int, int]:
        """``(epoch, sequence)``: manifests are ordered by this pair (a restore advances epoch)."""
        return (self.epoch, self.sequence)

    @property
    def position_text(self) -> str:
        """The position as messages name it: ``epoch:sequence``."""
        return evidence_manifest.position_text(self.position)

    def file(self, name: str) -> ManifestFile | None:
        """The file installed as `name`, if the manifest has one."""
        return next((f for f in self.files if f.name == name), None)


def older_than(manifest: Manifest, known: tuple[int, int] | None, what: str) -> str | None:
    """Why `manifest` is refused as older than the agent's position `known` (None: it is not).

    `what` names that position ("installed", "last applied"); the text is the same for every
    agent and for a plan.
    """
    if known is None or manifest.position >= known:
        return None
    return (
        f"its position {manifest.position_text} is older than the {what} one "
        f"({evidence_manifest.position_text(known)}): a replayed manifest or a stale server"
    )


def envelope_hash(envelope: Mapping[str, Any]) -> str:
    """An envelope's identity, for remembering one that was refused (its exact bytes as JSON)."""
    return hashlib.sha256(json.dumps(envelope, sort_keys=True, default=str).encode()).hexdigest()


def files_hash(manifest: Manifest) -> str:
    """The snapshot digest and its files' sha256: what a rollback holds."""
    files = sorted((f.name, f.sha256) for f in manifest.files)
    return hashlib.sha256(json.dumps([manifest.digest, files]).encode()).hexdigest()


OPENSM_FILES = FileRule(frozenset(INSTALLABLE), frozenset({PARTITIONS}), by_base_name=True)


def verify_manifest(
    envelope: Mapping[str, Any],
    keys: Sequence[Ed25519PublicKey],
    fabric: str,
    rule: FileRule = OPENSM_FILES,
) -> Manifest:
    """Check the envelope with the pinned `keys` and return the manifest, as this agent uses it.

    The signature, ``_type``, fabric and entries, and which files `rule` takes (once; others
    refused or left out, as `rule` says; its required files present) are checked by
    `policies.evidence.manifest`. The default rule is an OpenSM host's: its three files,
    partitions.conf required.

    Raises:
        ManifestError: anything that makes the manifest one this agent may not act on.
    """
    try:
        signed = evidence_manifest.verify_manifest(envelope, keys, fabric=fabric)
        taken = evidence_manifest.files_taken(signed, rule)
    except InvalidValueError as error:
        raise ManifestError(error.detail) from error
    files = tuple(ManifestFile(f.path, f.sha256, f.bytes) for f in taken)
    signer = signed_by(envelope, keys, PAYLOAD_TYPE)
    return Manifest(
        signed.fabric,
        signed.snapshot_digest,
        files,
        signed.sequence,
        signed.epoch,
        key_id(signer) if signer is not None else None,
    )
