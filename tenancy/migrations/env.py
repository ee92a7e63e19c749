"""Alembic environment: migrations run against the URL the caller configured."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import tenancy.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from tenancy.store.db import make_engine

target_metadata = SQLModel.metadata


def run_migrations() -> None:
    url = context.config.get_main_option("sqlalchemy.url") or ""
    connectable = context.config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    engine = make_engine(url)
    with engine.connect() as connection:
        _run(connection)
    engine.dispose()


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode recreates tables
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
