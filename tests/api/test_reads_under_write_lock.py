"""Every GET answers while another connection holds SQLite's write lock (issue 10, item 10).

Read-only use cases run in read-only transactions (a deferred BEGIN, no write lock), so a read
never waits for a writer such as a 100k-port topology import. The service runs on a SQLite file
with a 50 ms busy timeout: a read that asked for the write lock would fail (500) instead of
waiting 30 s. The requests carry an auditor's API token, so its lookup is covered too; the
console's pages (/ui) an operator's session cookie, so every page, actions included, is reached.
The operator actions' confirmation pages run a what-if, which needs the write lock: they answer
503 under a writer. The test fails when a new GET route (API or console) has no case here.
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
from api.ui.session import SESSION_COOKIE
from tenancy.schemas import TokenCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.usecases import tokens
from tenancy.usecases.bootstrap import prepare_database
from tests.api.test_authz_matrix import is_ufm_path
from tests.builders import (
    FABRIC,
    LOCAL_URL,
    ROCE_FABRIC,
    Onboarded,
    api_create_roce_fabric,
    api_onboard,
    created,
    ok,
)
from tests.keys import key_settings, register_key

LOOPBACK = ("127.0.0.1", 50000)
PARTITIONS = "opensm/partitions.conf"


def short_busy_timeout(dbapi_connection: Any, _record: Any) -> None:
    # Runs after make_engine's own pragmas: waiting for the lock fails after 50 ms, not 30 s.
    dbapi_connection.execute("PRAGMA busy_timeout=50")


# GET routes whose request needs nothing the fixture made.
FIXED_URLS = {
    "/healthz": "/healthz",
    "/docs": "/docs",
    "/docs/oauth2-redirect": "/docs/oauth2-redirect",
    "/metrics": "/metrics",
    "/problems": "/problems",
    "/problems/{problem_type}": "/problems/database-unavailable",
    "/readyz": "/readyz",
    "/v1/fabrics": "/v1/fabrics",
    "/v1/qos-classes": "/v1/qos-classes",
    "/v1/tenants": "/v1/tenants",
    "/v1/policy": "/v1/policy",
    "/v1/policy/versions": "/v1/policy/versions",
    "/v1/policy/versions/{version}": "/v1/policy/versions/0",
    "/v1/audit/entries": "/v1/audit/entries",
    "/v1/audit/checkpoint": "/v1/audit/checkpoint",
    "/v1/audit/proofs/inclusion": "/v1/audit/proofs/inclusion?index=0&size=2",
    "/v1/audit/proofs/consistency": "/v1/audit/proofs/consistency?first=1&second=2",
    "/v1/tokens": "/v1/tokens",
    "/v1/usage/events": "/v1/usage/events",
    "/v1/proofs": "/v1/proofs",
    "/v1/keys": "/v1/keys",
    "/v1/keys/transitions": "/v1/keys/transitions",
}


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
            # A RoCE fabric for its leaf's patch route (issue 16), between its only snapshot and
            # itself: an empty patch.
            api_create_roce_fabric(client)
            verdict = ok(client.get(f"/v1/fabrics/{ROCE_FABRIC}/verification"))
            self.roce_digest = verdict["snapshot_digest"]
            self.proof_id = created(
                client.post("/v1/tenants/acme/isolation-proofs", json={"fabric": FABRIC})
            )["id"]
            created(client.put(f"/v1/fabrics/{FABRIC}/targets/sm-a", json={"kind": "opensm"}))
            auditor = tokens.create_token(
                self.app.state.uow, spec=TokenCreate(name="a", role="auditor")
            )
            self.headers = {"Authorization": f"Bearer {auditor.token}"}
            operator = tokens.create_token(
                self.app.state.uow, spec=TokenCreate(name="o", role="operator")
            )
            # The console's session cookie is the API token itself (api/ui/session.py).
            self.cookies = {SESSION_COOKIE: operator.token}
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
            **FIXED_URLS,
            "/v1/fabrics/{fabric}": fabric,
            "/v1/fabrics/{fabric}/nodes": f"{fabric}/nodes",
            "/v1/fabrics/{fabric}/nodes/{node}": f"{fabric}/nodes/gpu0001",
            "/v1/fabrics/{fabric}/services": f"{fabric}/services",
            "/v1/fabrics/{fabric}/services/{service}": f"{fabric}/services/storage",
            "/v1/fabrics/{fabric}/verification": f"{fabric}/verification",
            "/v1/fabrics/{fabric}/artifacts": f"{fabric}/artifacts",
            "/v1/fabrics/{fabric}/artifacts/{path:path}": f"{fabric}/artifacts/{PARTITIONS}",
            "/v1/tenants/{tenant}": tenant,
            "/v1/tenants/{tenant}/reachability": f"{tenant}/reachability",
            "/v1/tenants/{tenant}/allocations": allocations,
            "/v1/tenants/{tenant}/allocations/{allocation_id}": f"{allocations}/{allocation}",
            "/v1/tenants/{tenant}/grants": f"{tenant}/grants",
            "/v1/tenants/{tenant}/grants/{grant_id}": f"{tenant}/grants/{grant}",
            "/v1/tenants/{tenant}/peerings": f"{tenant}/peerings",
            "/v1/tenants/{tenant}/peering-requests": f"{tenant}/peering-requests",
            "/v1/tenants/{tenant}/partitions": f"{tenant}/partitions",
            "/v1/tenants/{tenant}/partitions/{name}": f"{tenant}/partitions/default",
            "/v1/fabrics/{fabric}/virtual-guids": f"{fabric}/virtual-guids",
            "/v1/usage/records": f"/v1/usage/records?from={since}",
            "/v1/usage/records.csv": f"/v1/usage/records.csv?from={since}",
            "/v1/proofs/{proof_id}": f"/v1/proofs/{self.proof_id}",
            "/v1/fabrics/{fabric}/targets": f"{fabric}/targets",
            "/v1/fabrics/{fabric}/targets/{name}": f"{fabric}/targets/sm-a",
            "/v1/fabrics/{fabric}/sync": f"{fabric}/sync",
            "/v1/fabrics/{fabric}/deployments": f"{fabric}/deployments",
            "/v1/fabrics/{fabric}/snapshots": f"{fabric}/snapshots",
            "/v1/fabrics/{fabric}/signed-manifest": f"{fabric}/signed-manifest",
            "/v1/fabrics/{fabric}/snapshots/{digest}/artifacts/{path:path}": (
                f"{fabric}/snapshots/{self.digest}/artifacts/{PARTITIONS}"
            ),
            "/v1/fabrics/{fabric}/snapshots/{digest}/patches/{leaf}": (
                f"/v1/fabrics/{ROCE_FABRIC}/snapshots/{self.roce_digest}/patches/leaf01"
                f"?from={self.roce_digest}"
            ),
        }

    def console_urls(self) -> dict[str, str]:
        """A request for each console page (GET /ui...) but the what-ifs, as the operator."""
        fabric, tenant = f"/ui/fabrics/{FABRIC}", "/ui/tenants/acme"
        return {
            "/ui": "/ui",
            "/ui/sign-in": "/ui/sign-in",
            "/ui/fabrics": "/ui/fabrics",
            "/ui/fabrics/{fabric}/matrix": f"{fabric}/matrix",
            "/ui/fabrics/{fabric}/matrix/status": f"{fabric}/matrix/status",
            "/ui/fabrics/{fabric}/counterexamples": f"{fabric}/counterexamples",
            "/ui/fabrics/{fabric}/map": f"{fabric}/map",
            "/ui/tenants": "/ui/tenants",
            "/ui/tenants/{tenant}": tenant,
            "/ui/tenants/{tenant}/fabrics/{fabric}/map": f"{tenant}/fabrics/{FABRIC}/map",
            "/ui/evidence": "/ui/evidence",
            "/ui/evidence/proofs/{proof_id}": f"/ui/evidence/proofs/{self.proof_id}",
            "/ui/evidence/verify": "/ui/evidence/verify",
            "/ui/evidence/fabrics/{fabric}/snapshots/{digest}/artifacts/{path:path}": (
                f"/ui/evidence/fabrics/{FABRIC}/snapshots/{self.digest}/artifacts/{PARTITIONS}"
            ),
            "/ui/audit-log": "/ui/audit-log",
            "/ui/audit-log/inclusion": "/ui/audit-log/inclusion?index=0&size=2",
            "/ui/actions/onboard": "/ui/actions/onboard",
            "/ui/tenants/{tenant}/actions/allocate": f"{tenant}/actions/allocate",
            "/ui/tenants/{tenant}/actions/grant": f"{tenant}/actions/grant",
        }

    def what_if_urls(self) -> dict[str, str]:
        """A request for each operator action's confirmation page: each runs a what-if."""
        grant = self.onboarded.grant_ids["acme"]
        return {
            "/ui/actions/onboard/confirm": (
                "/ui/actions/onboard/confirm?name=initech&kind=external&qos_class=bronze"
            ),
            "/ui/tenants/{tenant}/actions/allocate/confirm": (
                f"/ui/tenants/globex/actions/allocate/confirm?fabric={FABRIC}&count=1"
            ),
            "/ui/tenants/{tenant}/actions/grant/confirm": (
                f"/ui/tenants/globex/actions/grant/confirm?fabric={FABRIC}&service=storage"
            ),
            "/ui/tenants/{tenant}/actions/revoke/{grant_id}": (
                f"/ui/tenants/acme/actions/revoke/{grant}"
            ),
            "/ui/tenants/{tenant}/actions/offboard": "/ui/tenants/globex/actions/offboard",
        }


