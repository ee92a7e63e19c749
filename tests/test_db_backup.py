"""Backups hold the data: WAL checkpoint on shutdown, `db backup` and `db restore` (issue 10, 18).

Before, the service never folded SQLite's write-ahead log back into the database file: after a
clean stop ``isofabric.db`` alone had no tables, and copying it made an empty backup.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from typer.testing import CliRunner

from api.app import create_app
from cli import app as cli
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tests.builders import LOCAL_URL
from tests.conftest import LOOPBACK_CLIENT
from tests.docs.examples import host_argv
from tests.keys import keys_create

runner = CliRunner()
TROUBLE = 2


def rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    """`query` on the file `path` as it is (a copy has no -wal file: only the file counts)."""
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(query).fetchall()


def token_names(path: Path) -> list[tuple[str, bool]]:
    """Each API token's name and whether it is revoked."""
    found = rows(path, "SELECT name, revoked_at IS NOT NULL FROM api_token ORDER BY name")
    return [(name, bool(revoked)) for name, revoked in found]


def invoke(*args: str) -> Any:
    return runner.invoke(cli, list(args))


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    """A migrated database, with its key files beside it, in its own directory."""
    path = tmp_path / "srv" / "isofabric.db"
    path.parent.mkdir()
    keys_create(f"sqlite:///{path}")
    return path


def url_of(path: Path) -> str:
    return f"sqlite:///{path}"


def mint(path: Path, name: str) -> str:
    result = invoke("token", "create", "--role", "auditor", "--name", name, "--db", url_of(path))
    assert result.exit_code == 0, result.output
    listed = json.loads(invoke("token", "list", "--db", url_of(path), "--json").stdout)["data"]
    return str(next(token["id"] for token in listed if token["name"] == name))


# --- the service checkpoints the WAL when it stops ------------------------------------------


