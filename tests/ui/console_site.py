"""A console site for the UI tests: a copy of the demo database, keys, and a token per role.

The demo (tests/demo_db.py) has ib-east and roce-west, tenants acme, research and globex with
two nodes each on both, and storage granted to acme. `console_site` mints the tokens the tests
sign in with; the app is the real one (api/app.py), so the console runs exactly as served.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from fastapi import FastAPI
from sqlalchemy import Engine

from api.app import create_app
from tenancy.schemas import TokenCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import Clock, UnitOfWork, system_clock
from tenancy.usecases import tokens
from tests.demo_db import demo_database
from tests.keys import keys_create

# Role name -> (token role, tenant) of the tokens every site has.
ROLES = {
    "operator": ("operator", None),
    "auditor": ("auditor", None),
    "billing": ("billing", None),
    "acme-viewer": ("tenant-viewer", "acme"),
    "acme-admin": ("tenant-admin", "acme"),
}


@dataclass
class ConsoleSite:
    """A demo database with its tokens; `app()` builds the service on it."""

    url: str
    engine: Engine
    tokens: dict[str, str]  # ROLES key -> secret

    def app(self, clock: Clock = system_clock) -> FastAPI:
        """The service on this site's database (closed: tokens exist)."""
        return create_app(Settings(database_url=self.url), engine=self.engine, clock=clock)

    def uow(self) -> UnitOfWork:
        """A unit of work on the site's database, acting as the system (the CLI's principal)."""
        return UnitOfWork(self.engine, Settings(database_url=self.url))

    def mint(
        self, name: str, role: str, tenant: str | None = None, expires_at: datetime | None = None
    ) -> tuple[str, str]:
        """A new token: (id, secret)."""
        spec = TokenCreate(name=name, role=role, tenant=tenant, expires_at=expires_at)
        created = tokens.create_token(self.uow(), spec=spec)
        return created.id, created.token


def console_site(directory: Path, *, with_tokens: bool = True) -> ConsoleSite:
    """A demo database in `directory` with key files, and (unless told) a token per role."""
    url = demo_database(directory / "console.db")
    keys_create(url)  # proofs and opensm.conf need them
    site = ConsoleSite(url, make_engine(url), {})
    if with_tokens:
        for key, (role, tenant) in ROLES.items():
            site.tokens[key] = site.mint(key, role, tenant)[1]
    return site
