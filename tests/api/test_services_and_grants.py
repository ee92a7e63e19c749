"""Shared services and grants, and verify-before-commit refusing an isolation-breaking grant."""

from __future__ import annotations

import uuid

import pytest

from tests.builders import TEXT_PLAIN, assert_problem, created, example_topology, ok

SERVICES = "/v1/fabrics/ib-east/services"
STORAGE_GRANT = {"fabric": "ib-east", "service": "storage"}


def test_a_service_is_created_on_free_nodes_with_its_own_partition(client, onboarded):
    body = created(client.post(SERVICES, json={"name": "scratch", "nodes": ["gpu0008"]}))

    assert body == {
        "name": "scratch",
        "fabric": "ib-east",
        "nodes": ["gpu0008"],
        "segment": {"kind": "ib_partition", "pkey": "0x0104"},
        "created_at": "2026-03-01T12:00:00Z",
    }
    assert ok(client.get("/v1/fabrics/ib-east/nodes/gpu0008"))["service"] == "scratch"


def test_the_onboarded_storage_service_reads_back_with_its_nodes_and_key(client, onboarded):
    body = ok(client.get(f"{SERVICES}/storage"))

    assert (body["name"], body["nodes"], body["segment"]) == (
        "storage",
        ["stor01", "stor02"],
        {"kind": "ib_partition", "pkey": "0x0100"},
    )
    assert [s["name"] for s in ok(client.get(SERVICES))["data"]] == ["storage"]


def test_a_second_service_named_storage_is_a_409_and_changes_nothing(client, onboarded, db_dump):
    before = db_dump()

    assert_problem(
        client.post(SERVICES, json={"name": "storage", "nodes": ["gpu0008"]}), 409, "conflict"
    )
    assert db_dump() == before


@pytest.mark.parametrize(
    "node", ["gpu0001", "sm01", "stor01"], ids=["allocated", "management", "held"]
)
def test_a_service_on_a_node_that_is_held_or_management_is_a_409(client, onboarded, db_dump, node):
    before = db_dump()

    body = assert_problem(
        client.post(SERVICES, json={"name": "scratch", "nodes": [node]}), 409, "conflict"
    )

    assert node in body["detail"]
    assert db_dump() == before


@pytest.mark.parametrize(
    "name",
    ["scratch\n", "scr;atch", "scr:atch", "scr=atch", "scr,atch", "scr atch", "Scratch", ""],
    ids=repr,
)
def test_a_service_name_that_is_not_a_slug_is_a_422_and_changes_nothing(
    client, onboarded, db_dump, name
):
    before = db_dump()

    response = client.post(SERVICES, json={"name": name, "nodes": ["gpu0008"]})

    assert_problem(response, 422, "validation-error")
    assert db_dump() == before


def test_a_service_without_nodes_is_a_422(client, onboarded, db_dump):
    before = db_dump()

    assert_problem(
        client.post(SERVICES, json={"name": "scratch", "nodes": []}), 422, "validation-error"
    )
    assert db_dump() == before


def test_a_service_on_an_unknown_node_or_fabric_is_a_404(client, onboarded, db_dump):
    before = db_dump()

    assert_problem(
        client.post(SERVICES, json={"name": "scratch", "nodes": ["gpu0999"]}), 404, "not-found"
    )
    assert_problem(
        client.post(
            "/v1/fabrics/ib-nowhere/services", json={"name": "scratch", "nodes": ["gpu0008"]}
        ),
        404,
        "not-found",
    )
    assert db_dump() == before


def test_a_grant_returns_201_with_the_service_partition(client, onboarded):
    body = created(client.post("/v1/tenants/research/grants", json=STORAGE_GRANT))

    assert uuid.UUID(body["id"])
    assert body == {
        "id": body["id"],
        "tenant": "research",
        "fabric": "ib-east",
        "service": "storage",
        "segment": {"kind": "ib_partition", "pkey": "0x0100"},
        "created_at": "2026-03-01T12:00:00Z",
        "revoked_at": None,
    }


def test_a_duplicate_grant_is_a_409_and_changes_nothing(client, onboarded, db_dump):
    before = db_dump()

    assert_problem(client.post("/v1/tenants/acme/grants", json=STORAGE_GRANT), 409, "conflict")
    assert db_dump() == before


