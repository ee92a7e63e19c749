"""Fixtures for the tenancy and API suites.

Every database test runs against a fresh in-memory SQLite database ("sqlite") and, when
``ISOFABRIC_TEST_POSTGRES_URL`` is set (e.g. ``postgresql://postgres@127.0.0.1:5432/test``), against
PostgreSQL too ("postgres"), in databases named uniquely per session so that concurrent runs of
the suite never see each other's rows.

Migrating and onboarding for every test would dominate the run time, so each seed state ("empty":
migrated, QoS classes seeded; "onboarded": `api_onboard`; "roce-onboarded": `uow_onboard_roce`)
is built once per backend and session, then copied in before each test: into a new in-memory
SQLite database with SQLite's online backup; into PostgreSQL's work database by TRUNCATE and
INSERT from a snapshot schema.
Tests that share a database between connections or processes get their own PostgreSQL database.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer.main
import typer.testing
from fastapi.testclient import TestClient
from psycopg import sql
from sqlalchemy import Engine, Integer
from sqlalchemy.engine import make_url
from sqlmodel import SQLModel

from api.app import create_app
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import LOCAL_URL

from .builders import (
    Dump,
    FakeClock,
    Onboarded,
    RoceOnboarded,
    api_onboard,
    dump_database,
    uow_onboard_roce,
)
from .keys import key_settings, register_key

POSTGRES_URL_ENV = "ISOFABRIC_TEST_POSTGRES_URL"
# The peer address of the test clients: open mode (no token yet) answers loopback clients only.
LOOPBACK_CLIENT = ("127.0.0.1", 50000)
# Parents before children; alembic_version is schema state, not data, and is never reset.
TABLES = [table.name for table in SQLModel.metadata.sorted_tables]
SERIAL_TABLES = [
    table.name
    for table in SQLModel.metadata.sorted_tables
    if "id" in table.c
    and table.c.id.primary_key
    and table.c.id.autoincrement is not False
    and isinstance(table.c.id.type, Integer)
]


# typer's CliRunner turns the Typer app into a click command on every invoke: about 50 ms for
# `isofabric`, 7% of the suite's time. The command depends only on the app's declarations,
# which no test changes, so each app is converted once per process.
typer.testing._get_command = functools.cache(typer.main.get_command)  # type: ignore[attr-defined]

SeedBuilder = Callable[[Engine], object]


def seed_empty(engine: Engine) -> None:
    """Migrated, with the QoS classes seeded and the session's signing key recorded."""
    prepare_database(engine)
    register_key(engine)


def seed_onboarded(engine: Engine) -> Onboarded:
    """The standard onboarding (`api_onboard`) through the API, on the test clock's start time."""
    settings = key_settings(
        Settings(
            database_url=engine.url.render_as_string(hide_password=False), verify_cross_check=True
        )
    )
    prepare_database(engine)
    register_key(engine)
    app = create_app(settings, engine=engine, clock=FakeClock())
    with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as client:
        return api_onboard(client)


def seed_roce_onboarded(engine: Engine) -> RoceOnboarded:
    """The standard RoCE onboarding (`uow_onboard_roce`) through the use cases, on the test
    clock's start time."""
    prepare_database(engine)
    register_key(engine)
    settings = key_settings(
        Settings(
            database_url=engine.url.render_as_string(hide_password=False), verify_cross_check=True
        )
    )
    return uow_onboard_roce(UnitOfWork(engine, settings, FakeClock()))


SEEDS: dict[str, SeedBuilder] = {
    "empty": seed_empty,
    "onboarded": seed_onboarded,
    "roce-onboarded": seed_roce_onboarded,
}


class SqliteSeeds:
    """Seeded in-memory databases built once per session and copied into each test's database
    with SQLite's online backup (well under a millisecond)."""

    def __init__(self) -> None:
        self._engines: dict[str, Engine] = {}
        self.results: dict[str, object] = {}

    def restore(self, name: str, target: Engine) -> None:
        if name not in self._engines:
            engine = make_engine("sqlite://")
            self.results[name] = SEEDS[name](engine)
            self._engines[name] = engine
        source, destination = self._engines[name].raw_connection(), target.raw_connection()
        try:
            source.driver_connection.backup(destination.driver_connection)  # type: ignore[union-attr]
        finally:
            destination.close()
            source.close()

    def close(self) -> None:
        for engine in self._engines.values():
            engine.dispose()


