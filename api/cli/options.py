"""What every command shares: the --db and --fabric options, the demo inputs, the unit of work.

This is the one CLI module that creates a database engine (and migrates the database first).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from tenancy.bootstrap import prepare_database
from tenancy.db import make_engine
from tenancy.settings import Settings, load_settings
from tenancy.uow import UnitOfWork

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_TOPOLOGY = REPO_ROOT / "examples" / "ib-east.ibnetdiscover"
DEMO_ROCE_INVENTORY = REPO_ROOT / "examples" / "roce-west.json"
DbOption = Annotated[str | None, typer.Option("--db", help="SQLAlchemy URL (default: settings)")]
FabricOption = Annotated[str, typer.Option("--fabric", help="Fabric name")]


def settings_for(db: str | None) -> Settings:
    """The environment's settings, with the database URL replaced by `db` when given."""
    settings = load_settings()
    return replace(settings, database_url=db) if db else settings


def open_uow(db: str | None) -> UnitOfWork:
    """A unit of work on the migrated database `db` (default: the settings' URL)."""
    settings = settings_for(db)
    engine = make_engine(settings.database_url)
    prepare_database(engine)
    return UnitOfWork(engine, settings)
