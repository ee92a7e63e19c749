"""DELETE /v1/tenants/{tenant}: offboarding releases everything, keeps the record, quarantines."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.builders import (
    assert_problem,
    created,
    ok,
)

PARTITIONS = "/v1/fabrics/ib-east/artifacts/opensm/partitions.conf"


def onboard_and_allocate(
    client: TestClient, name: str, count: int = 1, fabric: str = "ib-east"
) -> dict[str, Any]:
    created(client.post("/v1/tenants", json={"name": name, "kind": "external"}))
    return created(
        client.post(f"/v1/tenants/{name}/allocations", json={"fabric": fabric, "count": count})
    )


def test_offboarding_returns_the_tenant_as_offboarded_at_the_current_time(client, onboarded, clock):
    clock.advance(3600)

    body = ok(client.delete("/v1/tenants/acme"))

    # created_at is checked as an instant by the tenants' time-zone test
    assert {**body, "created_at": None} == {
        "name": "acme",
        "kind": "external",
        "status": "offboarded",
        "qos_class": "gold",
        "created_at": None,
        "offboarded_at": "2026-03-01T13:00:00Z",
        "billing_account": "acme",
        "max_nodes": None,
    }


def test_offboarding_twice_is_a_409_and_changes_nothing(client, onboarded, db_dump):
    ok(client.delete("/v1/tenants/acme"))
    before = db_dump()

    assert_problem(client.delete("/v1/tenants/acme"), 409, "conflict")
    assert db_dump() == before


def test_an_offboarded_tenant_can_neither_allocate_nor_be_granted_nor_be_recreated(
    client, onboarded, db_dump
):
    ok(client.delete("/v1/tenants/acme"))
    before = db_dump()

    assert_problem(
        client.post("/v1/tenants/acme/allocations", json={"fabric": "ib-east", "count": 1}),
        409,
        "conflict",
    )
    assert_problem(
        client.post("/v1/tenants/acme/grants", json={"fabric": "ib-east", "service": "storage"}),
        409,
        "conflict",
    )
    assert_problem(
        client.post("/v1/tenants", json={"name": "acme", "kind": "external"}), 409, "conflict"
    )
    assert db_dump() == before
