"""Deployment routes, HTTP concerns (issue 11): what agent tokens may do, bad bodies and
parameters are 4xx problems that change nothing, and the history pages. SQLite only (see
tests/api/conftest.py); the behaviour behind them runs on both backends in test_deploy.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.api.test_deploy import IB, agent_world, register
from tests.builders import FABRIC, assert_problem, ok


@pytest.fixture
def agent(make_client, onboarded) -> tuple[Any, dict[str, str]]:
    return agent_world(make_client)


@pytest.mark.parametrize(
    ("name", "body", "status"),
    [
        ("SM_A", {"kind": "opensm"}, 422),
        ("sm-a", {"kind": "ufm"}, 422),
        ("sm-a", {}, 422),
        ("sm-a", {"kind": "opensm", "extra": 1}, 422),
    ],
)
def test_bad_target_registrations_change_nothing(client, onboarded, db_dump, name, body, status):
    before = db_dump()

    response = client.put(f"{IB}/targets/{name}", json=body)

    assert response.status_code == status, response.text
    assert db_dump() == before


def test_the_history_pages_with_a_cursor(client, onboarded):
    pages, cursor = [], None
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = ok(client.get(f"{IB}/snapshots", params=params))
        pages += page["data"]
        cursor = page["next"]
        if cursor is None:
            break

    assert pages == ok(client.get(f"{IB}/snapshots"))["data"]
    assert_problem(client.get(f"{IB}/snapshots", params={"cursor": "bm9wZQ"}), 422)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", f"{IB}/targets/sm-b/reports"),
        ("GET", f"{IB}/targets/sm-b"),
        ("PUT", f"{IB}/targets/sm-a"),
        ("DELETE", f"{IB}/targets/sm-a"),
        ("GET", "/v1/fabrics/other/signed-manifest"),
        ("GET", "/v1/tenants"),
        ("GET", f"{IB}/nodes"),
        ("GET", f"{IB}/verification"),
        ("PUT", f"{IB}/topology"),
        ("POST", "/v1/tokens"),
        ("GET", "/v1/audit/entries"),
        ("POST", f"{IB}/nodes/gpu0001/force-drain"),
    ],
)
def test_an_agent_may_do_nothing_else(agent, db_dump, method, path):
    client, headers = agent
    before = db_dump()
    body = {"state": "failed", "digest": None, "role": "master", "kind": "opensm"}

    response = client.request(method, path, headers=headers, json=body)

    assert_problem(response, 403, "forbidden")
    assert db_dump() == before


@pytest.mark.parametrize(
    "body",
    [
        {"name": "a", "role": "agent", "fabric": FABRIC},
        {"name": "a", "role": "agent", "target": "sm-a"},
        {"name": "a", "role": "operator", "fabric": FABRIC, "target": "sm-a"},
        {"name": "a", "role": "agent", "fabric": FABRIC, "target": "sm-a", "tenant": "acme"},
    ],
)
def test_agent_tokens_need_exactly_a_fabric_and_a_target(client, onboarded, db_dump, body):
    register(client)
    before = db_dump()

    assert_problem(client.post("/v1/tokens", json=body), 422)
    assert db_dump() == before


def test_an_agent_token_names_a_registered_target(client, onboarded, db_dump):
    before = db_dump()
    body = {"name": "a", "role": "agent", "fabric": FABRIC, "target": "sm-z"}

    assert_problem(client.post("/v1/tokens", json=body), 404, "not-found")
    assert db_dump() == before


@pytest.mark.parametrize(
    "body",
    [
        {"state": "applied", "digest": None},
        {"state": "done", "digest": None},
        {"state": "applied", "digest": "sha256:xyz"},
        {"state": "failed", "digest": None, "ports_read": "3"},
        {"state": "failed", "digest": None, "ports_read": True},
        {"state": "failed", "digest": None, "durations": {"total": -1}},
        {"state": "failed", "digest": None, "detail": "x" * 5000},
        {"state": "failed", "digest": None, "mismatches": [{"guid": "0x1", "missing": []}]},
        {"state": "failed", "digest": None, "role": "primary"},
    ],
)
def test_bad_reports_change_nothing(client, onboarded, db_dump, body):
    register(client)
    before = db_dump()

    assert_problem(client.post(f"{IB}/targets/sm-a/reports", json=body), 422)
    assert db_dump() == before


def test_a_report_for_an_unknown_target_is_404(client, onboarded):
    body = {"state": "failed", "digest": None}

    assert_problem(client.post(f"{IB}/targets/sm-z/reports", json=body), 404, "not-found")


@pytest.mark.parametrize("after", ["²", "9" * 30, "-1", "1.5", ""])
def test_a_forged_history_cursor_is_a_422(client, onboarded, after):
    raw = json.dumps({"after": after}).encode()
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")

    response = client.get(f"{IB}/snapshots", params={"cursor": cursor})

    assert response.status_code in (200, 422), response.text
    if after:
        assert_problem(response, 422)


def test_an_agent_cannot_read_the_fabric_resource(agent):
    client, headers = agent

    assert_problem(client.get(IB, headers=headers), 403, "forbidden")
