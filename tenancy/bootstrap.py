"""Bring a database to the current schema and seed reference data (idempotent)."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

from alembic import command
from sqlalchemy import Engine

from tenancy.db import alembic_config, session_scope
from tenancy.settings import sqlite_file
from tenancy.tenants import seed_qos_classes

log = logging.getLogger("isofabric")
# SQLite's companion files: they hold recent transactions, so they need the same protection.
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def prepare_database(engine: Engine) -> None:
    """Apply Alembic migrations on `engine` (same connection: works for in-memory SQLite).

    A SQLite database file readable by others (created 0644 by earlier versions) is made 0600.
    """
    restrict_sqlite_files(engine)
    with engine.begin() as connection:
        config = alembic_config(str(engine.url))
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    with session_scope(engine) as session:
        seed_qos_classes(session)


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
