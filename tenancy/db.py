"""Database engine, sessions and migrations.

SQLite (the embedded default) gets foreign keys, WAL and a busy timeout so that several
processes can share one file; PostgreSQL is used as is (psycopg 3).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, Executable, event
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, create_engine

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def normalise_url(url: str) -> str:
    """Use psycopg 3 for plain ``postgresql://`` URLs (SQLAlchemy would pick psycopg2)."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str) -> Engine:
    """Create an engine for `url`; in-memory SQLite shares one connection across threads."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
        if url in ("sqlite://", "sqlite:///:memory:"):
            kwargs["poolclass"] = StaticPool
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin_immediate)
        return engine
    return create_engine(url, pool_pre_ping=True)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # SQLite enforces foreign keys only when asked, per connection.
    dbapi_connection.isolation_level = None  # let SQLAlchemy's "begin" event issue BEGIN
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def _sqlite_begin_immediate(connection: Any) -> None:
    # Take the write lock at BEGIN: two processes allocating at once then serialise instead of
    # failing with "database is locked" when a reader tries to upgrade to a writer.
    connection.exec_driver_sql("BEGIN IMMEDIATE")


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session whose transaction commits on success and rolls back on any exception."""
    with Session(engine, expire_on_commit=False) as session:
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
