"""The command line reports trouble in one line with exit status 2 (issue 10, item 21).

Only `serve`, `db upgrade`, `db restore` and `keys create` may create a SQLite database file;
every other command that needs the database refuses a missing one instead of starting an empty
``./isofabric.db`` wherever it runs. Commands that work on files alone need no database.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from policies.errors import NotFoundError
from tests.demo_db import demo_database
from tests.keys import keys_create

runner = CliRunner()
TROUBLE = 2
MISSING = "error: no database at "
# Every command that reads or writes the database, and refuses to run without one.
NEEDS_DATABASE = [
    ["verify", "--fabric", "ib-east"],
    ["render", "--fabric", "ib-east", "--out", "bundle"],
    ["audit-config", "partitions.conf", "--fabric", "ib-east"],
    ["audit", "export"],
    ["audit", "verify"],
    ["token", "create", "--role", "operator", "--name", "ops"],
    ["token", "list"],
    ["token", "revoke", "0123"],
    ["keys", "rotate"],
    ["keys", "list"],
    ["proof", "issue", "--tenant", "acme", "--fabric", "ib-east"],
    ["db", "backup", "copy.db"],
]
# The commands that may create the database (serve: tests/test_cli_serve_warning.py).
CREATE_DATABASE = [["db", "upgrade"], ["keys", "create"]]


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory with no database configured: the default ./isofabric.db."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "partitions.conf").write_text("Default=0x7fff, ipoib : ALL=limited ;\n")
    monkeypatch.chdir(work)
    for name in ("ISOFABRIC_DATABASE_URL", "ISOFABRIC_DEBUG", "ISOFABRIC_KEYRING_FILE"):
        monkeypatch.delenv(name, raising=False)
    return work


@pytest.fixture
def database(tmp_path: Path) -> str:
    """The demo fabrics and tenants, with the key files."""
    url = demo_database(tmp_path / "isofabric.db")
    keys_create(url)
    return url


def one_error_line(result: object) -> str:
    """The single line a reported failure prints on stderr (and nothing else there)."""
    stderr = result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return str(lines[0])


@pytest.mark.parametrize("command", NEEDS_DATABASE, ids=" ".join)
def test_a_command_run_where_there_is_no_database_refuses_and_creates_none(elsewhere, command):
    result = runner.invoke(app, command)

    assert result.exit_code == TROUBLE, result.output
    line = one_error_line(result)
    assert line.startswith(MISSING + str(elsewhere / "isofabric.db"))
    assert "isofabric db upgrade" in line and "ISOFABRIC_DATABASE_URL" in line
    assert sorted(p.name for p in elsewhere.iterdir()) == ["partitions.conf"]


@pytest.mark.parametrize("command", NEEDS_DATABASE, ids=" ".join)
def test_a_missing_database_named_with_db_is_refused_too(elsewhere, tmp_path, command):
    missing = tmp_path / "typo.db"

    result = runner.invoke(app, [*command, "--db", f"sqlite:///{missing}"])

    assert result.exit_code == TROUBLE, result.output
    assert one_error_line(result).startswith(MISSING + str(missing))
    assert not missing.exists()


@pytest.mark.parametrize("command", CREATE_DATABASE, ids=" ".join)
def test_db_upgrade_and_keys_create_create_the_database(elsewhere, command):
    result = runner.invoke(app, command)

    assert result.exit_code == 0, result.output
    assert (elsewhere / "isofabric.db").stat().st_mode & 0o777 == 0o600


def test_commands_on_files_alone_need_no_database(elsewhere):
    proof = elsewhere / "proof.json"
    proof.write_text("{}")

    checked = runner.invoke(app, ["check-partitions", "partitions.conf"])
    verified = runner.invoke(app, ["proof", "verify", str(proof), "--keyring", "none.jsonl"])

    assert checked.exit_code == 0, checked.output
    assert verified.exit_code == 1 and "FAILED" in verified.output  # a verdict, not a refusal
    assert not (elsewhere / "isofabric.db").exists()


@pytest.mark.parametrize(
    ("command", "detail"),
    [
        (["verify", "--fabric", "ib-eats"], "error: fabric 'ib-eats' does not exist"),
        (["render", "--fabric", "ib-eats", "--out", "o"], "error: fabric 'ib-eats' does not exist"),
        (["proof", "issue", "--tenant", "acme", "--fabric", "ib-eats"], "'ib-eats'"),
        (["proof", "issue", "--tenant", "acne", "--fabric", "ib-east"], "'acne'"),
        (["token", "revoke", "no-such-token"], "no-such-token"),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else "",
)
def test_a_typo_in_a_name_is_one_line_and_exit_2(database, command, detail):
    result = runner.invoke(app, [*command, "--db", database])

    assert result.exit_code == TROUBLE, result.output
    assert detail in one_error_line(result)
    assert result.stdout == ""


def test_a_file_that_is_not_a_database_is_one_line(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_text("not a database\n" * 100)

    result = runner.invoke(app, ["token", "list", "--db", f"sqlite:///{junk}"])

    assert result.exit_code == TROUBLE
    assert one_error_line(result) == "error: database: file is not a database"


def test_a_file_that_cannot_be_written_is_one_line(database, tmp_path):
    blocked = tmp_path / "bundle"
    blocked.write_text("a file where the directory should be")

    result = runner.invoke(
        app, ["render", "--fabric", "ib-east", "--out", str(blocked), "--db", database]
    )

    assert result.exit_code == TROUBLE
    assert str(blocked) in one_error_line(result)


@pytest.mark.parametrize("how", [["--debug"], []], ids=["--debug", "ISOFABRIC_DEBUG=1"])
def test_debug_shows_the_exception_instead(database, how):
    env = {} if how else {"ISOFABRIC_DEBUG": "1"}

    result = runner.invoke(app, [*how, "verify", "--fabric", "ib-eats", "--db", database], env=env)

    assert isinstance(result.exception, NotFoundError)
    assert "error:" not in result.output


def test_the_console_script_prints_one_line_and_no_traceback(database, tmp_path):
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("ISOFABRIC_")}
    done = subprocess.run(
        [sys.executable, "-c", "from cli import main; main()", "verify", "--fabric", "ib-eats"],
        cwd=tmp_path,
        env={**inherited, "ISOFABRIC_DATABASE_URL": database},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == TROUBLE
    assert done.stderr == "error: fabric 'ib-eats' does not exist\n"
    assert done.stdout == ""


def test_a_setting_the_environment_gets_wrong_is_one_line(database, monkeypatch):
    monkeypatch.setenv("ISOFABRIC_PKEY_QUARANTINE_SECONDS", "a day")

    result = runner.invoke(app, ["verify", "--fabric", "ib-east", "--db", database])

    assert result.exit_code == TROUBLE
    assert one_error_line(result).startswith("error: configuration: ")


def test_a_malformed_m_key_is_a_usage_error(elsewhere):
    result = runner.invoke(app, ["collect", "ib", "--m-key", "zz"])

    assert result.exit_code == TROUBLE
    assert "'zz' is not a number" in result.output and "Traceback" not in result.output


def test_a_file_error_names_the_path_as_given_not_an_errno():
    from cli.errors import detail_of

    missing = FileNotFoundError(2, "No such file or directory", "conf/partitions.conf")
    moved = PermissionError(13, "Permission denied", "a.db", None, "b.db")  # a rename

    assert detail_of(missing) == "conf/partitions.conf: No such file or directory"
    assert detail_of(moved) == "a.db -> b.db: Permission denied"
    assert detail_of(OSError("disk on fire")) == "disk on fire"
