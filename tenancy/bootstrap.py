"""Bring a database to the current schema and seed reference data (idempotent)."""

from __future__ import annotations

from alembic import command
from sqlalchemy import Engine

from tenancy.db import alembic_config, session_scope
from tenancy.tenants import seed_qos_classes


def prepare_database(engine: Engine) -> None:
    """Apply Alembic migrations on `engine` (same connection: works for in-memory SQLite)."""
    with engine.begin() as connection:
        config = alembic_config(str(engine.url))
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    with session_scope(engine) as session:
        seed_qos_classes(session)