@pytest.mark.parametrize(
    ("tenant", "grant", "named"),
    [
        ("initech", STORAGE_GRANT, "initech"),
        ("acme", {"fabric": "ib-east", "service": "backup"}, "backup"),
        ("acme", {"fabric": "ib-nowhere", "service": "storage"}, "ib-nowhere"),
    ],
    ids=["unknown-tenant", "unknown-service", "unknown-fabric"],
)
def test_a_grant_naming_something_unknown_is_a_404_and_changes_nothing(
    client, onboarded, db_dump, tenant, grant, named
):
    before = db_dump()

    body = assert_problem(client.post(f"/v1/tenants/{tenant}/grants", json=grant), 404, "not-found")

    assert named in body["detail"]
    assert db_dump() == before


@pytest.mark.parametrize(
    "grant",
    [
        {"fabric": "ib-east"},
        {"fabric": "ib-east", "service": "stor age"},
        {**STORAGE_GRANT, "mode": "full"},
    ],
    ids=repr,
)
def test_an_invalid_grant_is_a_422_and_changes_nothing(client, onboarded, db_dump, grant):
    before = db_dump()

    assert_problem(client.post("/v1/tenants/acme/grants", json=grant), 422, "validation-error")
    assert db_dump() == before


def test_revoking_a_grant_is_a_204_without_a_body_and_unlists_it(client, onboarded):
    grant_id = onboarded.grant_ids["acme"]

    response = client.delete(f"/v1/tenants/acme/grants/{grant_id}")

    assert response.status_code == 204
    assert response.content == b""
    assert ok(client.get("/v1/tenants/acme/grants"))["count"] == 0
    assert_problem(client.delete(f"/v1/tenants/acme/grants/{grant_id}"), 404, "not-found")


def test_revoking_another_tenants_grant_is_a_404_and_changes_nothing(client, onboarded, db_dump):
    before = db_dump()

    assert_problem(
        client.delete(f"/v1/tenants/globex/grants/{onboarded.grant_ids['acme']}"), 404, "not-found"
    )
    assert db_dump() == before


@pytest.fixture
def tight_fabric(client):
    """ib-tight: 3 P_Keys a port; services storage (stor01), scratch (stor02); acme on gpu0001."""
    created(
        client.post(
            "/v1/fabrics",
            json={
                "name": "ib-tight",
                "kind": "infiniband",
                "pkey_range": {"first": "0x0100", "last": "0x01ff"},
                "pkeys_per_port": 3,
            },
        )
    )
    ok(client.put("/v1/fabrics/ib-tight/topology", content=example_topology(), headers=TEXT_PLAIN))
    for service, node in (("storage", "stor01"), ("scratch", "stor02")):
        created(
            client.post("/v1/fabrics/ib-tight/services", json={"name": service, "nodes": [node]})
        )
    created(
        client.post("/v1/tenants", json={"name": "acme", "kind": "external", "qos_class": "gold"})
    )
    created(
        client.post(
            "/v1/tenants/acme/allocations", json={"fabric": "ib-tight", "nodes": ["gpu0001"]}
        )
    )
    # gpu0001's ports now hold 0x7fff and acme's key; storage makes three, the budget.
    created(
        client.post("/v1/tenants/acme/grants", json={"fabric": "ib-tight", "service": "storage"})
    )
    return "ib-tight"


def test_a_grant_that_overflows_a_ports_pkey_table_is_a_409_isolation_violation(
    client, tight_fabric, db_dump
):
    before = db_dump()

    response = client.post(
        "/v1/tenants/acme/grants", json={"fabric": "ib-tight", "service": "scratch"}
    )

    body = assert_problem(response, 409, "isolation-violation")
    assert body["counterexamples"], body
    rules = {example["rule"] for example in body["counterexamples"]}
    assert rules == {"pkey-budget-exceeded"}
    assert {example["a"]["guid"] for example in body["counterexamples"]} <= {
        "0x0000000000100003",
        "0x0000000000100005",
    }
    assert body["snapshot_digest"].startswith("v2:")
    assert db_dump() == before
