"""A rotation retires trust: the keyring marks the old key, a transition statement signed by both
keys is published, and a retired key verifies only what it could sign while it was active."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient

from api.app import create_app
from policies.evidence.dsse import sign_envelope
from policies.evidence.key_transition import verify_transition
from policies.evidence.keyring import KeyringEntry, parse_keyring
from policies.evidence.merkle import root_hash
from policies.evidence.signed_note import checkpoint_text, sign_note
from tenancy.record import audit_log
from tenancy.store.settings import Settings
from tests.builders import LOCAL_URL
from tests.conftest import LOOPBACK_CLIENT
from tests.demo_db import demo_database
from tests.keys import keys_create
from tests.test_signing_keys import invoke, issue_proof, sql, uow_of


@pytest.fixture
def demo(tmp_path: Path) -> str:
    """The demo database with its key files beside it (`isofabric keys create`)."""
    url = demo_database(tmp_path / "isofabric.db")
    keys_create(url)
    return url


def rotate(url: str, directory: Path) -> Ed25519PrivateKey:
    """Rotate; the retired private key, as whoever kept a copy of its file has it."""
    pem = (directory / "isofabric-signing.key").read_bytes()
    result = invoke("keys", "rotate", "--db", url)
    assert result.exit_code == 0, result.output
    key = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(key, Ed25519PrivateKey)
    return key


def keyring(directory: Path) -> list[KeyringEntry]:
    path = directory / "isofabric-keyring.jsonl"
    return parse_keyring(path.read_text(), str(path))


def rotation_index(url: str) -> int:
    [(index,)] = sql(url, "SELECT \"index\" FROM audit_entry WHERE action = 'keys.rotate'")
    return int(index)


def test_rotation_marks_the_old_key_retired_and_publishes_a_transition(demo, tmp_path):
    before = keyring(tmp_path)
    rotate(demo, tmp_path)

    old, new = keyring(tmp_path)
    assert old.keyid == before[0].keyid and new.retired is None
    assert old.retired is not None and old.retired.log_size == rotation_index(demo)
    app = create_app(Settings(database_url=demo))
    with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as client:
        [statement] = client.get("/v1/keys/transitions").json()["transitions"]
        published = client.get("/v1/keys").json()["keys"]
    transition = verify_transition(statement, before)
    assert transition.new.keyid == new.keyid and transition.retirement == old.retired
    assert [k["status"] for k in published] == ["retired", "active"]
    assert published[0]["retired"]["log_size"] == old.retired.log_size
    listed = json.loads(invoke("keys", "transitions", "--db", demo).stdout)["transitions"]
    assert listed == [statement]


def test_a_checkpoint_the_retired_key_signs_after_its_retirement_fails_audit_verify(demo, tmp_path):
    retired = rotate(demo, tmp_path)
    assert invoke("audit", "verify", "--db", demo).exit_code == 0
    # Whoever kept the old key file signs a checkpoint of today's (larger) log: its root matches.
    hashes = [
        bytes.fromhex(h) for (h,) in sql(demo, 'SELECT leaf_hash FROM audit_entry ORDER BY "index"')
    ]
    name = keyring(tmp_path)[0].name
    note = sign_note(checkpoint_text(name, len(hashes), root_hash(hashes)), name, retired)
    sql(demo, "DELETE FROM audit_checkpoint")
    sql(
        demo,
        "INSERT INTO audit_checkpoint (size, root_hash, note, created_at) "
        "VALUES (:size, :root, :note, CURRENT_TIMESTAMP)",
        size=len(hashes),
        root=base64.b64encode(root_hash(hashes)).decode(),
        note=note,
    )

    result = invoke("audit", "verify", "--db", demo)

    assert result.exit_code == 1, result.output
    assert "signed after its retirement" in result.output
    assert f"first bad index: {rotation_index(demo)}" in result.output


def test_a_proof_the_retired_key_signs_after_its_retirement_fails_and_older_ones_verify(
    demo,
    tmp_path,
):
    ring = str(tmp_path / "isofabric-keyring.jsonl")
    older = issue_proof(demo, tmp_path, "older.json")
    retired = rotate(demo, tmp_path)
    envelope = json.loads(older.read_text())["envelope"]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    later = datetime.now(UTC) + timedelta(days=1)
    statement["predicate"]["time"] = later.isoformat().replace("+00:00", "Z")
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(sign_envelope(statement, retired)))

    assert invoke("proof", "verify", str(older), "--keyring", ring).exit_code == 0
    result = invoke("proof", "verify", str(forged), "--keyring", ring)
    assert result.exit_code == 1
    assert "after the key retired" in result.output
    pem = tmp_path / "old.pem"  # pinning the old key by hand does not lift its retirement
    pem.write_text(keyring(tmp_path)[0].pem)
    pinned = invoke("proof", "verify", str(forged), "--key", str(pem), "--keyring", ring)
    assert pinned.exit_code == 1 and "after the key retired" in pinned.output


def test_a_rotation_without_the_old_key_file_retires_it_without_a_transition(demo, tmp_path):
    (tmp_path / "isofabric-signing.key").unlink()  # lost: nobody can sign a hand-over

    result = invoke("keys", "rotate", "--db", demo)

    assert result.exit_code == 0, result.output
    old, new = keyring(tmp_path)
    assert old.retired is not None and new.retired is None
    assert json.loads(invoke("keys", "transitions", "--db", demo).stdout)["transitions"] == []
    assert audit_log.checkpoint(uow_of(demo)).size > 0


def test_keys_create_bounds_a_key_an_earlier_version_retired_without_marking_it(demo, tmp_path):
    rotate(demo, tmp_path)
    index = rotation_index(demo)
    # As an earlier version left it: the keyring lists both keys alike, no transition is kept.
    path = tmp_path / "isofabric-keyring.jsonl"
    plain = [KeyringEntry.of(e.name, e.pem) for e in keyring(tmp_path)]
    path.write_text("".join(e.line() + "\n" for e in plain))
    sql(demo, "UPDATE signing_key SET transition = NULL")

    result = invoke("keys", "create", "--db", demo)

    assert result.exit_code == 0, result.output
    old, new = keyring(tmp_path)
    assert old.retired is not None and old.retired.log_size == index and new.retired is None
    assert f"marked {old.name} retired in the keyring" in result.output


def test_restoring_a_backup_from_before_a_rotation_keeps_the_rotation(demo, tmp_path):
    backup = tmp_path / "before-rotation.db"
    assert invoke("db", "backup", str(backup), "--db", demo).exit_code == 0
    rotate(demo, tmp_path)
    [statement] = json.loads(invoke("keys", "transitions", "--db", demo).stdout)["transitions"]

    restored = invoke("db", "restore", str(backup), "--db", demo)

    assert restored.exit_code == 0, restored.output
    keys = json.loads(invoke("keys", "list", "--db", demo).stdout)["keys"]
    assert [(k["name"], k["status"]) for k in keys] == [
        (e.name, "retired" if e.retired else "active") for e in keyring(tmp_path)
    ]
    listed = json.loads(invoke("keys", "transitions", "--db", demo).stdout)["transitions"]
    assert listed == [statement]
    assert audit_log.checkpoint(uow_of(demo)).size > 0  # the service signs again
    assert invoke("audit", "verify", "--db", demo).exit_code == 0
