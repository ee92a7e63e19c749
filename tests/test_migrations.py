"""Alembic migrations produce exactly the schema the SQLModel tables declare."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import make_url
from sqlmodel import SQLModel

import tenancy.models  # noqa: F401  (registers the tables)
from tenancy.store.db import alembic_config, make_engine
from tenancy.usecases.bootstrap import prepare_database

POSTGRES_URL = os.environ.get("ISOFABRIC_TEST_POSTGRES_URL")


@pytest.fixture
def scratch_postgres() -> Iterator[str]:
    """A throw-away PostgreSQL database next to the one ISOFABRIC_TEST_POSTGRES_URL names."""
    if not POSTGRES_URL:
        pytest.skip("ISOFABRIC_TEST_POSTGRES_URL is not set")
    url = make_url(POSTGRES_URL)
    name = f"isofabric_mig_{uuid.uuid4().hex[:12]}"
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    yield url.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def assert_no_drift(url: str) -> None:
    engine = make_engine(url)
    prepare_database(engine)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    engine.dispose()
    assert diff == []


def test_upgraded_sqlite_database_has_no_drift_from_the_models(tmp_path):
    assert_no_drift(f"sqlite:///{tmp_path / 'm.db'}")


def test_upgraded_postgres_database_has_no_drift_from_the_models(scratch_postgres):
    assert_no_drift(scratch_postgres)


def test_upgrade_is_idempotent(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'twice.db'}")
    prepare_database(engine)
    prepare_database(engine)
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    # The newest migration, whichever it is: each slice of work may add one.
    head = ScriptDirectory.from_config(alembic_config(str(engine.url))).get_current_head()
    assert current == head
    engine.dispose()
