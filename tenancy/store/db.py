"""Database engine, sessions and migrations.

SQLite (the embedded default) gets foreign keys, WAL and a busy timeout so that several
processes can share one file; a transaction takes the write lock when it begins unless it is
read-only. PostgreSQL is used as is (psycopg 3), with read-only transactions declared as such.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, Executable, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm.util import identity_key
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, create_engine

from policies.errors import NotFoundError
from tenancy.store.settings import sqlite_file

MIGRATIONS_DIR = Path(__file__).parents[1] / "migrations"
# Execution option marking a connection whose transactions only read (see `session_scope`).
READ_ONLY_OPTION = "isofabric_read_only"
# What the storage fails with apart from domain errors: a database that cannot be reached or
# read (a connection refused, a locked or unreadable file, a file that is not a database) and a
# schema revision this version does not know. The command line reports them in one line.
STORAGE_ERRORS: tuple[type[Exception], ...] = (DBAPIError, sqlite3.Error, CommandError)


def normalise_url(url: str) -> str:
    """Use psycopg 3 for plain ``postgresql://`` URLs (SQLAlchemy would pick psycopg2)."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str, *, create_missing: bool = True) -> Engine:
    """Create an engine for `url`; in-memory SQLite shares one connection across threads.

    A SQLite database file that does not exist is created (mode 0600) only with
    `create_missing`; without it, a missing file is refused before SQLite would create an empty
    one (a command run from the wrong directory must not start a new, empty database).

    Raises:
        NotFoundError: `create_missing` is false and the SQLite database file does not exist.
    """
    url = normalise_url(url)
    if url.startswith("sqlite"):
        database = sqlite_file(url)
        if create_missing:
            create_private_file(database)
        else:
            require_database_file(database)
        kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
        if url in ("sqlite://", "sqlite:///:memory:"):
            kwargs["poolclass"] = StaticPool
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        event.listen(engine, "checkin", _sqlite_checkin)
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


def require_database_file(path: Path | None) -> None:
    """Refuse a SQLite database file that does not exist (in-memory databases always do).

    Raises:
        NotFoundError: naming the absolute path and how to create the database.
    """
    if path is not None and not path.is_file():
        raise NotFoundError(
            f"no database at {path.absolute()} (run `isofabric db upgrade` or set "
            "ISOFABRIC_DATABASE_URL)"
        )


def checkpoint_wal(engine: Engine) -> bool:
    """Copy every transaction in a SQLite file's write-ahead log into the file, empty the log.

    Until then the -wal file may hold everything written since the last automatic checkpoint:
    a copy of the database file alone is then empty or stale. Returns False when it could not
    complete (a reader in another process held the log past the busy timeout, or the file could
    not be written); a no-op (True) for other databases.
    """
    if sqlite_file(engine.url.render_as_string(hide_password=False)) is None:
        return True
    try:
        # The driver connection runs in autocommit mode (`_sqlite_pragmas`): no BEGIN from the
        # "begin" event, whose open transaction would keep the checkpoint from finishing.
        connection = engine.raw_connection()
        try:
            cursor = connection.cursor()
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            result = cursor.fetchone()  # (busy, frames in the log, frames copied)
            cursor.close()
        finally:
            connection.close()
    except STORAGE_ERRORS:
        return False
    return result is not None and not result[0]


def storage_error_detail(error: Exception) -> str:
    """One line saying what failed in the database: the driver's message, never the SQL."""
    cause = error.orig if isinstance(error, DBAPIError) else error
    return " ".join(str(cause).split())


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
    read_only = _read_only(connection)
    _sqlite_query_only(connection, read_only)
    if read_only:
        # A deferred BEGIN reads a WAL snapshot and takes no write lock: readers (GETs, token
        # checks) neither wait for a writer nor make writers wait.
        connection.exec_driver_sql("BEGIN")
        return
    # Take the write lock at BEGIN: two processes allocating at once then serialise instead of
    # failing with "database is locked" when a reader tries to upgrade to a writer.
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _sqlite_query_only(connection: Connection, read_only: bool) -> None:
    """Make a write in a read-only transaction fail, as PostgreSQL's READ ONLY does.

    Without it a deferred transaction that writes silently upgrades to a writer (and may then
    fail with "database is locked"). The pragma belongs to the pooled DBAPI connection, which
    outlives transactions: it is set only when it changes, directly on that connection, like
    the pragmas of `_sqlite_pragmas`, and cleared when the connection returns to the pool
    (`_sqlite_checkin`).
    """
    pooled = connection.connection
    if pooled.info.get(READ_ONLY_OPTION) is read_only:
        return
    driver = pooled.driver_connection
    assert driver is not None  # a connection that is beginning a transaction is open
    driver.execute(f"PRAGMA query_only={'ON' if read_only else 'OFF'}")
    pooled.info[READ_ONLY_OPTION] = read_only


def _sqlite_checkin(dbapi_connection: Any, record: Any) -> None:
    # A connection never waits in the pool with query_only on: a raw connection taken from it
    # (checkpoint_wal, backups) writes as usual.
    if dbapi_connection is not None and record.info.get(READ_ONLY_OPTION):
        dbapi_connection.execute("PRAGMA query_only=OFF")
        record.info[READ_ONLY_OPTION] = False


def _read_only_options(engine: Engine) -> dict[str, Any]:
    """Connection options that make a session's transaction read-only on `engine`'s backend."""
    if engine.dialect.name == "postgresql":
        # psycopg then opens the transaction with BEGIN READ ONLY, and the server refuses any
        # write in it; SQLAlchemy resets the connection when it returns to the pool. REPEATABLE
        # READ: every statement of a read sees one committed state (a snapshot loaded in several
        # queries while writes commit could otherwise mix two, and be signed as a state that
        # never was); a read-only transaction at this level never fails to serialize
        # (PostgreSQL manual, "Transaction Isolation", 13.2.2).
        return {"postgresql_readonly": True, "isolation_level": "REPEATABLE READ"}
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


def expire_loaded(session: Session, model: type[Any], keys: Iterable[Any]) -> None:
    """Rows of `model` the session holds re-read their columns after a Core UPDATE of `keys`."""
    for key in keys:
        row = session.identity_map.get(identity_key(model, key))
        if row is not None:
            session.expire(row)


def forget_loaded(session: Session, model: type[Any], keys: Iterable[Any]) -> None:
    """Rows of `model` the session holds are dropped from it after a Core DELETE of `keys`."""
    for key in keys:
        row = session.identity_map.get(identity_key(model, key))
        if row is not None:
            session.expunge(row)
