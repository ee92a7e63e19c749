"""What every command shares: the --db and --fabric options, the demo inputs, the unit of work.

This is the one CLI module that creates a database engine (and migrates the database first).
Only `serve`, `db upgrade`, `db restore` and `keys create` may create a SQLite database file;
every other command refuses a missing one (run from the wrong directory, it would otherwise
start a new, empty database).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from policies.errors import InvalidValueError

if TYPE_CHECKING:  # imported when a command opens the database: `isofabric --help` starts fast
    from tenancy.store.settings import Settings
    from tenancy.store.uow import UnitOfWork

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_TOPOLOGY = REPO_ROOT / "examples" / "ib-east.ibnetdiscover"
DEMO_ROCE_INVENTORY = REPO_ROOT / "examples" / "roce-west.json"
DbOption = Annotated[str | None, typer.Option("--db", help="SQLAlchemy URL (default: settings)")]
FabricOption = Annotated[str, typer.Option("--fabric", help="Fabric name")]
# The units of work the running command opened; `close_databases` closes them when it ends.
_opened: list[UnitOfWork] = []


def settings_for(db: str | None) -> Settings:
    """The environment's settings, with the database URL replaced by `db` when given.

    Raises:
        InvalidValueError: an ``ISOFABRIC_*`` variable holds something its setting cannot take.
    """
    from tenancy.store.settings import load_settings

    try:
        settings = load_settings()
    except ValueError as error:
        raise InvalidValueError(f"configuration: {error}") from error
    return replace(settings, database_url=db) if db else settings


def open_uow(db: str | None, *, create: bool = False) -> UnitOfWork:
    """A unit of work on the migrated database `db` (default: the settings' URL).

    Raises:
        NotFoundError: the SQLite database file does not exist and `create` is false.
    """
    from tenancy.store.db import make_engine
    from tenancy.store.uow import UnitOfWork
    from tenancy.usecases.bootstrap import prepare_database

    settings = settings_for(db)
    uow = UnitOfWork(make_engine(settings.database_url, create_missing=create), settings)
    _opened.append(uow)
    prepare_database(uow.engine)
    return uow


def close_databases() -> None:
    """Close the connections of every unit of work the command opened.

    On its last connection's close SQLite folds the write-ahead log into the database file, and
    a later `db restore` finds the database in no one's use.
    """
    while _opened:
        _opened.pop().engine.dispose()
