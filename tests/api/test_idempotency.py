"""Idempotency-Key on POST (issue 10, item 19): a retry gets the first response, writes nothing.

Runs on SQLite and, when configured, PostgreSQL (the `client` fixture's backends). The race of
two requests with the same key is pinned down in tests/tenancy/test_idempotency_races.py.
"""

from __future__ import annotations

import json
from typing import Any, cast

import httpx2
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.deps import Uow
from tenancy.store.settings import load_settings
from tests.builders import assert_problem, created, dump_database, ok

ACME = "/v1/tenants/acme/allocations"
ONE_NODE = {"fabric": "ib-east", "count": 1}
ADMIN = "bootstrap-admin-token"
DAY_SECONDS = 24 * 3600
JSON = {"Content-Type": "application/json"}


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def keyed(key: str, **headers: str) -> dict[str, str]:
    return {"Idempotency-Key": key, **headers}


def allocate(client: TestClient, key: str, path: str = ACME, **spec: Any) -> httpx2.Response:
    return client.post(path, json=spec or ONE_NODE, headers=keyed(key))


def records(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT * FROM idempotency_record ORDER BY id"))
        return [dict(row._mapping) for row in rows]


def allocated_nodes(client: TestClient, tenant: str = "acme") -> list[str]:
    page = ok(client.get("/v1/fabrics/ib-east/nodes", params={"tenant": tenant}))
    return sorted(node["name"] for node in page["data"])


@pytest.fixture
def probe(client: TestClient) -> dict[str, int]:
    """POST /v1/probe/count (``?dry_run=``, ``?x=``): counts the calls it runs, writes nothing."""
    seen = {"calls": 0}

    def count(x: str = "", dry_run: bool = False) -> dict[str, int]:
        seen["calls"] += 1
        return {"calls": seen["calls"]}

    cast(FastAPI, client.app).add_api_route("/v1/probe/count", count, methods=["POST"])
    return seen


@pytest.fixture
def crashing(make_client) -> TestClient:
    """A client whose POST /v1/probe/crash commits its claim, then fails with a 500."""
    client: TestClient = make_client(raise_server_exceptions=False)

    def crash(uow: Uow) -> None:
        with uow.transaction():
            pass  # the request's first write transaction: its claim commits here
        raise RuntimeError("failed after the commit")

    cast(FastAPI, client.app).add_api_route("/v1/probe/crash", crash, methods=["POST"])
    return client


# --- replay -----------------------------------------------------------------------------------


def test_a_retried_allocation_gets_the_first_response_and_takes_no_more_nodes(
    client, onboarded, engine
):
    first = allocate(client, "alloc-1")
    before = dump_database(engine)

    retry = allocate(client, "alloc-1")

    assert first.status_code == retry.status_code == 201
    assert retry.content == first.content
    assert retry.headers["content-type"] == first.headers["content-type"] == "application/json"
    assert retry.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert dump_database(engine) == before  # no allocation, no audit entry, no record
    assert len(allocated_nodes(client)) == 3  # the onboarding's 2, and 1 for the key


def test_a_json_body_with_its_members_reordered_or_respaced_is_the_same_request(client, onboarded):
    first = client.post(
        ACME, content=b'{"fabric": "ib-east", "count": 1}', headers=keyed("k", **JSON)
    )
    retry = client.post(ACME, content=b'{"count":1,"fabric":"ib-east"}', headers=keyed("k", **JSON))

    assert created(first) == created(retry)
    assert retry.headers["idempotent-replayed"] == "true"


def test_a_request_without_a_key_is_not_recorded_and_a_retry_runs_again(client, onboarded, engine):
    first = created(client.post(ACME, json=ONE_NODE))
    second = created(client.post(ACME, json=ONE_NODE))

    assert first["id"] != second["id"]
    assert records(engine) == []


# --- the key names one request ----------------------------------------------------------------


def test_the_same_key_with_another_body_is_a_422_that_changes_nothing(client, onboarded, engine):
    allocate(client, "alloc-1")
    before = dump_database(engine)

    response = allocate(client, "alloc-1", nodes=["gpu0008"], fabric="ib-east")

    body = assert_problem(response, 422, "idempotency-key-reused")
    assert "alloc-1" in body["detail"]
    assert dump_database(engine) == before


def test_the_same_key_with_another_query_is_another_request(client, probe):
    ok(client.post("/v1/probe/count?x=1", headers=keyed("k")))

    response = client.post("/v1/probe/count?x=2", headers=keyed("k"))

    assert_problem(response, 422, "idempotency-key-reused")
    assert probe["calls"] == 1


def test_the_same_key_and_body_for_another_tenant_is_another_request(client, onboarded):
    acme = created(allocate(client, "k"))

    research = created(allocate(client, "k", path="/v1/tenants/research/allocations"))

    # Scoped by the concrete path: a route template would have replayed acme's allocation.
    assert (acme["tenant"], research["tenant"]) == ("acme", "research")
    assert acme["nodes"] != research["nodes"]


def test_the_same_key_on_another_route_is_another_request(client, onboarded):
    created(allocate(client, "k"))

    tenant = client.post(
        "/v1/tenants", json={"name": "initech", "kind": "internal"}, headers=keyed("k")
    )

    assert created(tenant)["name"] == "initech"


def test_another_token_using_the_same_key_makes_another_request(make_client, onboarded):
    client = make_client(admin_token=ADMIN)
    secrets = [
        created(
            client.post(
                "/v1/tokens", json={"name": f"ops{i}", "role": "operator"}, headers=bearer(ADMIN)
            )
        )["token"]
        for i in (1, 2)
    ]

    first, second = (
        created(client.post(ACME, json=ONE_NODE, headers=keyed("k", **bearer(secret))))
        for secret in secrets
    )

    assert first["id"] != second["id"]
    assert first["nodes"] != second["nodes"]


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "caf\u00e9"])
def test_a_malformed_key_is_a_422_that_changes_nothing(client, onboarded, engine, key):
    before = dump_database(engine)

    response = client.post(ACME, json=ONE_NODE, headers=[("Idempotency-Key", key.encode("utf-8"))])

    body = assert_problem(response, 422, "validation-error")
    assert "Idempotency-Key" in body["detail"]
    assert dump_database(engine) == before


