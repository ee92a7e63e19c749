"""The signed manifest: only a manifest a pinned key signed, for this fabric, is acted on."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.manifest import ManifestError, verify_manifest
from agent.trust import Trust
from policies.evidence.keyring import KeyringEntry
from tenancy.store.key_store import public_pem

from .fakes import ACME, FABRIC, bundle, manifest_document, partitions, sign

KEY = Ed25519PrivateKey.generate()
OTHER = Ed25519PrivateKey.generate()


def envelope(**changes: Any) -> dict[str, Any]:
    document = {**manifest_document(bundle(partitions(ACME))), **changes}
    return sign(document, KEY)


def test_a_manifest_signed_with_a_pinned_key_gives_its_files_by_conf_dir_name():
    manifest = verify_manifest(envelope(), [OTHER.public_key(), KEY.public_key()], FABRIC)

    assert [f.name for f in manifest.files] == ["opensm.conf", "partitions.conf", "qos-policy.conf"]
    partitions_file = manifest.file("partitions.conf")
    assert partitions_file is not None and partitions_file.path == "opensm/partitions.conf"
    assert manifest.digest.startswith("sha256:")


def test_the_manifest_carries_its_signed_sequence():
    assert verify_manifest(envelope(sequence=42), [KEY.public_key()], FABRIC).sequence == 42


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"fabric": "ib-west"}, "not 'ib-east'"),
        ({"_type": "https://example.com/other"}, "not an artifact manifest"),
        ({"snapshot_digest": "md5:1"}, "snapshot_digest"),
        ({"files": [{"path": "../etc/passwd", "sha256": "0" * 64, "bytes": 1}]}, "bundle path"),
        ({"files": [{"path": "etc/passwd", "sha256": "0" * 64, "bytes": 1}]}, "not one of"),
        ({"files": [{"path": "opensm.conf", "sha256": "0" * 64, "bytes": 1}]}, "partitions.conf"),
        ({"files": "x"}, "not a list"),
        ({"sequence": None}, "sequence"),
        ({"sequence": -1}, "sequence"),
    ],
)
def test_a_signed_manifest_this_agent_cannot_act_on_is_refused(changes, message):
    with pytest.raises(ManifestError, match=message):
        verify_manifest(envelope(**changes), [KEY.public_key()], FABRIC)


def test_a_manifest_signed_by_another_key_is_refused():
    with pytest.raises(ManifestError, match="no signature"):
        verify_manifest(envelope(), [OTHER.public_key()], FABRIC)


def test_a_payload_changed_after_signing_is_refused():
    signed = envelope()
    document = json.loads(base64.b64decode(signed["payload"]))
    document["files"][1]["sha256"] = "f" * 64
    signed["payload"] = base64.b64encode(json.dumps(document).encode()).decode()

    with pytest.raises(ManifestError, match="no signature"):
        verify_manifest(signed, [KEY.public_key()], FABRIC)


@pytest.mark.parametrize(
    "changes",
    [{"payloadType": "application/vnd.in-toto+json"}, {"signatures": []}, {"payload": "%%"}],
)
def test_a_malformed_envelope_is_refused(changes):
    with pytest.raises(ManifestError):
        verify_manifest({**envelope(), **changes}, [KEY.public_key()], FABRIC)


def test_the_pinned_key_is_a_pem_or_a_keyring(tmp_path: Path):
    pem = tmp_path / "service.pub"
    pem.write_text(public_pem(KEY.public_key()))
    ring = tmp_path / "keyring.jsonl"
    ring.write_text(
        KeyringEntry.of("old", public_pem(OTHER.public_key())).line()
        + "\n"
        + KeyringEntry.of("new", public_pem(KEY.public_key())).line()
        + "\n"
    )

    assert len(Trust.load(pem).active()) == 1
    keys = Trust.load(ring).active()
    assert len(keys) == 2
    verify_manifest(envelope(), keys, FABRIC)


def test_a_key_file_that_is_neither_is_refused(tmp_path: Path):
    junk = tmp_path / "junk"
    junk.write_text("hello\n")

    with pytest.raises(ManifestError, match="not an Ed25519"):
        Trust.load(junk)
