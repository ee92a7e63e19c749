"""`isofabric serve` warns when it listens beyond this host in open mode (issue 10, items 2, 25).

uvicorn is replaced by a recorder: the tests check what `serve` says and how it would run the
server, without opening a socket.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from cli import app
from tenancy.schemas import TokenCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import tokens
from tenancy.usecases.bootstrap import prepare_database

runner = CliRunner()


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every uvicorn.run call `serve` makes (nothing is served)."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda _app, **kwargs: calls.append(kwargs))
    # serve sends log records to stderr (api/request_log.py): not in this test process
    monkeypatch.setattr("cli.serve.configure_logging", lambda _format: {})
    monkeypatch.delenv("ISOFABRIC_ADMIN_TOKEN", raising=False)
    return calls


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'serve.db'}"


def serve(db_url: str, host: str) -> Any:
    result = runner.invoke(app, ["serve", "--host", host, "--db", db_url])
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "fabric-api.example"])
def test_serve_on_a_public_address_in_open_mode_warns_how_to_bootstrap(runs, db_url, host):
    result = serve(db_url, host)

    warning = result.stderr
    assert "warning" in warning and host in warning
    assert "open mode" in warning and "only clients on this host" in warning
    assert "ISOFABRIC_ADMIN_TOKEN" in warning and "isofabric token create" in warning
    assert "reverse proxy" in warning
    assert "warning" not in result.stdout
    assert len(runs) == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_serve_on_loopback_says_nothing_about_open_mode(runs, db_url, host):
    assert serve(db_url, host).stderr == ""


def test_serve_with_an_admin_token_configured_does_not_warn(runs, db_url, monkeypatch):
    monkeypatch.setenv("ISOFABRIC_ADMIN_TOKEN", "configured-admin-token")

    assert serve(db_url, "0.0.0.0").stderr == ""


def test_serve_once_a_token_exists_does_not_warn(runs, db_url):
    engine = make_engine(db_url)
    prepare_database(engine)
    uow = UnitOfWork(engine, Settings(database_url=db_url))
    tokens.create_token(uow, spec=TokenCreate(name="ops", role="operator"))
    engine.dispose()

    assert serve(db_url, "0.0.0.0").stderr == ""


def test_serve_keeps_the_tcp_peer_as_the_client_address(runs, db_url):
    serve(db_url, "127.0.0.1")

    # uvicorn's proxy headers would rewrite the client address from X-Forwarded-For, which
    # open mode's loopback check must never trust.
    assert runs[0]["proxy_headers"] is False


def test_serve_with_a_database_that_does_not_answer_warns_and_serves(runs, tmp_path):
    # Issue 14: it keeps running (/healthz 200, /readyz and /v1 503) and retries; the demo
    # data and the open-mode check wait for a database.
    url = f"sqlite:///{tmp_path / 'not-yet' / 'serve.db'}"

    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--db", url, "--demo"])

    assert result.exit_code == 0, result.output
    assert "warning: the database does not answer yet: unable to open database file" in (
        result.stderr
    )
    assert "open mode" not in result.stderr and "loaded demo data" not in result.stdout
    assert "warning: no demo keys yet: " in result.stderr  # and it serves on
    assert len(runs) == 1


def test_serve_demo_creates_the_keys_on_its_first_run_only(runs, tmp_path, monkeypatch):
    for name in ("SIGNING_KEY_FILE", "KEYRING_FILE", "OPENSM_SECRET_FILE", "SIGNING_KEY"):
        monkeypatch.delenv(f"ISOFABRIC_{name}", raising=False)
    url = f"sqlite:///{tmp_path / 'demo.db'}"

    first = runner.invoke(app, ["serve", "--db", url, "--demo"])
    key = tmp_path / "demo-signing.key"
    written = key.read_bytes()
    again = runner.invoke(app, ["serve", "--db", url, "--demo"])

    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert "created the signing key" in first.stdout and "loaded demo data" in first.stdout
    assert "created the signing key" not in again.stdout  # `keys create` is idempotent
    assert key.read_bytes() == written
    assert (key.stat().st_mode & 0o777, (tmp_path / "demo-opensm.secret").is_file()) == (
        0o600,
        True,
    )


def test_serve_without_demo_never_creates_a_key(runs, tmp_path):
    result = runner.invoke(app, ["serve", "--db", f"sqlite:///{tmp_path / 'plain.db'}"])

    assert result.exit_code == 0, result.output
    assert not (tmp_path / "plain-signing.key").exists()
    assert not (tmp_path / "plain-opensm.secret").exists()