def test_a_key_of_255_printable_characters_is_honoured(client, onboarded):
    key = "".join(chr(c) for c in range(0x20, 0x7F)) * 3  # 285: every printable character
    first = created(allocate(client, key[:255]))

    assert created(allocate(client, key[:255])) == first


# --- what is recorded -------------------------------------------------------------------------


def test_a_refusal_is_not_recorded_so_the_same_key_can_be_retried_once_it_would_pass(
    client, onboarded, engine
):
    path = "/v1/tenants/initech/allocations"
    assert_problem(allocate(client, "k", path=path), 404, "not-found")
    assert records(engine) == []
    created(client.post("/v1/tenants", json={"name": "initech", "kind": "internal"}))

    body = created(allocate(client, "k", path=path))

    assert body["tenant"] == "initech"


def test_a_replayed_token_creation_is_a_409_naming_the_token_and_no_secret_is_stored(
    make_client, onboarded, engine
):
    client = make_client(admin_token=ADMIN)
    spec = {"name": "ci", "role": "operator"}
    first = created(client.post("/v1/tokens", json=spec, headers=keyed("tok", **bearer(ADMIN))))
    before = dump_database(engine)

    retry = client.post("/v1/tokens", json=spec, headers=keyed("tok", **bearer(ADMIN)))

    body = assert_problem(retry, 409, "secret-not-replayed")
    assert body["token_id"] == first["id"]
    assert first["token"] not in retry.text
    assert dump_database(engine) == before  # no second token
    (record,) = records(engine)
    assert (record["status"], bool(record["secret_withheld"])) == (201, True)
    assert first["token"].encode() not in bytes(record["body"])
    assert json.loads(bytes(record["body"]))["id"] == first["id"]


def test_a_dry_run_is_neither_recorded_nor_replayed(client, probe, engine):
    for expected in (1, 2):
        body = ok(client.post("/v1/probe/count?dry_run=true", headers=keyed("k")))
        assert body == {"calls": expected}

    assert records(engine) == []


@pytest.mark.parametrize("flag", ["%20true", "TRUE", "%09yes%20", "1", "on", "false&dry_run=true"])
def test_every_spelling_of_a_dry_run_is_a_dry_run_to_the_key_layer_too(
    client, onboarded, engine, flag
):
    before = allocated_nodes(client)
    for body in (ONE_NODE, {**ONE_NODE, "count": 2}):  # another body: no idempotency mismatch
        answer = ok(client.post(f"{ACME}?dry_run={flag}", json=body, headers=keyed("k")))
        assert answer["holds"] is True and "fabrics" in answer

    assert records(engine) == []
    assert allocated_nodes(client) == before


@pytest.mark.parametrize("flag", ["maybe", "%20", "tru"])
def test_a_flag_that_is_not_a_boolean_is_refused_and_not_recorded(client, onboarded, engine, flag):
    response = client.post(f"{ACME}?dry_run={flag}", json=ONE_NODE, headers=keyed("k"))

    if flag == "%20":  # blank: FastAPI's false, so the allocation runs and is recorded
        assert response.status_code == 201, response.text
        assert len(records(engine)) == 1
    else:
        assert_problem(response, 422)
        assert records(engine) == []


def test_a_request_that_failed_after_committing_is_in_progress_for_its_retries(crashing, engine):
    assert crashing.post("/v1/probe/crash", headers=keyed("k")).status_code == 500

    retry = crashing.post("/v1/probe/crash", headers=keyed("k"))

    body = assert_problem(retry, 409, "idempotency-in-progress")
    assert "'k'" in body["detail"]
    (record,) = records(engine)
    assert record["status"] is None


# --- expiry -----------------------------------------------------------------------------------


def test_a_key_is_honoured_for_24_hours(client, onboarded, clock):
    first = created(allocate(client, "k"))
    clock.advance(DAY_SECONDS - 1)

    assert created(allocate(client, "k")) == first


def test_an_expired_key_names_a_new_request_and_its_old_record_is_replaced(
    client, onboarded, clock, engine
):
    first = created(allocate(client, "k"))
    clock.advance(DAY_SECONDS + 1)

    second = created(allocate(client, "k"))

    assert second["id"] != first["id"]
    assert [r["key"] for r in records(engine)] == ["k"]


def test_expired_records_are_purged_when_another_is_recorded(client, onboarded, clock, engine):
    created(allocate(client, "old"))
    clock.advance(DAY_SECONDS + 1)

    created(allocate(client, "new"))

    assert [r["key"] for r in records(engine)] == ["new"]


def test_a_longer_ttl_keeps_keys_longer(make_client, onboarded, clock):
    client = make_client(idempotency_ttl_hours=48)
    first = created(allocate(client, "k"))
    clock.advance(2 * DAY_SECONDS - 1)

    assert created(allocate(client, "k")) == first


def test_the_ttl_comes_from_the_environment_and_is_at_least_24_hours(monkeypatch):
    monkeypatch.setenv("ISOFABRIC_IDEMPOTENCY_TTL_HOURS", "48")
    assert load_settings().idempotency_ttl_hours == 48

    monkeypatch.setenv("ISOFABRIC_IDEMPOTENCY_TTL_HOURS", "23")
    with pytest.raises(ValueError, match="at least 24"):
        load_settings()
