"""Issue 10, item 8: the signing key is kept out of the database it protects.

Before: the Ed25519 private key sat in `signing_key.private_pem` (and the OpenSM keys in
`sm_secret`) in a database file created 0644, the key was created on first use, and `audit verify`
and `proof verify` trusted the keys the database listed. Whoever could change rows could re-sign
checkpoints so that `audit verify` exited 0, and forge proofs. Now the private key is a 0600 key
file made by `isofabric keys create`, the database holds public keys only, the OpenSM keys derive
from a 0600 secret file, and verifiers trust only a pinned keyring.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import text
from typer.testing import CliRunner

from cli import app
from policies.errors import KeyUnavailableError
from policies.evidence.audit_log import HASHED_FIELDS, verify_log
from policies.evidence.merkle import entry_leaf_hash, root_hash
from policies.evidence.proofs import sign_envelope
from policies.evidence.signed_note import checkpoint_text, sign_note
from tenancy.record import audit_log
from tenancy.record.subnet_manager import derive_key
from tenancy.store import key_store
from tenancy.store.db import alembic_config, make_engine
from tenancy.store.settings import DEFAULT_AUDIT_ORIGIN, Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.bootstrap import prepare_database
from tests.demo_db import demo_database

runner = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, list(args), env=env)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def demo_db(directory: Path) -> str:
    """The demo state in ``directory/isofabric.db`` (no key yet)."""
    return demo_database(directory / "isofabric.db")


def keys_create(url: str, *extra: str) -> dict[str, Any]:
    result = invoke("keys", "create", "--db", url, *extra)
    assert result.exit_code == 0, result.output
    created: dict[str, Any] = json.loads(result.stdout)
    return created


def uow_of(url: str) -> UnitOfWork:
    return UnitOfWork(make_engine(url), Settings(database_url=url))


def sql(url: str, statement: str, **params: Any) -> list[Any]:
    engine = make_engine(url)
    with engine.begin() as connection:
        result = connection.execute(text(statement), params)
        rows = list(result) if result.returns_rows else []
    engine.dispose()
    return rows


def keyring_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def demo(tmp_path: Path) -> str:
    """The demo database with its key installed by `isofabric keys create`."""
    url = demo_db(tmp_path)
    keys_create(url)
    return url


# --- files and their modes ---------------------------------------------------------------------


def test_the_database_file_and_its_wal_are_created_0600(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"

    result = invoke("db", "upgrade", "--db", url)

    assert result.exit_code == 0, result.output
    assert mode(tmp_path / "fresh.db") == 0o600
    for companion in ("fresh.db-wal", "fresh.db-shm"):
        if (tmp_path / companion).exists():
            assert mode(tmp_path / companion) == 0o600


def test_an_existing_world_readable_database_is_restricted_to_its_owner(tmp_path):
    database = tmp_path / "old.db"
    sqlite3.connect(database).close()
    database.chmod(0o644)

    prepare_database(make_engine(f"sqlite:///{database}"))

    assert mode(database) == 0o600


def test_keys_create_writes_0600_key_files_a_keyring_and_no_secret_in_the_database(tmp_path):
    url = demo_db(tmp_path)

    created = keys_create(url)

    key_file = tmp_path / "isofabric-signing.key"
    secret_file = tmp_path / "isofabric-opensm.secret"
    keyring = tmp_path / "isofabric-keyring.jsonl"
    assert created["created"] is True
    assert (created["key_file"], created["keyring_file"]) == (str(key_file), str(keyring))
    assert mode(key_file) == 0o600 and mode(secret_file) == 0o600
    assert "PRIVATE KEY" in key_file.read_text()
    [entry] = keyring_lines(keyring)
    assert (entry["name"], entry["keyid"], entry["pem"]) == (
        DEFAULT_AUDIT_ORIGIN,
        created["keyid"],
        created["pem"],
    )
    columns = {row[1] for row in sql(url, "PRAGMA table_info(signing_key)")}
    assert "private_pem" not in columns
    assert not sql(url, "SELECT name FROM sqlite_master WHERE name = 'sm_secret'")
    # The CLI closes its connections, which folds the -wal file into the database file.
    files = [tmp_path / "isofabric.db", tmp_path / "isofabric.db-wal"]
    raw = b"".join(path.read_bytes() for path in files if path.exists())
    assert b"PRIVATE KEY" not in raw


def test_keys_create_twice_keeps_the_key(demo, tmp_path):
    key_file = tmp_path / "isofabric-signing.key"
    secret = (tmp_path / "isofabric-opensm.secret").read_text()
    before = key_file.read_text()

    again = keys_create(demo)

    assert again["created"] is False
    assert key_file.read_text() == before
    assert (tmp_path / "isofabric-opensm.secret").read_text() == secret
    assert len(keyring_lines(tmp_path / "isofabric-keyring.jsonl")) == 1
    assert sql(demo, "SELECT count(*) FROM signing_key")[0][0] == 1


def test_keys_create_says_created_only_for_what_it_created(tmp_path):
    url = f"sqlite:///{tmp_path / 'isofabric.db'}"
    runner = CliRunner()

    first = runner.invoke(app, ["keys", "create", "--db", url])
    again = runner.invoke(app, ["keys", "create", "--db", url])
    (tmp_path / "isofabric-opensm.secret").unlink()
    secret_only = runner.invoke(app, ["keys", "create", "--db", url])

    assert "created the signing key" in first.stderr and "OpenSM secret" in first.stderr
    assert json.loads(first.stdout)["files_written"] == [
        str(tmp_path / name)
        for name in ("isofabric-signing.key", "isofabric-keyring.jsonl", "isofabric-opensm.secret")
    ]
    assert again.stderr.strip().endswith("nothing created") and "created the" not in again.stderr
    assert json.loads(again.stdout)["files_written"] == []
    assert secret_only.stderr.strip() == (
        f"created the OpenSM secret {tmp_path / 'isofabric-opensm.secret'}"
    )


def test_keys_create_without_the_key_file_refuses_to_make_a_second_key(demo, tmp_path):
    (tmp_path / "isofabric-signing.key").rename(tmp_path / "elsewhere.key")

    result = invoke("keys", "create", "--db", demo)

    assert result.exit_code == 2
    assert "created elsewhere" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "isofabric-signing.key").exists()
    assert sql(demo, "SELECT count(*) FROM signing_key")[0][0] == 1


def test_no_key_is_created_on_first_use(tmp_path):
    url = demo_db(tmp_path)
    uow = uow_of(url)

    with pytest.raises(KeyUnavailableError, match="isofabric keys create"):
        audit_log.checkpoint(uow)

    assert sql(url, "SELECT count(*) FROM signing_key")[0][0] == 0
    assert not (tmp_path / "isofabric-signing.key").exists()
    listed = invoke("keys", "list", "--db", url)
    assert json.loads(listed.output) == {"keys": []}


# --- audit verify trusts the keyring, not the database -----------------------------------------


def forge_log(url: str, attacker: Ed25519PrivateKey, name: str) -> list[str]:
    """What a database writer could do: edit entry 3 (and its leaf hash), then re-sign a
    checkpoint of the edited log with their own key under `name`; returns the new notes."""
    uow = uow_of(url)
    entry = json.loads(audit_log.export_lines(uow)[3])
    entry["principal"] = "mallory"
    leaf = entry_leaf_hash({k: entry.get(k) for k in HASHED_FIELDS}).hex()
    sql(
        url,
        "UPDATE audit_entry SET principal = 'mallory', leaf_hash = :l WHERE \"index\" = 3",
        l=leaf,
    )
    hashes = [
        bytes.fromhex(r[0]) for r in sql(url, 'SELECT leaf_hash FROM audit_entry ORDER BY "index"')
    ]
    note = sign_note(
        checkpoint_text(DEFAULT_AUDIT_ORIGIN, len(hashes), root_hash(hashes)), name, attacker
    )
    sql(url, "DELETE FROM audit_checkpoint")
    sql(
        url,
        "INSERT INTO audit_checkpoint (size, root_hash, note, created_at) "
        "VALUES (:s, :r, :n, '2026-01-01 00:00:00')",
        s=len(hashes),
        r=base64.b64encode(root_hash(hashes)).decode(),
        n=note,
    )
    return [note]


def test_a_log_re_signed_after_editing_the_key_row_fails_verification(demo, tmp_path):
    audit_log.checkpoint(uow_of(demo))
    attacker = Ed25519PrivateKey.generate()
    attacker_pem = key_store.public_pem(attacker.public_key())
    sql(demo, "UPDATE signing_key SET public_pem = :p WHERE status = 'active'", p=attacker_pem)

    notes = forge_log(demo, attacker, DEFAULT_AUDIT_ORIGIN)

    # The forgery is complete: checked with the keys the database lists, it verifies ...
    uow = uow_of(demo)
    documents = [json.loads(line) for line in audit_log.export_lines(uow)]
    assert verify_log(documents, notes, {DEFAULT_AUDIT_ORIGIN: attacker.public_key()}).ok
    # ... but not with the pinned keyring, by default or named.
    keyring = str(tmp_path / "isofabric-keyring.jsonl")
    for extra in ((), ("--keyring", keyring)):
        result = invoke("audit", "verify", "--db", demo, *extra)
        assert result.exit_code == 1, result.output
        assert "first bad index: 0" in result.output


def test_a_forged_key_row_under_a_new_name_does_not_verify_either(demo, tmp_path):
    audit_log.checkpoint(uow_of(demo))
    attacker = Ed25519PrivateKey.generate()
    sql(demo, "UPDATE signing_key SET status = 'retired'")
    sql(
        demo,
        "INSERT INTO signing_key (name, public_pem, status, created_at) "
        "VALUES ('evil', :p, 'active', '2026-01-01 00:00:00')",
        p=key_store.public_pem(attacker.public_key()),
    )

    forge_log(demo, attacker, "evil")

    result = invoke("audit", "verify", "--db", demo)
    assert result.exit_code == 1
    assert "no known key named 'evil'" in result.output


def test_audit_verify_without_any_trusted_key_refuses_rather_than_trust_the_database(tmp_path):
    url = demo_db(tmp_path)  # no `keys create`: no keyring

    result = invoke("audit", "verify", "--db", url)

    assert result.exit_code == 2
    assert "no keyring" in result.output and "never trusted" in result.output


def test_key_still_pins_a_single_public_key(demo, tmp_path):
    audit_log.checkpoint(uow_of(demo))
    pem = tmp_path / "key.pem"
    pem.write_text(keyring_lines(tmp_path / "isofabric-keyring.jsonl")[0]["pem"])
    other = tmp_path / "other.pem"
    other.write_text(key_store.public_pem(Ed25519PrivateKey.generate().public_key()))

    assert invoke("audit", "verify", "--db", demo, "--key", str(pem)).exit_code == 0
    assert invoke("audit", "verify", "--db", demo, "--key", str(other)).exit_code == 1


# --- proof verify trusts the keyring --------------------------------------------------------


def issue_proof(url: str, directory: Path, name: str) -> Path:
    result = invoke("proof", "issue", "--tenant", "acme", "--fabric", "ib-east", "--db", url)
    assert result.exit_code == 0, result.output
    path = directory / name
    path.write_text(result.output)
    return path


def test_a_proof_signed_by_a_key_outside_the_keyring_fails(demo, tmp_path):
    keyring = str(tmp_path / "isofabric-keyring.jsonl")
    genuine = issue_proof(demo, tmp_path, "proof.json")
    envelope = json.loads(genuine.read_text())["envelope"]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["tenant"] = "globex"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(sign_envelope(statement, Ed25519PrivateKey.generate())))

    assert invoke("proof", "verify", str(genuine), "--keyring", keyring).exit_code == 0
    result = invoke("proof", "verify", str(forged), "--keyring", keyring)
    assert result.exit_code == 1
    assert "signature verification failed" in result.output
    by_env = invoke("proof", "verify", str(genuine), env={"ISOFABRIC_KEYRING_FILE": keyring})
    assert by_env.exit_code == 0, by_env.output


# --- rotation ----------------------------------------------------------------------------------


def test_rotation_appends_to_the_keyring_and_everything_signed_before_still_verifies(
    demo, tmp_path
):
    keyring = tmp_path / "isofabric-keyring.jsonl"
    key_file = tmp_path / "isofabric-signing.key"
    old_key = key_file.read_text()
    audit_log.checkpoint(uow_of(demo))
    old_proof = issue_proof(demo, tmp_path, "old.json")

    rotated = invoke("keys", "rotate", "--db", demo)

    assert rotated.exit_code == 0, rotated.output
    new = json.loads(rotated.output)
    assert [e["keyid"] for e in keyring_lines(keyring)][1:] == [new["keyid"]]
    assert key_file.read_text() != old_key and mode(key_file) == 0o600
    audit_log.checkpoint(uow_of(demo))
    new_proof = issue_proof(demo, tmp_path, "new.json")
    assert json.loads(new_proof.read_text())["envelope"]["signatures"][0]["keyid"] == new["keyid"]
    verified = invoke("audit", "verify", "--db", demo, "--keyring", str(keyring))
    assert verified.exit_code == 0, verified.output
    for proof in (old_proof, new_proof):
        result = invoke("proof", "verify", str(proof), "--keyring", str(keyring))
        assert result.exit_code == 0, result.output


def test_a_replica_with_the_retired_key_file_refuses_to_sign(demo, tmp_path):
    stale = tmp_path / "stale.key"
    stale.write_text((tmp_path / "isofabric-signing.key").read_text())
    assert invoke("keys", "rotate", "--db", demo).exit_code == 0
    replica = UnitOfWork(
        make_engine(demo), Settings(database_url=demo, signing_key_file=str(stale))
    )

    # The rotation grew the log, so a checkpoint is due: the replica must not sign it.
    with pytest.raises(KeyUnavailableError, match="not the active key"):
        audit_log.checkpoint(replica)


# --- the OpenSM keys -------------------------------------------------------------------------


def test_opensm_keys_derive_from_the_secret_file_and_are_not_stored(demo, tmp_path):
    out = tmp_path / "bundle"
    result = invoke("render", "--fabric", "ib-east", "--out", str(out), "--db", demo)
    assert result.exit_code == 0, result.output
    conf = (out / "opensm" / "opensm.conf").read_text()
    secret = bytes.fromhex((tmp_path / "isofabric-opensm.secret").read_text())

    m_key = derive_key(secret, "ib-east", "m_key")

    assert f"m_key 0x{m_key:016x}" in conf
    assert f"{m_key:016x}".encode() not in (tmp_path / "isofabric.db").read_bytes()
    other = derive_key(bytes(32), "ib-east", "m_key")
    assert other != m_key and derive_key(secret, "ib-west", "m_key") != m_key


def test_rendering_opensm_files_without_the_secret_names_the_file_and_the_command(tmp_path):
    url = demo_db(tmp_path)

    result = invoke("render", "--fabric", "ib-east", "--out", str(tmp_path / "o"), "--db", url)

    assert result.exit_code == 2
    assert "isofabric-opensm.secret" in result.stderr
    assert "isofabric keys create" in result.stderr


# --- upgrading a database that kept the keys ---------------------------------------------------


def test_the_migration_drops_private_keys_and_opensm_keys_and_retires_the_exposed_key(tmp_path):
    from alembic import command

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    command.upgrade(alembic_config(url), "0009")
    exposed = Ed25519PrivateKey.generate()
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO signing_key (name, private_pem, public_pem, status, created_at) "
                "VALUES (:n, :k, :p, 'active', '2026-01-01 00:00:00')"
            ),
            {
                "n": DEFAULT_AUDIT_ORIGIN,
                "k": key_store.private_pem(exposed),
                "p": key_store.public_pem(exposed.public_key()),
            },
        )
    engine.dispose()

    prepare_database(make_engine(url))

    assert sql(url, "SELECT name, status FROM signing_key") == [(DEFAULT_AUDIT_ORIGIN, "retired")]
    assert "private_pem" not in {row[1] for row in sql(url, "PRAGMA table_info(signing_key)")}
    assert not sql(url, "SELECT name FROM sqlite_master WHERE name = 'sm_secret'")
    created = keys_create(url, "--trust-retired")
    assert created["name"] == f"{DEFAULT_AUDIT_ORIGIN}.r2"
    assert created["trusted_retired"] == [DEFAULT_AUDIT_ORIGIN]
    names = [e["name"] for e in keyring_lines(tmp_path / "old-keyring.jsonl")]
    assert names == [DEFAULT_AUDIT_ORIGIN, f"{DEFAULT_AUDIT_ORIGIN}.r2"]


def test_a_database_re_created_beside_rotated_key_files_keeps_the_keyrings_name(demo, tmp_path):
    assert invoke("keys", "rotate", "--db", demo).exit_code == 0
    for name in ("isofabric.db", "isofabric.db-wal", "isofabric.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    url = demo_db(tmp_path)

    again = keys_create(url)

    assert (again["created"], again["name"]) == (False, f"{DEFAULT_AUDIT_ORIGIN}.r2")
    audit_log.checkpoint(uow_of(url))
    result = invoke("audit", "verify", "--db", url)
    assert result.exit_code == 0, result.output
    assert invoke("keys", "rotate", "--db", url).exit_code == 0  # a fresh name, not r2 again
    names = [e["name"] for e in keyring_lines(tmp_path / "isofabric-keyring.jsonl")]
    assert len(names) == len(set(names)) == 3
