"""Every list endpoint: {"data","count","next"}, limit and cursor, each item exactly once."""

from __future__ import annotations

import base64
import json

import pytest
from fastapi.testclient import TestClient

from tests.builders import assert_problem, created, ok, walk_pages

Listed = tuple[str, dict[str, str], str, list[str]]  # path, query, key field, expected keys


def add_fabrics(client: TestClient) -> Listed:
    for name in ("ib-a", "ib-b", "ib-c", "ib-d"):
        created(client.post("/v1/fabrics", json={"name": name, "kind": "infiniband"}))
    return "/v1/fabrics", {}, "name", ["ib-a", "ib-b", "ib-c", "ib-d", "ib-east"]


def add_tenants(client: TestClient) -> Listed:
    for name in ("t-a", "t-b", "t-c", "t-d"):
        created(client.post("/v1/tenants", json={"name": name, "kind": "internal"}))
    return "/v1/tenants", {}, "name", ["acme", "globex", "research", "t-a", "t-b", "t-c", "t-d"]


def add_qos_classes(client: TestClient) -> Listed:
    for name, sl in (("platinum", 4), ("iron", 5)):
        created(client.post("/v1/qos-classes", json={"name": name, "ib_sl": sl}))
    return "/v1/qos-classes", {}, "name", ["bronze", "gold", "iron", "platinum", "silver"]


def all_nodes(client: TestClient) -> Listed:
    nodes = [f"gpu000{i}" for i in range(1, 9)] + ["sm01", "stor01", "stor02"]
    return "/v1/fabrics/ib-east/nodes", {}, "name", nodes


def held_nodes(client: TestClient) -> Listed:
    nodes = [f"gpu000{i}" for i in range(1, 7)] + ["stor01", "stor02"]
    return "/v1/fabrics/ib-east/nodes", {"free": "false"}, "name", nodes


def add_services(client: TestClient) -> Listed:
    for name, node in (("scratch", "gpu0007"), ("backup", "gpu0008")):
        created(client.post("/v1/fabrics/ib-east/services", json={"name": name, "nodes": [node]}))
    return "/v1/fabrics/ib-east/services", {}, "name", ["backup", "scratch", "storage"]


def add_allocations(client: TestClient) -> Listed:
    for node in ("gpu0007", "gpu0008"):
        created(
            client.post("/v1/tenants/acme/allocations", json={"fabric": "ib-east", "nodes": [node]})
        )
    ids = [
        a["id"]
        for a in ok(client.get("/v1/tenants/acme/allocations", params={"limit": 1000}))["data"]
    ]
    assert len(ids) == 3
    return "/v1/tenants/acme/allocations", {}, "id", sorted(ids)


def add_grants(client: TestClient) -> Listed:
    add_services(client)
    for service in ("scratch", "backup"):
        created(
            client.post("/v1/tenants/acme/grants", json={"fabric": "ib-east", "service": service})
        )
    ids = [
        g["id"] for g in ok(client.get("/v1/tenants/acme/grants", params={"limit": 1000}))["data"]
    ]
    assert len(ids) == 3
    return "/v1/tenants/acme/grants", {}, "id", sorted(ids)


LISTS = [
    add_fabrics,
    add_tenants,
    add_qos_classes,
    all_nodes,
    held_nodes,
    add_services,
    add_allocations,
    add_grants,
]
LIST_PATHS = [
    "/v1/fabrics",
    "/v1/tenants",
    "/v1/qos-classes",
    "/v1/fabrics/ib-east/nodes",
    "/v1/fabrics/ib-east/services",
    "/v1/tenants/acme/allocations",
    "/v1/tenants/acme/grants",
]


@pytest.mark.parametrize("build", LISTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("limit", [1, 2])
def test_walking_a_list_page_by_page_returns_every_item_exactly_once(
    client, onboarded, build, limit
):
    path, params, key, expected = build(client)

    pages = walk_pages(client, path, limit, **params)

    assert [item[key] for page in pages for item in page["data"]] == expected
    assert {page["count"] for page in pages} == {len(expected)}
    assert [len(page["data"]) for page in pages[:-1]] == [limit] * (len(pages) - 1)
    assert 1 <= len(pages[-1]["data"]) <= limit


@pytest.mark.parametrize("build", LISTS, ids=lambda f: f.__name__)
def test_a_limit_equal_to_the_total_gives_one_page_without_next(client, onboarded, build):
    path, params, key, expected = build(client)

    page = ok(client.get(path, params={**params, "limit": len(expected)}))

    assert [item[key] for item in page["data"]] == expected
    assert (page["count"], page["next"]) == (len(expected), None)


def test_the_default_page_size_is_100(client):
    for number in range(101):
        created(client.post("/v1/tenants", json={"name": f"t{number:03d}", "kind": "internal"}))

    first = ok(client.get("/v1/tenants"))
    second = ok(client.get("/v1/tenants", params={"cursor": first["next"]}))

    assert (len(first["data"]), first["count"]) == (100, 101)
    assert first["next"] is not None
    assert [t["name"] for t in second["data"]] == ["t100"]
    assert second["next"] is None


def test_a_limit_of_1000_is_accepted(client):
    assert ok(client.get("/v1/tenants", params={"limit": 1000})) == {
        "data": [],
        "count": 0,
        "next": None,
    }


def encoded(document: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")


BAD_CURSORS = [
    "not-a-cursor!!",
    "%%%",
    "e30",  # {}
    encoded({"after": 5}),
    encoded(["after"]),
    encoded(None),
    encoded("acme"),
    "x" * 513,
]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
def test_a_cursor_the_service_did_not_issue_is_a_422_problem(client, cursor):
    body = assert_problem(
        client.get("/v1/tenants", params={"cursor": cursor}), 422, "validation-error"
    )

    assert "cursor" in body["detail"]


@pytest.mark.parametrize("path", LIST_PATHS)
def test_every_list_refuses_a_forged_cursor_with_a_422_problem(client, onboarded, path):
    body = assert_problem(
        client.get(path, params={"cursor": encoded({"after": 5})}), 422, "validation-error"
    )

    assert "cursor" in body["detail"]


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "ten", ""])
def test_a_limit_outside_1_to_1000_is_a_422_problem(client, limit):
    body = assert_problem(
        client.get("/v1/tenants", params={"limit": limit}), 422, "validation-error"
    )

    assert "/query/limit" in body["detail"]


@pytest.mark.parametrize("limit", ["0", "1001"])
@pytest.mark.parametrize("path", LIST_PATHS)
def test_every_list_refuses_limits_0_and_1001_with_a_422_problem(client, onboarded, path, limit):
    body = assert_problem(client.get(path, params={"limit": limit}), 422, "validation-error")

    assert "/query/limit" in body["detail"]
