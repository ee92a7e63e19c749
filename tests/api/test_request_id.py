"""X-Request-ID (issue 10, item 19): every response echoes the request's id, which the audit log
records; a missing or malformed one is replaced by a new UUID4."""

from __future__ import annotations

import uuid
from typing import cast

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.builders import assert_problem, created, ok

ADMIN = "bootstrap-admin-token"


def last_audit_request_id(client: TestClient) -> str:
    entries = ok(client.get("/v1/audit/entries", params={"limit": 1000}))["data"]
    request_id: str = entries[-1]["request_id"]
    return request_id


def test_a_success_echoes_the_clients_request_id(client):
    response = client.get("/v1/tenants", headers={"X-Request-ID": "req-42"})

    assert ok(response) and response.headers["x-request-id"] == "req-42"


def test_without_one_the_response_names_a_new_id_which_the_audit_entry_records(client):
    response = client.post("/v1/tenants", json={"name": "initech", "kind": "internal"})

    created(response)
    request_id = response.headers["x-request-id"]
    assert uuid.UUID(request_id).version == 4
    assert last_audit_request_id(client) == request_id


@pytest.mark.parametrize("supplied", ["", "x" * 65, "two words", "semi;colon"])
def test_a_malformed_request_id_is_replaced_in_the_response_and_the_audit_log(client, supplied):
    response = client.post(
        "/v1/tenants",
        json={"name": "initech", "kind": "internal"},
        headers={"X-Request-ID": supplied},
    )

    created(response)
    request_id = response.headers["x-request-id"]
    assert uuid.UUID(request_id).version == 4
    assert last_audit_request_id(client) == request_id


def test_a_problem_echoes_the_request_id(client):
    response = client.get("/v1/tenants/nobody", headers={"X-Request-ID": "req-404"})

    assert_problem(response, 404, "not-found")
    assert response.headers["x-request-id"] == "req-404"


def test_a_validation_error_echoes_the_request_id(client):
    response = client.post("/v1/tenants", json={}, headers={"X-Request-ID": "req-422"})

    assert_problem(response, 422, "validation-error")
    assert response.headers["x-request-id"] == "req-422"


def test_an_unknown_route_echoes_the_request_id(client):
    response = client.get("/nowhere", headers={"X-Request-ID": "req-route"})

    assert response.status_code == 404
    assert response.headers["x-request-id"] == "req-route"


def test_a_401_echoes_the_request_id(make_client):
    client = make_client(admin_token=ADMIN)

    response = client.get("/v1/tenants", headers={"X-Request-ID": "req-401"})

    assert_problem(response, 401, "unauthorized")
    assert response.headers["x-request-id"] == "req-401"


def test_a_413_echoes_the_request_id(make_client):
    client = make_client(max_body_bytes=16)

    response = client.post(
        "/v1/tenants", json={"name": "initech", "kind": "internal"}, headers={"X-Request-ID": "r"}
    )

    assert_problem(response, 413)
    assert response.headers["x-request-id"] == "r"


def test_a_500_echoes_the_request_id(make_client):
    client = make_client(raise_server_exceptions=False)

    def crash() -> None:
        raise RuntimeError("boom")

    cast(FastAPI, client.app).add_api_route("/v1/probe/crash", crash, methods=["GET"])

    response = client.get("/v1/probe/crash", headers={"X-Request-ID": "req-500"})

    assert_problem(response, 500, "internal-error")
    assert response.headers["x-request-id"] == "req-500"
    assert response.headers.get_list("x-request-id") == ["req-500"]


def test_a_health_check_echoes_the_request_id(client):
    response = client.get("/healthz", headers={"X-Request-ID": "probe"})

    assert response.headers["x-request-id"] == "probe"


def test_a_replay_carries_the_retrys_request_id(client, onboarded):
    def post(request_id: str):
        return client.post(
            "/v1/tenants/acme/allocations",
            json={"fabric": "ib-east", "count": 1},
            headers={"Idempotency-Key": "k", "X-Request-ID": request_id},
        )

    first, retry = post("first"), post("retry")

    assert created(first) == created(retry)
    assert (first.headers["x-request-id"], retry.headers["x-request-id"]) == ("first", "retry")
    assert retry.headers.get_list("x-request-id") == ["retry"]