def test_after_a_clean_stop_the_database_file_alone_holds_the_data(tmp_path):
    live = tmp_path / "isofabric.db"
    app = create_app(Settings(database_url=url_of(live)))

    with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as client:
        created = client.post("/v1/tenants", json={"name": "initech", "kind": "internal"})
        assert created.status_code == 201, created.text

    copy = tmp_path / "copy" / "isofabric.db"
    copy.parent.mkdir()
    shutil.copyfile(live, copy)  # `cp isofabric.db`: the -wal file stays behind
    assert rows(copy, "SELECT name FROM tenant") == [("initech",)]
    wal = Path(f"{live}-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_an_engine_passed_in_is_checkpointed_but_left_open(tmp_path, monkeypatch):
    live = tmp_path / "isofabric.db"
    engine = make_engine(url_of(live))
    disposed: list[bool] = []
    monkeypatch.setattr(engine, "dispose", lambda *_args, **_kwargs: disposed.append(True))
    app = create_app(Settings(database_url=url_of(live)), engine=engine)

    with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as client:
        client.post("/v1/tenants", json={"name": "initech", "kind": "internal"})

    copy = tmp_path / "copy.db"
    shutil.copyfile(live, copy)
    assert rows(copy, "SELECT name FROM tenant") == [("initech",)]
    assert disposed == []  # the caller's engine (a test's shared database) stays usable
    Engine.dispose(engine)


# --- db backup ------------------------------------------------------------------------------


def test_backup_change_restore_brings_the_data_back(db_file, tmp_path):
    ops = mint(db_file, "ops")
    backup = tmp_path / "backups" / "monday.db"
    backup.parent.mkdir()

    made = invoke("db", "backup", str(backup), "--db", url_of(db_file))
    assert made.exit_code == 0, made.output
    assert invoke("token", "revoke", ops, "--db", url_of(db_file)).exit_code == 0
    mint(db_file, "late")
    assert token_names(db_file) == [("late", False), ("ops", True)]
    # docs/operators/command-line.md's `sh {.host #db-restore}` line, on this backup
    [documented] = host_argv("docs/operators/command-line.md", "db-restore")
    assert documented[:3] == ["isofabric", "db", "restore"] and len(documented) == 4
    restored = invoke(*documented[1:3], str(backup), "--db", url_of(db_file))

    assert restored.exit_code == 0, restored.output
    assert token_names(db_file) == [("ops", False)]
    assert db_file.stat().st_mode & 0o777 == 0o600
    assert "db upgrade" not in restored.output  # the backup is at this version's schema


def test_a_backup_is_one_private_file_that_holds_everything(db_file, tmp_path):
    mint(db_file, "ops")
    backup = tmp_path / "b.db"

    result = invoke("db", "backup", str(backup), "--db", url_of(db_file))

    assert result.exit_code == 0, result.output
    assert backup.stat().st_mode & 0o777 == 0o600
    assert not Path(f"{backup}-wal").exists()
    assert rows(backup, "PRAGMA journal_mode") == [("delete",)]  # no -wal file belongs to it
    assert token_names(backup) == [("ops", False)]
    # The key files are not in it; the output names them so that the operator backs them up.
    assert "isofabric-signing.key" in result.output and "isofabric-opensm.secret" in result.output


def test_a_backup_taken_while_another_process_writes_holds_the_log_too(db_file, tmp_path):
    # A writer whose transactions are still only in the -wal file (its connection stays open,
    # so nothing checkpoints them): the backup API copies what readers see, log included.
    with closing(sqlite3.connect(db_file, isolation_level=None)) as writer:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("UPDATE qos_class SET vlarb_weight = 77 WHERE name = 'gold'")
        assert Path(f"{db_file}-wal").stat().st_size > 0
        backup = tmp_path / "b.db"

        result = invoke("db", "backup", str(backup), "--db", url_of(db_file))

    assert result.exit_code == 0, result.output
    assert rows(backup, "SELECT vlarb_weight FROM qos_class WHERE name = 'gold'") == [(77,)]


def test_backup_does_not_overwrite_a_file_unless_forced(db_file, tmp_path):
    backup = tmp_path / "b.db"
    backup.write_text("keep me")

    refused = invoke("db", "backup", str(backup), "--db", url_of(db_file))
    assert refused.exit_code == TROUBLE
    assert refused.stderr == f"error: {backup} exists (pass --force to replace it)\n"
    assert backup.read_text() == "keep me"

    forced = invoke("db", "backup", str(backup), "--force", "--db", url_of(db_file))
    assert forced.exit_code == 0, forced.output
    assert rows(backup, "SELECT count(*) FROM qos_class") == [(3,)]


# --- db restore -----------------------------------------------------------------------------


def test_restore_refuses_a_file_that_is_not_a_database_and_changes_nothing(db_file, tmp_path):
    mint(db_file, "ops")
    before = db_file.read_bytes()
    junk = tmp_path / "notes.txt"
    junk.write_text("these are not the tables you are looking for\n")

    result = invoke("db", "restore", str(junk), "--db", url_of(db_file))

    assert result.exit_code == TROUBLE
    assert result.stderr == f"error: {junk} is not an SQLite database\n"
    assert "Traceback" not in result.output
    assert db_file.read_bytes() == before


def test_restore_refuses_a_database_without_the_isofabric_schema(db_file, tmp_path):
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as connection:
        connection.execute("CREATE TABLE t (x)")

    result = invoke("db", "restore", str(other), "--db", url_of(db_file))

    assert result.exit_code == TROUBLE
    assert result.stderr.startswith(f"error: {other} is not an isofabric database")
    assert len(result.stderr.splitlines()) == 1


def set_revision(path: Path, revision: str) -> None:
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("UPDATE alembic_version SET version_num = ?", (revision,))


def test_restore_refuses_a_schema_revision_this_version_does_not_know(db_file, tmp_path):
    backup = tmp_path / "b.db"
    assert invoke("db", "backup", str(backup), "--db", url_of(db_file)).exit_code == 0
    set_revision(backup, "9999")  # made by a newer isofabric

    result = invoke("db", "restore", str(backup), "--db", url_of(db_file))

    assert result.exit_code == TROUBLE
    assert "schema revision 9999, which this version does not know" in result.stderr


def test_restoring_an_older_revision_says_to_run_db_upgrade(db_file, tmp_path):
    backup = tmp_path / "b.db"
    assert invoke("db", "backup", str(backup), "--db", url_of(db_file)).exit_code == 0
    set_revision(backup, "0001")

    result = invoke("db", "restore", str(backup), "--db", url_of(db_file))

    assert result.exit_code == 0, result.output
    assert "run `isofabric db upgrade`" in result.output


def test_restore_removes_the_old_databases_log_files(db_file, tmp_path):
    backup = tmp_path / "b.db"
    assert invoke("db", "backup", str(backup), "--db", url_of(db_file)).exit_code == 0
    # What an unclean stop leaves: a log written for the old file, which must not be replayed.
    Path(f"{db_file}-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(4092))
    Path(f"{db_file}-shm").write_bytes(bytes(32768))

    result = invoke("db", "restore", str(backup), "--db", url_of(db_file))

    assert result.exit_code == 0, result.output
    assert not Path(f"{db_file}-wal").exists() and not Path(f"{db_file}-shm").exists()
    assert rows(db_file, "SELECT count(*) FROM qos_class") == [(3,)]


def test_restore_onto_a_new_host_creates_the_database(db_file, tmp_path):
    backup = tmp_path / "b.db"
    assert invoke("db", "backup", str(backup), "--db", url_of(db_file)).exit_code == 0
    fresh = tmp_path / "new-host" / "isofabric.db"
    fresh.parent.mkdir()

    result = invoke("db", "restore", str(backup), "--db", url_of(fresh))

    assert result.exit_code == 0, result.output
    assert fresh.stat().st_mode & 0o777 == 0o600
    assert rows(fresh, "SELECT count(*) FROM qos_class") == [(3,)]


def test_restore_refuses_while_another_process_has_the_database_open(db_file, tmp_path):
    backup = tmp_path / "b.db"
    assert invoke("db", "backup", str(backup), "--db", url_of(db_file)).exit_code == 0

    with closing(sqlite3.connect(db_file)) as service:  # a running service's pooled connection
        service.execute("SELECT count(*) FROM qos_class").fetchall()
        result = invoke("db", "restore", str(backup), "--db", url_of(db_file))

    assert result.exit_code == TROUBLE
    assert result.stderr == f"error: {db_file} is open in another process: stop the service first\n"


@pytest.mark.parametrize(
    ("command", "tool"), [("backup", "pg_dump -Fc"), ("restore", "pg_restore")]
)
def test_postgresql_is_refused_naming_its_own_tools(tmp_path, command, tool):
    file = tmp_path / "b.db"
    if command == "restore":
        shutil.copyfile(Path(__file__), file)

    result = invoke("db", command, str(file), "--db", "postgresql://isofabric@db.example/isofabric")

    assert result.exit_code == TROUBLE
    assert len(result.stderr.splitlines()) == 1 and tool in result.stderr
    assert command != "backup" or not file.exists()


def test_a_backup_into_a_missing_directory_names_the_directory(db_file, tmp_path):
    target = tmp_path / "backups" / "2026" / "isofabric.db"

    result = invoke("db", "backup", str(target), "--db", url_of(db_file))

    assert result.exit_code == TROUBLE
    assert (
        result.output.strip() == f"error: no directory {target.parent} to write isofabric.db into"
    )
    assert not (tmp_path / "backups").exists()
