"""Bring a database to the current schema and seed reference data (idempotent)."""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from alembic import command
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from tenancy.store.db import STORAGE_ERRORS, alembic_config, session_scope, storage_error_detail
from tenancy.store.locks import MIGRATION_LOCK
from tenancy.store.settings import sqlite_file
from tenancy.usecases.tenants import seed_qos_classes

log = logging.getLogger("isofabric")
# SQLite's companion files: they hold recent transactions, so they need the same protection.
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def prepare_database(engine: Engine) -> None:
    """Apply Alembic migrations on `engine` and seed the QoS classes; safe for replicas.

    On PostgreSQL the whole step holds a session advisory lock (`MIGRATION_LOCK`): two servers
    started at once on a fresh database would otherwise both create ``alembic_version`` and one
    would fail on its unique key. Whoever waited for the lock re-reads the revision
    and finds the schema at head. SQLite serialises the two steps with BEGIN IMMEDIATE. The
    migration runs on one connection (in-memory SQLite has only one). A SQLite database file
    readable by others (created 0644 by earlier versions) is made 0600.
    """
    restrict_sqlite_files(engine)
    with migration_lock(engine):
        with engine.begin() as connection:
            if revision_of(connection) != head_revision():
                config = alembic_config(str(engine.url))
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
        with session_scope(engine) as session:
            seed_qos_classes(session)


def try_prepare(engine: Engine) -> str | None:
    """`prepare_database`, reporting a storage failure instead of raising it.

    Returns None once the database is migrated and seeded, else one line saying why not (the
    driver's message: a refused connection, an unknown schema revision).
    """
    try:
        prepare_database(engine)
    except STORAGE_ERRORS as error:
        return storage_error_detail(error)
    return None


@contextmanager
def migration_lock(engine: Engine) -> Iterator[None]:
    """Hold PostgreSQL's migration lock on a connection of its own for the block (else no-op).

    A session lock, not a transaction one: it spans the migration's and the seeding's
    transactions; it is released explicitly, and by the server if this process dies.
    """
    if engine.dialect.name != "postgresql":
        yield
        return
    key = {"a": MIGRATION_LOCK[0], "b": MIGRATION_LOCK[1]}
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:a, :b)"), key)
        connection.commit()
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:a, :b)"), key)
            connection.commit()


def revision_of(connection: Connection) -> str | None:
    """The schema revision the database is at (None: not migrated at all)."""
    return MigrationContext.configure(connection).get_current_revision()


def database_revision(engine: Engine) -> str | None:
    """The database's schema revision, read in a read-only transaction (no write lock)."""
    with session_scope(engine, read_only=True) as session:
        return revision_of(session.connection())


@cache
def head_revision() -> str | None:
    """The newest migration this version ships (read once: the scripts do not change)."""
    return _scripts().get_current_head()


@cache
def known_revisions() -> frozenset[str]:
    """Every migration revision this version ships."""
    return frozenset(script.revision for script in _scripts().walk_revisions())


def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config("sqlite://"))


def restrict_sqlite_files(engine: Engine) -> None:
    """Make the SQLite database file and its companions owner-only (0600) where they are not."""
    database = sqlite_file(engine.url.render_as_string(hide_password=False))
    if database is None:
        return
    for suffix in SQLITE_COMPANIONS:
        _restrict(Path(f"{database}{suffix}"))


def _restrict(path: Path) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            path.chmod(mode & 0o700)
            log.warning(
                "%s was readable by others (mode %o); it is now %o", path, mode, mode & 0o700
            )
    except FileNotFoundError:
        return
    except PermissionError:
        # Not ours to change (another owner): say so rather than fail the start.
        log.warning("%s is readable by others and cannot be restricted; chmod 600 it", path)