class PostgresDatabases:
    """PostgreSQL databases for the tests, all uniquely named for this session.

    Most tests share one "work" database that `reset` empties and refills from a snapshot of
    the seed state (a schema of copies; one round trip); tests that need several connections or
    processes get a database of their own from `create` (``CREATE DATABASE ... TEMPLATE``).
    """

    def __init__(self, url: str) -> None:
        self._base = make_url(url).set(drivername="postgresql")
        self._admin = psycopg.connect(self._url(self._base.database or "postgres"), autocommit=True)
        self._prefix = f"isofabric_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self._numbers = itertools.count(1)
        self._templates: dict[str, str] = {}
        self._work: psycopg.Connection[Any] | None = None
        self._work_engine: Engine | None = None
        self._restores: dict[str, sql.Composed] = {}
        self.results: dict[str, object] = {}

    def _url(self, database: str) -> str:
        return self._base.set(database=database).render_as_string(hide_password=False)

    def _execute(self, statement: str, *databases: str) -> None:
        self._admin.execute(sql.SQL(statement).format(*map(sql.Identifier, databases)))

    def engine(self) -> Engine:
        """The session's engine on the work database (connections are reused across tests)."""
        if self._work_engine is None:
            self._work_engine = make_engine(self.work_url)
        return self._work_engine

    def _template(self, seed: str) -> str:
        if seed not in self._templates:
            name = f"{self._prefix}_seed_{seed}"
            self._execute("CREATE DATABASE {}", name)
            engine = make_engine(self._url(name))
            try:
                SEEDS[seed](engine)
            finally:
                engine.dispose()  # a template must have no open connections while it is copied
            self._templates[seed] = name
        return self._templates[seed]

    def create(self, seed: str = "empty") -> str:
        """A new database holding the `seed` state; returns its URL."""
        name = f"{self._prefix}_{next(self._numbers)}"
        self._execute("CREATE DATABASE {} TEMPLATE {}", name, self._template(seed))
        return self._url(name)

    def drop(self, url: str) -> None:
        name = make_url(url).database
        assert name is not None and name.startswith(self._prefix)
        self._execute("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)

    @property
    def work_url(self) -> str:
        return self._url(f"{self._prefix}_work")

    def reset(self, seed: str) -> str:
        """The shared work database, holding exactly the `seed` state; returns its URL."""
        if self._work is None:
            work = f"{self._prefix}_work"
            self._execute("CREATE DATABASE {} TEMPLATE {}", work, self._template("empty"))
            # Durability is not under test: commits need not wait for the WAL flush (visibility,
            # locking and constraints are unchanged).
            self._execute("ALTER DATABASE {} SET synchronous_commit = off", work)
            self._work = psycopg.connect(self.work_url)
            self._work.execute("SET lock_timeout = '10s'")  # a leaked transaction fails, not hangs
            self._work.commit()
            self._snapshot("empty")
        if seed not in self._restores:
            self._restore("empty")
            engine = make_engine(self.work_url)
            try:
                self.results[seed] = SEEDS[seed](engine)
            finally:
                engine.dispose()
            self._snapshot(seed)
        self._restore(seed)
        return self.work_url

    def _snapshot(self, seed: str) -> None:
        """Copy the work database's tables into schema seed_<seed>; prepare their restore."""
        assert self._work is not None
        schema = sql.Identifier(f"seed_{seed}")
        with self._work.transaction():
            self._work.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
            for table in TABLES:
                self._work.execute(
                    sql.SQL("CREATE TABLE {}.{} AS TABLE public.{}").format(
                        schema, sql.Identifier(table), sql.Identifier(table)
                    )
                )
            filled = [table for table in TABLES if self._has_rows(f"seed_{seed}", table)]
        self._restores[seed] = self._restore_script(schema, filled)

    def _has_rows(self, schema: str, table: str) -> bool:
        assert self._work is not None
        query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {}.{})")
        row = self._work.execute(query.format(*map(sql.Identifier, (schema, table)))).fetchone()
        return bool(row and row[0])

    @staticmethod
    def _restore_script(schema: sql.Identifier, filled: list[str]) -> sql.Composed:
        """One round trip that puts the seed's rows back: children emptied first, parents
        filled first. DELETE, not TRUNCATE: on tables of a few rows TRUNCATE's new relation
        files cost several times more than the rows."""
        deletes = [
            sql.SQL("DELETE FROM public.{};").format(sql.Identifier(t)) for t in reversed(TABLES)
        ]
        inserts = [
            sql.SQL("INSERT INTO public.{0} SELECT * FROM {1}.{0};").format(
                sql.Identifier(t), schema
            )
            for t in filled
        ]
        counters = sql.SQL(", ").join(
            sql.SQL(
                "setval(pg_get_serial_sequence({}, 'id'), "
                "coalesce((SELECT max(id) FROM public.{}), 0) + 1, false)"
            ).format(sql.Literal(f"public.{t}"), sql.Identifier(t))
            for t in SERIAL_TABLES
        )
        return sql.SQL(" ").join([*deletes, *inserts, sql.SQL("SELECT {};").format(counters)])

    def _restore(self, seed: str) -> None:
        assert self._work is not None
        with self._work.transaction():
            self._work.execute(self._restores[seed])

    def close(self) -> None:
        if self._work_engine is not None:
            self._work_engine.dispose()
        if self._work is not None:
            self._work.close()
            self._execute("DROP DATABASE IF EXISTS {} WITH (FORCE)", f"{self._prefix}_work")
        for name in self._templates.values():
            self._execute("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)
        self._admin.close()


def postgres_configured() -> bool:
    return bool(os.environ.get(POSTGRES_URL_ENV, "").strip())


@pytest.fixture(scope="session")
def sqlite_seeds() -> Iterator[SqliteSeeds]:
    seeds = SqliteSeeds()
    try:
        yield seeds
    finally:
        seeds.close()


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[PostgresDatabases]:
    if not postgres_configured():
        pytest.skip(f"{POSTGRES_URL_ENV} is not set")
    databases = PostgresDatabases(os.environ[POSTGRES_URL_ENV].strip())
    try:
        yield databases
    finally:
        databases.close()


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> str:
    """The state a test's database starts in: onboarded if the test uses `onboarded`, RoCE
    onboarded if it uses `roce_onboarded` (not both)."""
    if "roce_onboarded" in request.fixturenames:
        return "roce-onboarded"
    return "onboarded" if "onboarded" in request.fixturenames else "empty"


@pytest.fixture
def postgres_url(postgres_databases: PostgresDatabases) -> Iterator[str]:
    """A database of the test's own, migrated (skips without the env variable); for tests where
    several connections or processes share it."""
    url = postgres_databases.create("empty")
    try:
        yield url
    finally:
        postgres_databases.drop(url)


# PostgreSQL joins the matrix only when configured, so a SQLite-only run has no skip noise.
BACKENDS = [pytest.param("sqlite", id="sqlite")] + (
    [pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
    if postgres_configured()
    else []
)


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest) -> str:
    """One test database per backend: in-memory SQLite (StaticPool), and PostgreSQL if set."""
    if request.param == "sqlite":
        return "sqlite://"
    databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
    return databases.reset(request.getfixturevalue("seed"))


@pytest.fixture
def engine(database_url: str, seed: str, request: pytest.FixtureRequest) -> Iterator[Engine]:
    """The test's own database, already in the `seed` state.

    SQLite: a new in-memory engine, hence a new database. PostgreSQL: the work database, just
    reset, through the session's engine (its pooled connections are idle between tests).
    """
    if not database_url.startswith("sqlite"):
        yield request.getfixturevalue("postgres_databases").engine()
        return
    engine = make_engine(database_url)
    request.getfixturevalue("sqlite_seeds").restore(seed, engine)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def seed_results(engine: Engine, request: pytest.FixtureRequest) -> dict[str, object]:
    """What the seed builders returned for this test's backend."""
    name = "sqlite_seeds" if engine.dialect.name == "sqlite" else "postgres_databases"
    results: dict[str, object] = request.getfixturevalue(name).results
    return results


@pytest.fixture
def clock() -> FakeClock:
    """The service's clock; tests move it with ``clock.advance(seconds)``."""
    return FakeClock()


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    # Copies of the session's key files (a test may rotate the key): signing and OpenSM
    # rendering need them, and the seeds recorded the key in every test database (tests/keys.py).
    # Every change is verified incrementally and, as a cross-check, on the whole fabric too.
    settings = Settings(database_url=database_url, verify_cross_check=True)
    return key_settings(settings, copy_to=tmp_path / "keys")


@pytest.fixture
def uow(engine: Engine, settings: Settings, clock: FakeClock) -> UnitOfWork:
    """A migrated, seeded database behind a unit of work on the test clock."""
    prepare_database(engine)
    return UnitOfWork(engine, settings, clock)


ClientFactory = Callable[..., TestClient]


@pytest.fixture
def make_client(engine: Engine, settings: Settings, clock: FakeClock) -> Iterator[ClientFactory]:
    """``make_client(**settings_overrides)``: another app instance on the test's database."""
    with ExitStack() as stack:

        def make(*, raise_server_exceptions: bool = True, **overrides: Any) -> TestClient:
            app = create_app(dataclasses.replace(settings, **overrides), engine=engine, clock=clock)
            # Open mode answers loopback clients only; TestClient's default peer is not one.
            client = TestClient(
                app,
                raise_server_exceptions=raise_server_exceptions,
                client=LOOPBACK_CLIENT,
                base_url=LOCAL_URL,
            )
            return stack.enter_context(client)

        yield make


@pytest.fixture
def client(make_client: ClientFactory) -> TestClient:
    return make_client()


@pytest.fixture
def onboarded(engine: Engine, seed_results: dict[str, object]) -> Onboarded:
    """ib-east imported, roles set, service storage, tenants acme/research/globex, acme granted.

    The state is built once per backend and session by `api_onboard` and copied per test.
    """
    result = seed_results["onboarded"]
    assert isinstance(result, Onboarded)
    return result


@pytest.fixture
def roce_onboarded(engine: Engine, seed_results: dict[str, object]) -> RoceOnboarded:
    """roce-west from the demo inventory, stor01/02 storage behind service 'storage', acme/
    research/globex with 2 nodes each by count, acme granted storage (`uow_onboard_roce`).

    The state is built once per backend and session and copied per test.
    """
    result = seed_results["roce-onboarded"]
    assert isinstance(result, RoceOnboarded)
    return result


@pytest.fixture
def db_dump(engine: Engine) -> Callable[[], Dump]:
    """``db_dump()``: every row of every table, to assert that a refused request changed nothing."""
    return lambda: dump_database(engine)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How many documentation blocks of each kind the example runner saw (docs/examples.md)."""
    from tests.docs.examples import all_blocks, commands

    seen = list(all_blocks())
    run = [block for block in seen if block.kind == "sh"]
    try:
        ran_commands = [command for block in run for command in commands(block)]
    except ValueError as unfinished:  # test_every_sh_block_parses_into_commands names it
        terminalreporter.write_line(f"docs examples: {unfinished}")
        return
    terminalreporter.write_line(
        f"docs examples: {len(run)} sh blocks run ({len(ran_commands)} commands, "
        f"{sum(len(c.claims) for c in ran_commands)} claims), "
        f"{sum(b.kind == 'host' for b in seen)} sh {{.host}} blocks covered by lab tests, "
        f"{sum(b.kind == 'other' for b in seen)} other blocks shown only"
    )
