"""Bad bearer tokens are refused without the database's write lock (issue 10, item 16).

A well-formed but unknown token is looked up in a read-only transaction (a deferred BEGIN on
SQLite, READ ONLY on PostgreSQL); a bearer that cannot be a token never reaches the database.
The SQLite tests hold the write lock in another connection and give the app a short busy
timeout, so a write-locking lookup would fail (500) instead of answering 401.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import DBAPIError

from api.app import create_app
from tenancy.schemas import TokenCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import tokens
from tests.builders import LOCAL_URL, assert_problem, ok

UNKNOWN_TOKEN = "isf_" + "A" * 43  # the shape `create_token` mints, but never minted
MALFORMED = ["wrong", "isf_short", "isf_" + "A" * 44, "xyz_" + "A" * 43, "isf_" + "*" * 43]


class Statements:
    """Every SQL statement the engine sends, in order."""

    def __init__(self, engine: Engine) -> None:
        self.sent: list[str] = []
        event.listen(engine, "before_cursor_execute", self._record)

    def _record(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.sent.append(statement.strip().upper())

    def clear(self) -> None:
        self.sent.clear()

    @property
    def write_locks(self) -> list[str]:
        return [s for s in self.sent if s.startswith("BEGIN IMMEDIATE")]


def short_busy_timeout(dbapi_connection: Any, _record: Any) -> None:
    # Runs after make_engine's own pragmas: waiting for the lock fails after 50 ms, not 30 s.
    dbapi_connection.execute("PRAGMA busy_timeout=50")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "auth.db"


@pytest.fixture
def file_engine(db_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{db_path}")
    event.listen(engine, "connect", short_busy_timeout)
    yield engine
    engine.dispose()


@pytest.fixture
def service(file_engine: Engine) -> Iterator[tuple[TestClient, str, Statements]]:
    """A closed service (one operator token) on a SQLite file, with its SQL recorded."""
    settings = Settings(database_url=str(file_engine.url))
    app = create_app(settings, engine=file_engine)
    secret = tokens.create_token(app.state.uow, spec=TokenCreate(name="ops", role="operator"))
    statements = Statements(file_engine)
    with TestClient(
        app, raise_server_exceptions=False, client=("127.0.0.1", 50000), base_url=LOCAL_URL
    ) as client:
        yield client, secret.token, statements


@pytest.fixture
def write_lock(db_path: Path, service: Any) -> Iterator[None]:
    """Another connection holds the database's write lock for the test's duration."""
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def test_an_unknown_token_is_a_401_while_a_writer_holds_the_lock(service, write_lock):
    client, _, statements = service

    assert_problem(client.get("/v1/tenants", headers=bearer(UNKNOWN_TOKEN)), 401, "unauthorized")
    assert "BEGIN" in statements.sent  # it was looked up, in a deferred transaction
    assert statements.write_locks == []


def test_a_valid_token_is_looked_up_without_the_write_lock(service):
    client, secret, statements = service

    assert ok(client.get("/v1/qos-classes", headers=bearer(secret)))
    assert statements.sent[0] == "BEGIN"  # the token lookup; the route's own transaction follows
    assert "API_TOKEN" in statements.sent[1]


def test_no_credentials_on_a_closed_service_take_no_write_lock(service, write_lock):
    client, _, statements = service

    assert_problem(client.get("/v1/tenants"), 401, "unauthorized")
    assert statements.write_locks == []


@pytest.mark.parametrize("secret", MALFORMED)
def test_a_malformed_bearer_never_reaches_the_database(service, secret):
    client, _, statements = service
    client.get("/v1/tenants", headers=bearer(UNKNOWN_TOKEN))  # the service learns it is closed
    statements.clear()

    assert_problem(client.get("/v1/tenants", headers=bearer(secret)), 401, "unauthorized")
    assert statements.sent == []


@pytest.mark.parametrize("secret", MALFORMED)
def test_with_an_admin_token_a_malformed_bearer_never_reaches_the_database(file_engine, secret):
    settings = Settings(database_url=str(file_engine.url), admin_token="admin-secret")
    app = create_app(settings, engine=file_engine)
    statements = Statements(file_engine)
    with TestClient(app, client=("127.0.0.1", 50000), base_url=LOCAL_URL) as client:
        response = client.get("/v1/tenants", headers=bearer(secret))

    assert_problem(response, 401, "unauthorized")
    assert statements.sent == []


def test_a_read_only_transaction_begins_without_the_write_lock(file_engine):
    settings = Settings(database_url=str(file_engine.url))
    statements = Statements(file_engine)
    uow = UnitOfWork(file_engine, settings)

    with uow.transaction(read_only=True) as tx:
        tx.session.connection().execute(text("SELECT 1"))
    with uow.transaction() as tx:
        tx.session.connection().execute(text("SELECT 2"))

    assert statements.sent == ["BEGIN", "SELECT 1", "BEGIN IMMEDIATE", "SELECT 2"]


@pytest.mark.postgres
def test_postgresql_refuses_a_write_in_a_read_only_transaction(postgres_url):
    engine = make_engine(postgres_url)
    uow = UnitOfWork(engine, Settings(database_url=postgres_url))
    try:
        with (
            pytest.raises(DBAPIError, match="read-only transaction"),
            uow.transaction(read_only=True) as tx,
        ):
            tx.session.connection().execute(text("CREATE TABLE not_written (x integer)"))
        with uow.transaction() as tx:
            tx.session.connection().execute(text("CREATE TABLE written (x integer)"))
    finally:
        engine.dispose()
