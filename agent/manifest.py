"""The signed artifact manifest: verify its DSSE envelope with the pinned keys, read its files.

The service signs ``GET /v1/fabrics/{fabric}/signed-manifest``: a DSSE envelope whose payload is
the RFC 8785 JSON of ``{"_type", "fabric", "snapshot_digest", "files": [{"path", "sha256",
"bytes"}], "sequence"}`` and whose Ed25519 signature covers DSSE PAE(payloadType, payload). The
agent trusts nothing else the server says: the files it installs must have these sha256 digests.
``sequence`` (the audit index of the snapshot's change) orders the fabric's manifests: the agent
refuses one older than the manifest it installed last (a replay, or a stale server).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from policies.errors import InvalidValueError
from policies.evidence import manifest as evidence_manifest
from policies.evidence.audit_log import load_public_key
from policies.evidence.keyring import keyring_keys, parse_keyring

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
    """A verified manifest: the snapshot digest, the files sorted by name, and its sequence."""

    fabric: str
    digest: str
    files: tuple[ManifestFile, ...]
    sequence: int

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
        else:  # the service's keyring (policies/evidence/keyring.py)
            keys = list(keyring_keys(parse_keyring(text, str(path))).values())
    except (ValueError, InvalidValueError) as error:  # cryptography raises ValueError
        raise ManifestError(
            f"{path}: not an Ed25519 public key PEM nor a keyring: {error}"
        ) from error
    if not keys:
        raise ManifestError(f"{path}: the keyring holds no key")
    return keys


@dataclass(frozen=True)
class FileRule:
    """Which files of a manifest an agent takes, by path, and which of them it needs.

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


OPENSM_FILES = FileRule(frozenset(INSTALLABLE), frozenset({PARTITIONS}), by_base_name=True)


def verify_manifest(
    envelope: Mapping[str, Any],
    keys: Sequence[Ed25519PublicKey],
    fabric: str,
    rule: FileRule = OPENSM_FILES,
) -> Manifest:
    """Check the envelope with the pinned `keys` and return the manifest, as this agent uses it.

    The signature, ``_type``, fabric and entries are checked by `policies.evidence.manifest`;
    here each file must also be one `rule` takes (once; others refused or left out, as `rule`
    says), and its required files present. The default rule is an OpenSM host's: its three files,
    partitions.conf required.

    Raises:
        ManifestError: anything that makes the manifest one this agent may not act on.
    """
    try:
        signed = evidence_manifest.verify_manifest(envelope, keys, fabric=fabric)
    except InvalidValueError as error:
        raise ManifestError(error.detail) from error
    taken = [_taken(f, rule) for f in signed.files.values()]
    files = tuple(sorted((f for f in taken if f is not None), key=lambda f: f.name))
    names = [f.name for f in files]
    listed = {f.name if rule.by_base_name else f.path for f in files}
    if len(set(names)) != len(names) or not rule.required <= listed:
        wanted = ", ".join(sorted(rule.required))
        raise ManifestError(f"the manifest must list {wanted} and each file once: {names}")
    return Manifest(signed.fabric, signed.snapshot_digest, files, signed.sequence)


def _taken(entry: evidence_manifest.ManifestFile, rule: FileRule) -> ManifestFile | None:
    if rule.takes(entry.path):
        return ManifestFile(entry.path, entry.sha256, entry.bytes)
    if not rule.others_refused:
        return None
    raise ManifestError(
        f"the manifest lists {entry.path!r}, not one of {', '.join(sorted(rule.paths))}"
    )
