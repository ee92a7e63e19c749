"""Liveness, readiness and a server that outlives its database (issue 14, items 1 and 4).

`/healthz` never touches the database; `/readyz` names everything that keeps the server from
taking traffic. A server whose database does not answer at start keeps running: `/healthz` 200,
`/readyz` and every `/v1` route a 503 problem (not a 500), and once the database answers it
is migrated and served without a restart.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from api import health
from api.app import create_app
from policies.errors import DatabaseUnavailableError
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tests.builders import LOCAL_URL, PROBLEM_JSON
from tests.keys import key_settings

LOOPBACK = ("127.0.0.1", 50000)
# Nothing listens on port 1: the connection is refused at once.
UNREACHABLE_POSTGRES = "postgresql://postgres@127.0.0.1:1/isofabric"


def test_healthz_answers_ok(client):
    response = client.get("/healthz")

    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_health_routes_are_documented_with_typed_bodies(client):
    paths = client.get("/openapi.json").json()["paths"]

    for path in ("/healthz", "/readyz"):
        operation = paths[path]["get"]
        assert operation["summary"] and operation["description"]
        schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert schema["$ref"].startswith("#/components/schemas/")
    assert "503" in paths["/readyz"]["get"]["responses"]
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for name in ("HealthView", "ReadinessView", "ReadinessChecks", "ScheduledRunView"):
        for field, spec in schemas[name]["properties"].items():
            assert spec.get("description"), f"{name}.{field}"


def unreachable_app(url: str, tmp_path: Path) -> TestClient:
    settings = key_settings(Settings(database_url=url), copy_to=tmp_path / "keys")
    return TestClient(create_app(settings), client=LOOPBACK, base_url=LOCAL_URL)


@pytest.mark.parametrize(
    "url",
    [UNREACHABLE_POSTGRES, "sqlite:///{tmp}/no-such-directory/isofabric.db"],
    ids=["postgres-refused", "sqlite-missing-directory"],
)
def test_a_server_without_its_database_stays_alive_and_says_why(url, tmp_path):
    client = unreachable_app(url.format(tmp=tmp_path), tmp_path)  # no exception: it starts

    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.headers["content-type"] == PROBLEM_JSON
    assert ready.json()["type"] == "/problems/not-ready"
    [reason] = ready.json()["not_ready"]
    assert reason == "database unreachable (the server's log says why)"
    for leaked in ("127.0.0.1", "port 1", "no-such-directory", "refused", "unable to open"):
        assert leaked not in ready.text and leaked not in client.get("/v1/tenants").text
    listed = client.get("/v1/tenants")
    assert listed.status_code == 503
    assert listed.json()["type"] == "/problems/database-unavailable"
    assert listed.headers["x-request-id"]
    # Everything else that reads the database too; what needs none still answers.
    for path in ("/metrics", "/ui/fabrics", "/ui/sign-in"):
        answer = client.get(path)
        assert (answer.status_code, answer.json()["type"]) == (503, listed.json()["type"]), path
    assert [client.get(p).status_code for p in ("/docs", "/problems", "/openapi.json")] == [200] * 3


def test_the_server_prepares_the_database_once_it_answers(tmp_path, monkeypatch):
    monkeypatch.setattr(health, "RETRY_FIRST_SECONDS", 0.05)
    monkeypatch.setattr(health, "RETRY_MAX_SECONDS", 0.05)
    directory = tmp_path / "later"
    client = unreachable_app(f"sqlite:///{directory}/isofabric.db", tmp_path)

    with client:  # the lifespan runs: the retry starts
        assert client.get("/v1/tenants").status_code == 503
        directory.mkdir()  # the database can be opened now
        assert wait_for(lambda: client.get("/v1/tenants").status_code == 200)
        reasons = client.get("/readyz").json()["not_ready"]

    # Migrated: what is left is the key, which only `isofabric keys create` records.
    assert [r for r in reasons if r.startswith(("database", "migrations"))] == [], reasons
    assert "isofabric keys create" in reasons[0]
    assert (directory / "isofabric.db").is_file()


def wait_for(condition, attempts: int = 400) -> bool:
    """Poll `condition` (every 25 ms, up to `attempts` times): whether it came true."""
    for _ in range(attempts):
        if condition():
            return True
        time.sleep(0.025)
    return False


def test_a_database_that_goes_away_is_a_503_for_the_unit_of_work():
    uow = UnitOfWork(make_engine(UNREACHABLE_POSTGRES), Settings())

    unavailable = pytest.raises(DatabaseUnavailableError, match="the database is unavailable")
    with unavailable, uow.transaction(read_only=True) as tx:
        tx.session.connection()
    uow.engine.dispose()


@pytest.mark.postgres
def test_a_database_dropped_under_a_running_server_is_a_503_not_a_500(postgres_url, tmp_path):
    client = unreachable_app(postgres_url, tmp_path)  # it answers: prepared at once
    assert client.get("/v1/tenants").status_code == 200
    admin = make_url(postgres_url).set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE "{make_url(postgres_url).database}" WITH (FORCE)')

    listed = client.get("/v1/tenants")  # the token check's query fails first (middleware)
    scraped = client.get("/metrics")  # the same check, in front of the metrics
    health = client.get("/healthz")
    ready = client.get("/readyz")

    assert (listed.status_code, listed.json()["type"]) == (503, "/problems/database-unavailable")
    assert (scraped.status_code, scraped.json()["type"]) == (503, listed.json()["type"])
    assert health.status_code == 200
    assert ready.status_code == 503
    assert ready.json()["not_ready"][0].startswith("database unreachable")
    client.app.state.uow.engine.dispose()  # type: ignore[attr-defined]
