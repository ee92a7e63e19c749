"""Every GET answers while another connection holds SQLite's write lock (issue 10, item 10).

Read-only use cases run in read-only transactions (a deferred BEGIN, no write lock), so a read
never waits for a writer such as a 100k-port topology import. The service runs on a SQLite file
with a 50 ms busy timeout: a read that asked for the write lock would fail (500) instead of
waiting 30 s. The requests carry an auditor's API token, so its lookup is covered too. The test
fails when a new GET route has no case here.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import event

from api.app import create_app
from tenancy import tokens
from tenancy.bootstrap import prepare_database
from tenancy.db import make_engine
from tenancy.schemas import TokenCreate
from tenancy.settings import Settings
from tests.builders import FABRIC, LOCAL_URL, Onboarded, api_onboard, created, ok
from tests.keys import key_settings, register_key

LOOPBACK = ("127.0.0.1", 50000)
PARTITIONS = "opensm/partitions.conf"


def short_busy_timeout(dbapi_connection: Any, _record: Any) -> None:
    # Runs after make_engine's own pragmas: waiting for the lock fails after 50 ms, not 30 s.
    dbapi_connection.execute("PRAGMA busy_timeout=50")


class Service:
    """An onboarded service on a SQLite file, a stored proof and checkpoint, an auditor token."""

    def __init__(self, db_path: Path) -> None:
        url = f"sqlite:///{db_path}"
        self.db_path = db_path
        self.engine = make_engine(url)
        event.listen(self.engine, "connect", short_busy_timeout)
        prepare_database(self.engine)
        register_key(self.engine)
        self.app = create_app(key_settings(Settings(database_url=url)), engine=self.engine)
        with TestClient(
            self.app, client=LOOPBACK, base_url=LOCAL_URL
        ) as client:  # open mode: the operator
            self.onboarded: Onboarded = api_onboard(client)
            self.proof_id = created(
                client.post("/v1/tenants/acme/isolation-proofs", json={"fabric": FABRIC})
            )["id"]
            created(client.put(f"/v1/fabrics/{FABRIC}/targets/sm-a", json={"kind": "opensm"}))
            auditor = tokens.create_token(
                self.app.state.uow, spec=TokenCreate(name="a", role="auditor")
            )
            self.headers = {"Authorization": f"Bearer {auditor.token}"}
            # Stored now, after the last audited change: later GETs of it only read.
            ok(client.get("/v1/audit/checkpoint", headers=self.headers))
            # The first signed manifest of a snapshot retains its files (a write); later ones read.
            manifest = ok(client.get(f"/v1/fabrics/{FABRIC}/signed-manifest", headers=self.headers))
            payload = json.loads(base64.b64decode(manifest["payload"]))
            self.digest = payload["snapshot_digest"]

    def urls(self) -> dict[str, str]:
        """A request for each GET route template."""
        since = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        fabric, tenant = f"/v1/fabrics/{FABRIC}", "/v1/tenants/acme"
        allocations, allocation = f"{tenant}/allocations", self.onboarded.allocation_ids["acme"]
        grant = self.onboarded.grant_ids["acme"]
        return {
            "/healthz": "/healthz",
            "/readyz": "/readyz",
            "/v1/fabrics": "/v1/fabrics",
            "/v1/fabrics/{fabric}": fabric,
            "/v1/fabrics/{fabric}/nodes": f"{fabric}/nodes",
            "/v1/fabrics/{fabric}/nodes/{node}": f"{fabric}/nodes/gpu0001",
            "/v1/fabrics/{fabric}/services": f"{fabric}/services",
            "/v1/fabrics/{fabric}/services/{service}": f"{fabric}/services/storage",
            "/v1/fabrics/{fabric}/verification": f"{fabric}/verification",
            "/v1/fabrics/{fabric}/artifacts": f"{fabric}/artifacts",
            "/v1/fabrics/{fabric}/artifacts/{path:path}": f"{fabric}/artifacts/{PARTITIONS}",
            "/v1/qos-classes": "/v1/qos-classes",
            "/v1/tenants": "/v1/tenants",
            "/v1/tenants/{tenant}": tenant,
            "/v1/tenants/{tenant}/reachability": f"{tenant}/reachability",
            "/v1/tenants/{tenant}/allocations": allocations,
            "/v1/tenants/{tenant}/allocations/{allocation_id}": f"{allocations}/{allocation}",
            "/v1/tenants/{tenant}/grants": f"{tenant}/grants",
            "/v1/tenants/{tenant}/grants/{grant_id}": f"{tenant}/grants/{grant}",
            "/v1/tenants/{tenant}/peerings": f"{tenant}/peerings",
            "/v1/tenants/{tenant}/peering-requests": f"{tenant}/peering-requests",
            "/v1/policy": "/v1/policy",
            "/v1/policy/versions": "/v1/policy/versions",
            "/v1/policy/versions/{version}": "/v1/policy/versions/0",
            "/v1/audit/entries": "/v1/audit/entries",
            "/v1/audit/checkpoint": "/v1/audit/checkpoint",
            "/v1/audit/proofs/inclusion": "/v1/audit/proofs/inclusion?index=0&size=2",
            "/v1/audit/proofs/consistency": "/v1/audit/proofs/consistency?first=1&second=2",
            "/v1/tokens": "/v1/tokens",
            "/v1/usage/records": f"/v1/usage/records?from={since}",
            "/v1/usage/records.csv": f"/v1/usage/records.csv?from={since}",
            "/v1/usage/events": "/v1/usage/events",
            "/v1/proofs": "/v1/proofs",
            "/v1/proofs/{proof_id}": f"/v1/proofs/{self.proof_id}",
            "/v1/keys": "/v1/keys",
            "/v1/fabrics/{fabric}/targets": f"{fabric}/targets",
            "/v1/fabrics/{fabric}/targets/{name}": f"{fabric}/targets/sm-a",
            "/v1/fabrics/{fabric}/sync": f"{fabric}/sync",
            "/v1/fabrics/{fabric}/deployments": f"{fabric}/deployments",
            "/v1/fabrics/{fabric}/snapshots": f"{fabric}/snapshots",
            "/v1/fabrics/{fabric}/signed-manifest": f"{fabric}/signed-manifest",
            "/v1/fabrics/{fabric}/snapshots/{digest}/artifacts/{path:path}": (
                f"{fabric}/snapshots/{self.digest}/artifacts/{PARTITIONS}"
            ),
        }


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    built = Service(tmp_path_factory.mktemp("reads") / "reads.db")
    try:
        yield built
    finally:
        built.engine.dispose()


@pytest.fixture
def write_lock(service: Service) -> Iterator[None]:
    """Another connection holds the database's write lock for the test's duration."""
    holder = sqlite3.connect(service.db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def get_templates(app: FastAPI) -> set[str]:
    templates = set()
    for route in app.router.routes:
        included = getattr(route, "original_router", None)
        for leaf in included.routes if included is not None else [route]:
            if isinstance(leaf, APIRoute) and "GET" in (leaf.methods or set()):
                templates.add(leaf.path)
    return templates


def test_every_get_route_has_a_case(service):
    assert get_templates(service.app) == set(service.urls())


def test_every_get_route_answers_while_a_writer_holds_the_lock(service, write_lock):
    with TestClient(
        service.app, raise_server_exceptions=False, client=LOOPBACK, base_url=LOCAL_URL
    ) as client:
        statuses = {
            template: client.get(url, headers=service.headers).status_code
            for template, url in service.urls().items()
        }

    assert {t: s for t, s in statuses.items() if s != 200} == {}