# Other /ui paths: the console's own 404 page, by design (api/ui/pages/home.py).
CATCH_ALL = {"/ui/{path:path}": "/ui/no-such-page"}


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
    # The UFM-compatible API's reads: tests/api/test_ufm_facade.py runs them under the lock.
    return {t for t in templates if not is_ufm_path(t)}


def test_every_get_route_has_a_case(service):
    cases = {**service.urls(), **service.console_urls(), **service.what_if_urls(), **CATCH_ALL}
    assert get_templates(service.app) == set(cases)


def test_every_get_route_answers_while_a_writer_holds_the_lock(service, write_lock):
    with TestClient(
        service.app, raise_server_exceptions=False, client=LOOPBACK, base_url=LOCAL_URL
    ) as client:
        statuses = {
            template: client.get(url, headers=service.headers).status_code
            for template, url in service.urls().items()
        }

    assert {t: s for t, s in statuses.items() if s != 200} == {}


def console_statuses(service: Service, urls: dict[str, str]) -> dict[str, int]:
    """Each console page's final status, signed in as the operator (redirects followed)."""
    with TestClient(
        service.app,
        raise_server_exceptions=False,
        client=LOOPBACK,
        base_url=LOCAL_URL,
        cookies=service.cookies,
    ) as client:
        return {template: client.get(url).status_code for template, url in urls.items()}


