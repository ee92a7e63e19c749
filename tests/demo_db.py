"""A SQLite database file holding the demo fabrics and tenants, for CLI and key-file tests.

The demo is loaded once per test session into a template file; each test gets a copy (loading
it takes about 0.6 s, copying it a millisecond).
"""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
from functools import cache
from pathlib import Path

from cli import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.demo import load_demo


def demo_database(path: Path) -> str:
    """Create `path` with the demo state (no key files) and return its URL."""
    shutil.copy2(_template(), path)  # copy2 keeps the file's mode (0600)
    return f"sqlite:///{path}"


@cache
def _template() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="isofabric-demo-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    path = directory / "demo.db"
    _load_demo(path)
    with sqlite3.connect(path) as connection:  # everything in the main file: one file to copy
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def _load_demo(path: Path) -> None:
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    prepare_database(engine)
    loaded = load_demo(
        UnitOfWork(engine, Settings(database_url=url)),
        topology_text=DEMO_TOPOLOGY.read_text(),
        roce_inventory_text=DEMO_ROCE_INVENTORY.read_text(),
    )
    engine.dispose()
    assert loaded, "the demo loads into a new database"
