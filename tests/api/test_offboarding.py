"""DELETE /v1/tenants/{tenant}: offboarding releases everything, keeps the record, quarantines."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.builders import (
    QUARANTINE_SECONDS,
    TEXT_PLAIN,
    assert_problem,
    created,
    example_topology,
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
    }


def test_an_offboarded_tenant_keeps_its_record_and_lists_as_offboarded(client, onboarded):
    ok(client.delete("/v1/tenants/acme"))

    assert ok(client.get("/v1/tenants/acme"))["status"] == "offboarded"
    listed = ok(client.get("/v1/tenants", params={"status": "offboarded"}))
    assert [t["name"] for t in listed["data"]] == ["acme"]
    assert ok(client.get("/v1/tenants", params={"status": "active"}))["count"] == 2


def test_offboarding_frees_the_tenants_nodes_and_drops_its_allocations_and_grants(
    client, onboarded
):
    ok(client.delete("/v1/tenants/acme"))

    held = ok(client.get("/v1/fabrics/ib-east/nodes", params={"tenant": "acme"}))
    free = ok(client.get("/v1/fabrics/ib-east/nodes", params={"free": "true", "role": "compute"}))
    assert held["count"] == 0
    assert [n["name"] for n in free["data"]] == ["gpu0001", "gpu0002", "gpu0007", "gpu0008"]
    assert ok(client.get("/v1/tenants/acme/allocations")) == {"data": [], "count": 0, "next": None}
    assert ok(client.get("/v1/tenants/acme/grants")) == {"data": [], "count": 0, "next": None}


def test_offboarding_removes_the_tenant_and_its_ports_from_partitions_conf(client, onboarded):
    ok(client.delete("/v1/tenants/acme"))

    partitions = client.get(PARTITIONS).text

    assert "tenant_acme" not in partitions
    assert "=0x0101" not in partitions
    assert "0x0000000000100003" not in partitions  # gpu0001, limited in storage before
    assert "tenant_research=0x0102," in partitions
    assert ok(client.get("/v1/fabrics/ib-east/verification"))["reachability"] == []


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


def test_an_offboarded_key_is_not_reused_before_the_quarantine_has_passed(client, onboarded, clock):
    ok(client.delete("/v1/tenants/acme"))

    assert onboard_and_allocate(client, "initech")["segment"]["pkey"] == "0x0104"
    clock.advance(QUARANTINE_SECONDS - 1)
    assert onboard_and_allocate(client, "hooli")["segment"]["pkey"] == "0x0105"


def test_an_offboarded_key_is_reused_once_the_quarantine_has_passed(client, onboarded, clock):
    ok(client.delete("/v1/tenants/acme"))
    clock.advance(QUARANTINE_SECONDS + 1)

    assert onboard_and_allocate(client, "umbrella")["segment"]["pkey"] == "0x0101"


def test_a_quarantined_key_keeps_a_full_range_exhausted_until_the_quarantine_has_passed(
    client, clock, db_dump
):
    created(
        client.post(
            "/v1/fabrics",
            json={
                "name": "ib-tiny",
                "kind": "infiniband",
                "pkey_range": {"first": "0x0100", "last": "0x0100"},
            },
        )
    )
    ok(client.put("/v1/fabrics/ib-tiny/topology", content=example_topology(), headers=TEXT_PLAIN))
    assert onboard_and_allocate(client, "acme", fabric="ib-tiny")["segment"]["pkey"] == "0x0100"
    ok(client.delete("/v1/tenants/acme"))
    created(client.post("/v1/tenants", json={"name": "globex", "kind": "external"}))
    globex = {"fabric": "ib-tiny", "count": 1}
    clock.advance(QUARANTINE_SECONDS - 1)
    before = db_dump()

    assert_problem(
        client.post("/v1/tenants/globex/allocations", json=globex), 409, "pool-exhausted"
    )
    assert db_dump() == before

    clock.advance(2)
    body = created(client.post("/v1/tenants/globex/allocations", json=globex))
    assert body["segment"]["pkey"] == "0x0100"


def test_the_quarantine_follows_the_configured_period(make_client, clock):
    client = make_client(pkey_quarantine_seconds=60)
    created(
        client.post(
            "/v1/fabrics",
            json={
                "name": "ib-east",
                "kind": "infiniband",
                "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
            },
        )
    )
    ok(client.put("/v1/fabrics/ib-east/topology", content=example_topology(), headers=TEXT_PLAIN))
    assert onboard_and_allocate(client, "acme")["segment"]["pkey"] == "0x0100"
    ok(client.delete("/v1/tenants/acme"))
    clock.advance(61)

    assert onboard_and_allocate(client, "globex")["segment"]["pkey"] == "0x0100"
