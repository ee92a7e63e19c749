"""Database engine, sessions and migrations.

SQLite (the embedded default) gets foreign keys, WAL and a busy timeout so that several
processes can share one file; a transaction takes the write lock when it begins unless it is
read-only. PostgreSQL is used as is (psycopg 3), with read-only transactions declared as such.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, Executable, event
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, create_engine

from tenancy.settings import sqlite_file

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Execution option marking a connection whose transactions only read (see `session_scope`).
READ_ONLY_OPTION = "isofabric_read_only"


def normalise_url(url: str) -> str:
    """Use psycopg 3 for plain ``postgresql://`` URLs (SQLAlchemy would pick psycopg2)."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str) -> Engine:
    """Create an engine for `url`; in-memory SQLite shares one connection across threads."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        create_private_file(sqlite_file(url))
        kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
        if url in ("sqlite://", "sqlite:///:memory:"):
            kwargs["poolclass"] = StaticPool
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    return create_engine(url, pool_pre_ping=True)


def create_private_file(path: Path | None) -> None:
    """Create the SQLite database file with mode 0600 unless it exists.

    SQLite would create it 0644 under the usual umask; its -wal and -shm files take the mode of
    the database file.
    """
    if path is None:
        return
    # O_EXCL: never touch a file that exists. A missing directory is SQLite's error to report.
    with contextlib.suppress(FileExistsError, FileNotFoundError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # SQLite enforces foreign keys only when asked, per connection.
    dbapi_connection.isolation_level = None  # let SQLAlchemy's "begin" event issue BEGIN
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def _read_only(connection: Connection) -> bool:
    return bool(connection.get_execution_options().get(READ_ONLY_OPTION, False))


def _sqlite_begin(connection: Connection) -> None:
    if _read_only(connection):
        # A deferred BEGIN reads a WAL snapshot and takes no write lock: readers (token checks
        # above all) neither wait for a writer nor make writers wait.
        connection.exec_driver_sql("BEGIN")
        return
    # Take the write lock at BEGIN: two processes allocating at once then serialise instead of
    # failing with "database is locked" when a reader tries to upgrade to a writer.
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _read_only_options(engine: Engine) -> dict[str, Any]:
    """Connection options that make a session's transaction read-only on `engine`'s backend."""
    if engine.dialect.name == "postgresql":
        # psycopg then opens the transaction with BEGIN READ ONLY, and the server refuses any
        # write in it; SQLAlchemy resets the connection when it returns to the pool.
        return {"postgresql_readonly": True}
    return {READ_ONLY_OPTION: True}  # read by `_sqlite_begin`


@contextmanager
def session_scope(engine: Engine, *, read_only: bool = False) -> Iterator[Session]:
    """A session whose transaction commits on success and rolls back on any exception.

    With `read_only`, the transaction takes no write lock (a deferred ``BEGIN`` on SQLite) and
    PostgreSQL refuses writes in it.
    """
    # The options reach the connection before its transaction begins.
    options = _read_only_options(engine) if read_only else {}
    with Session(engine, expire_on_commit=False, execution_options=options) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def alembic_config(url: str) -> Config:
    """Alembic settings for this package's migrations on `url`, built without an alembic.ini.

    ``%`` in the URL (percent-encoded passwords) is doubled: the config is a ConfigParser, which
    would read it as interpolation.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    return config


def upgrade(url: str) -> None:
    """Apply every Alembic migration up to head (idempotent)."""
    command.upgrade(alembic_config(url), "head")


def fetch_all(session: Session, statement: Executable) -> list[tuple[Any, ...]]:
    """Run a Core statement in the session's transaction and return plain tuples (bulk reads)."""
    return [tuple(row) for row in session.connection().execute(statement)]