def test_every_console_page_answers_while_a_writer_holds_the_lock(service, write_lock):
    statuses = console_statuses(service, {**service.console_urls(), **CATCH_ALL})

    assert {t: s for t, s in statuses.items() if s != 200} == {"/ui/{path:path}": 404}


def test_the_what_ifs_answer_without_the_lock(service):
    assert set(console_statuses(service, service.what_if_urls()).values()) == {200}


def test_the_what_ifs_wait_for_the_lock_then_answer_503(service, write_lock):
    # A what-if rehearses the change in a write transaction and rolls it back
    # (tenancy/gate/what_if.py, `?dry_run=true`'s path): it writes, then reports, so it takes the
    # write lock like the change itself; it cannot be read-only. Under a writer it waits the busy
    # timeout, then answers the database-unavailable page (503, retry later; nothing changed), never
    # a 500.
    with TestClient(
        service.app,
        raise_server_exceptions=False,
        client=LOOPBACK,
        base_url=LOCAL_URL,
        cookies=service.cookies,
    ) as client:
        pages = {t: client.get(url) for t, url in service.what_if_urls().items()}

    assert {t: page.status_code for t, page in pages.items()} == dict.fromkeys(pages, 503)
    for page in pages.values():
        assert page.headers["content-type"].startswith("text/html")
        assert "503 · Database unavailable" in page.text
        assert "the database is unavailable; retry later" in page.text
        assert "database is locked" not in page.text  # the driver's text goes to the log only


def test_an_api_what_if_under_a_writer_is_503_too(service, write_lock):
    # The same rehearsal behind `?dry_run=true` (tenancy/store/uow.py): a 503 problem, not a 500.
    operator = {"Authorization": f"Bearer {service.cookies[SESSION_COOKIE]}"}
    with TestClient(
        service.app, raise_server_exceptions=False, client=LOOPBACK, base_url=LOCAL_URL
    ) as client:
        answer = client.post(
            "/v1/tenants?dry_run=true",
            json={"name": "initech", "kind": "external", "qos_class": "bronze"},
            headers=operator,
        )

    assert answer.status_code == 503
    assert answer.json()["type"].endswith("/database-unavailable")
