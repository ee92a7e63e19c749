"""A real server (uvicorn in a thread) on a copy of the demo database, for the CLI client tests.

The demo database (tests/demo_db.py) has ib-east and roce-west, tenants acme, research and
globex with two nodes each on both, and storage granted to acme. The server requires a token
(`ADMIN`); `Served.run` drives the CLI with typer's CliRunner, as an operator would type it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.app import create_app
from cli import app
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tests.demo_db import demo_database
from tests.keys import keys_create
from tests.live_server import live_server

ADMIN = "admin-secret"
runner = CliRunner()


@dataclass(frozen=True)
class Served:
    url: str  # the server's base URL
    db: str  # the database it serves, for the same commands run locally

    def run(self, *args: str, token: str | None = ADMIN) -> tuple[int, str, str]:
        """Run `isofabric ARGS --url URL [--token T]`: exit status, stdout, stderr."""
        auth = ["--token", token] if token else []
        result = runner.invoke(app, [*args, "--url", self.url, *auth])
        return result.exit_code, result.stdout, result.stderr

    def ok_json(self, *args: str) -> dict[str, Any]:
        status, out, err = self.run(*args, "--json")
        assert status == 0, err
        document: dict[str, Any] = json.loads(out)
        return document


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    url = demo_database(tmp_path / "cli.db")
    keys_create(url)  # key files beside cli.db: proofs and opensm.conf need them
    engine = make_engine(url)
    server_app = create_app(Settings(database_url=url, admin_token=ADMIN), engine=engine)
    try:
        with live_server(server_app) as base:
            yield Served(base, url)
    finally:
        engine.dispose()
