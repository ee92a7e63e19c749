"""/v1/tenants/{tenant}/allocations: exclusive nodes, the tenant's partition, pool exhaustion."""

from __future__ import annotations

import uuid
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient

from tests.builders import (
    TEXT_PLAIN,
    assert_problem,
    created,
    example_topology,
    ok,
)

ACME_ALLOCATIONS = "/v1/tenants/acme/allocations"


def allocate(client: TestClient, tenant: str, **spec: Any) -> httpx2.Response:
    return client.post(f"/v1/tenants/{tenant}/allocations", json={"fabric": "ib-east", **spec})


def onboard_tenant(
    client: TestClient, name: str, kind: str = "external", qos_class: str = "bronze"
) -> None:
    created(client.post("/v1/tenants", json={"name": name, "kind": kind, "qos_class": qos_class}))


def test_allocating_named_nodes_returns_201_with_the_nodes_and_a_new_partition(client, onboarded):
    onboard_tenant(client, "initech")

    body = created(allocate(client, "initech", nodes=["gpu0008", "gpu0007"]))

    assert uuid.UUID(body["id"])
    assert body == {
        "id": body["id"],
        "tenant": "initech",
        "fabric": "ib-east",
        "nodes": ["gpu0007", "gpu0008"],
        "segment": {"kind": "ib_partition", "pkey": "0x0104"},
        "created_at": "2026-03-01T12:00:00Z",
        "released_at": None,
    }


def test_an_allocation_is_not_visible_under_another_tenant(client, onboarded):
    allocation_id = onboarded.allocation_ids["research"]

    assert_problem(client.get(f"/v1/tenants/acme/allocations/{allocation_id}"), 404, "not-found")


def test_a_node_already_allocated_is_a_409_naming_it_and_changes_nothing(
    client, onboarded, db_dump
):
    before = db_dump()

    body = assert_problem(allocate(client, "globex", nodes=["gpu0008", "gpu0001"]), 409, "conflict")

    assert "gpu0001" in body["detail"]
    assert db_dump() == before


@pytest.mark.parametrize("node", ["sm01", "stor01"])
def test_a_management_or_storage_node_is_not_allocatable(client, onboarded, db_dump, node):
    before = db_dump()

    body = assert_problem(allocate(client, "acme", nodes=[node]), 409, "conflict")

    assert node in body["detail"]
    assert db_dump() == before


def test_asking_for_more_free_nodes_than_exist_is_a_409_and_changes_nothing(
    client, onboarded, db_dump
):
    before = db_dump()

    body = assert_problem(allocate(client, "acme", count=3), 409, "conflict")

    assert body["available"] == 2
    assert db_dump() == before


@pytest.mark.parametrize(
    "spec",
    [
        {"nodes": ["gpu0007"], "count": 1},
        {},
        {"nodes": []},
        {"count": 0},
        {"count": -1},
        {"nodes": ["gpu0007", "gpu0007"]},
        {"nodes": ["gpu0007\n"]},
        {"nodes": ["gpu0007;gpu0008"]},
        {"nodes": ["gpu 0007"]},
        {"nodes": "gpu0007"},
        {"count": 1, "fabric": "ib east"},
        {"count": 1, "exclusive": True},
    ],
    ids=repr,
)
def test_an_invalid_allocation_request_is_a_422_and_changes_nothing(
    client, onboarded, db_dump, spec
):
    before = db_dump()

    assert_problem(allocate(client, "acme", **spec), 422, "validation-error")
    assert db_dump() == before


@pytest.mark.parametrize(
    ("tenant", "spec", "named"),
    [
        ("initech", {"count": 1}, "initech"),
        ("acme", {"count": 1, "fabric": "ib-nowhere"}, "ib-nowhere"),
        ("acme", {"nodes": ["gpu0999"]}, "gpu0999"),
    ],
    ids=["unknown-tenant", "unknown-fabric", "unknown-node"],
)
def test_allocating_with_an_unknown_name_is_a_404_naming_it(
    client, onboarded, db_dump, tenant, spec, named
):
    before = db_dump()

    body = assert_problem(allocate(client, tenant, **spec), 404, "not-found")

    assert named in body["detail"]
    assert db_dump() == before


def test_releasing_an_allocation_is_a_204_without_a_body_and_unlists_it(client, onboarded):
    allocation_id = onboarded.allocation_ids["globex"]

    response = client.delete(f"/v1/tenants/globex/allocations/{allocation_id}")

    assert response.status_code == 204
    assert response.content == b""
    assert ok(client.get("/v1/tenants/globex/allocations")) == {
        "data": [],
        "count": 0,
        "next": None,
    }


def test_a_released_allocation_is_gone_and_releasing_it_again_is_a_404(client, onboarded, db_dump):
    path = f"/v1/tenants/globex/allocations/{onboarded.allocation_ids['globex']}"
    assert client.delete(path).status_code == 204
    before = db_dump()

    assert_problem(client.get(path), 404, "not-found")
    assert_problem(client.delete(path), 404, "not-found")
    assert db_dump() == before


def test_releasing_another_tenants_allocation_is_a_404_and_changes_nothing(
    client, onboarded, db_dump
):
    before = db_dump()

    response = client.delete(f"/v1/tenants/acme/allocations/{onboarded.allocation_ids['globex']}")

    assert_problem(response, 404, "not-found")
    assert db_dump() == before


def test_an_exhausted_pkey_range_is_a_409_pool_exhausted_and_changes_nothing(client, db_dump):
    created(
        client.post(
            "/v1/fabrics",
            json={
                "name": "ib-tiny",
                "kind": "infiniband",
                "pkey_range": {"first": "0x0100", "last": "0x0101"},
            },
        )
    )
    ok(client.put("/v1/fabrics/ib-tiny/topology", content=example_topology(), headers=TEXT_PLAIN))
    for name in ("acme", "research", "globex"):
        onboard_tenant(client, name)
    assert (
        created(allocate(client, "acme", fabric="ib-tiny", count=1))["segment"]["pkey"] == "0x0100"
    )
    assert (
        created(allocate(client, "research", fabric="ib-tiny", count=1))["segment"]["pkey"]
        == "0x0101"
    )
    before = db_dump()

    body = assert_problem(
        allocate(client, "globex", fabric="ib-tiny", count=1), 409, "pool-exhausted"
    )

    assert "0x0100-0x0101" in body["detail"]
    assert db_dump() == before
