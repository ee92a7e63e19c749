"""Read-only transactions refuse writes on both backends, and leave no trace on the connection.

SQLite runs them as a deferred BEGIN under ``PRAGMA query_only`` (tenancy/store/db.py), PostgreSQL
as READ ONLY: a use case marked read-only that wrote would fail in the suite on either backend
instead of silently taking the write lock (issue 10, item 10).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork


def test_a_write_in_a_read_only_transaction_fails_and_changes_nothing(uow: UnitOfWork):
    with pytest.raises(DBAPIError), uow.transaction(read_only=True) as tx:
        tx.session.connection().execute(text("CREATE TABLE not_written (x integer)"))

    with uow.transaction(read_only=True) as tx:
        rows = tx.session.connection().execute(text("SELECT name FROM qos_class")).all()
    assert rows  # reads still work


class RollbackError(Exception):
    """Raised to roll a test's write back (the PostgreSQL work database is shared)."""


def test_a_write_transaction_after_a_read_only_one_writes(uow: UnitOfWork):
    with uow.transaction(read_only=True) as tx:
        tx.session.connection().execute(text("SELECT 1"))

    with pytest.raises(RollbackError), uow.transaction() as tx:
        tx.session.connection().execute(text("CREATE TABLE written_after (x integer)"))
        tx.session.connection().execute(text("INSERT INTO written_after VALUES (1)"))
        assert tx.session.connection().execute(text("SELECT x FROM written_after")).all() == [(1,)]
        raise RollbackError


def test_a_pooled_sqlite_connection_comes_back_writable(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'pool.db'}"
    engine = make_engine(url)
    try:
        uow = UnitOfWork(engine, Settings(database_url=url))
        with uow.transaction(read_only=True) as tx:
            tx.session.connection().execute(text("SELECT 1"))
        raw = engine.raw_connection()  # the same connection, outside any transaction
        try:
            raw.cursor().execute("CREATE TABLE raw_write (x integer)")
        finally:
            raw.close()
    finally:
        engine.dispose()
