"""A SQLite database file holding the demo fabrics and tenants, for CLI and key-file tests."""

from __future__ import annotations

from pathlib import Path

from api.cli import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY
from tenancy.bootstrap import prepare_database
from tenancy.db import make_engine
from tenancy.demo import load_demo
from tenancy.settings import Settings
from tenancy.uow import UnitOfWork


def demo_database(path: Path) -> str:
    """Create `path` with the demo state (no key files) and return its URL."""
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
    return url
