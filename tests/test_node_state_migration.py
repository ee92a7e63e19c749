"""Migration 0007 (issue 10, item 4): existing nodes get the state their holding implies, and
existing switches are present; the migration downgrades cleanly."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import make_url

from tenancy.store.db import alembic_config, make_engine

POSTGRES_URL = os.environ.get("ISOFABRIC_TEST_POSTGRES_URL")

ROWS_AT_0006 = [
    "INSERT INTO fabric (id, name, kind, pkey_first, pkey_last, pkeys_per_port, created_at) "
    "VALUES (1, 'ib-east', 'infiniband', 256, 32766, 128, '2026-03-01 12:00:00+00')",
    "INSERT INTO service (id, fabric_id, name, created_at) "
    "VALUES (1, 1, 'storage', '2026-03-01 12:00:00+00')",
    "INSERT INTO node (id, fabric_id, name, role) VALUES (1, 1, 'stor01', 'storage')",
    "INSERT INTO node (id, fabric_id, name, role) VALUES (2, 1, 'gpu0007', 'compute')",
    "INSERT INTO node_assignment (node_id, service_id) VALUES (1, 1)",
    "INSERT INTO switch (fabric_id, guid, name, ports) "
    "VALUES (1, '0x0000000000200000', 'leaf01', 36)",
]


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """A fresh SQLite file, or a throw-away PostgreSQL database (skipped when not configured)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'm.db'}"
        return
    if not POSTGRES_URL:
        pytest.skip("ISOFABRIC_TEST_POSTGRES_URL is not set")
    base = make_url(POSTGRES_URL)
    name = f"isofabric_mig7_{uuid.uuid4().hex[:12]}"
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    yield base.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_0007_gives_held_nodes_the_allocated_state_and_others_free(url):
    engine = make_engine(url)
    config = alembic_config(url)
    try:
        command.upgrade(config, "0006")
        with engine.begin() as connection:
            for statement in ROWS_AT_0006:
                connection.execute(text(statement))

        command.upgrade(config, "0007")

        with engine.connect() as connection:
            states = connection.execute(text("SELECT name, state FROM node ORDER BY name"))
            absent = connection.execute(text("SELECT name, absent FROM switch"))
            assert [tuple(r) for r in states] == [("gpu0007", "free"), ("stor01", "allocated")]
            assert [(name, bool(flag)) for name, flag in absent] == [("leaf01", False)]

        command.downgrade(config, "0006")

        with engine.connect() as connection:
            columns = connection.execute(text("SELECT * FROM node")).keys()
            assert "state" not in columns
    finally:
        engine.dispose()
