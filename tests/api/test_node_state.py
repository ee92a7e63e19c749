"""Node state over HTTP (issue 10, item 4): the node resource shows `state`, the list filters by
it, imports report absent nodes and switches, and a node missing from one import keeps its role
and is never allocatable while absent (nor ever, when it is management or storage)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient

from tests.builders import (
    APPLICATION_JSON,
    TEXT_PLAIN,
    api_create_roce_fabric,
    assert_problem,
    created,
    example_topology,
    ok,
    roce_inventory,
    without_hosts,
)

IB = "/v1/fabrics/ib-east"
ROCE = "/v1/fabrics/roce-west"


def put_ib(client: TestClient, text: str) -> dict[str, Any]:
    return ok(client.put(f"{IB}/topology", content=text, headers=TEXT_PLAIN))


def put_roce(client: TestClient, document: dict[str, Any]) -> dict[str, Any]:
    return ok(
        client.put(f"{ROCE}/topology", content=json.dumps(document), headers=APPLICATION_JSON)
    )


def allocate(client: TestClient, tenant: str, fabric: str, **spec: Any) -> httpx2.Response:
    return client.post(f"/v1/tenants/{tenant}/allocations", json={"fabric": fabric, **spec})


def node(client: TestClient, base: str, name: str) -> dict[str, Any]:
    return ok(client.get(f"{base}/nodes/{name}"))


def names(client: TestClient, base: str, **params: str) -> list[str]:
    return [n["name"] for n in ok(client.get(f"{base}/nodes", params=params))["data"]]


def test_the_issues_sm01_reproduction_keeps_its_role_and_allocating_it_is_a_409(client, onboarded):
    body = put_ib(client, without_hosts(example_topology(), ["sm01"]))

    assert body["absent_nodes"] == ["sm01"]
    assert {k: node(client, IB, "sm01")[k] for k in ("role", "state", "ports")} == {
        "role": "management",
        "state": "absent",
        "ports": [],
    }

    put_ib(client, example_topology())

    assert (node(client, IB, "sm01")["role"], node(client, IB, "sm01")["state"]) == (
        "management",
        "free",
    )
    assert_problem(allocate(client, "research", "ib-east", nodes=["sm01"]), 409, "conflict")


def test_allocating_an_absent_node_is_a_409_naming_its_state(client, onboarded):
    put_ib(client, without_hosts(example_topology(), ["gpu0007"]))

    body = assert_problem(allocate(client, "research", "ib-east", nodes=["gpu0007"]), 409)

    assert body["type"].endswith("/conflict")
    assert (body["node"], body["state"]) == ("gpu0007", "absent")


def test_every_node_shows_its_state_and_the_list_filters_by_it(client, onboarded):
    put_ib(client, without_hosts(example_topology(), ["gpu0007"]))

    assert node(client, IB, "gpu0001")["state"] == "allocated"
    assert node(client, IB, "stor01")["state"] == "allocated"
    assert names(client, IB, state="absent") == ["gpu0007"]
    assert names(client, IB, state="free") == ["gpu0008", "sm01"]
    assert names(client, IB, state="free") == names(client, IB, free="true")
    assert names(client, IB, state="draining") == []
    assert len(names(client, IB, state="allocated")) == 8


@pytest.mark.parametrize("state", ["gone", "FREE", ""])
def test_an_unknown_state_filter_is_a_422(client, onboarded, state):
    assert_problem(client.get(f"{IB}/nodes", params={"state": state}), 422, "validation-error")


def test_a_roce_management_node_missing_from_one_inventory_keeps_its_role(client):
    api_create_roce_fabric(client)
    ok(client.patch(f"{ROCE}/nodes/gpu0006", json={"role": "management"}))
    document = roce_inventory()
    document["nodes"] = [n for n in document["nodes"] if n["name"] != "gpu0006"]
    document["switches"] = [s for s in document["switches"] if s["name"] != "spine02"]
    document["links"] = [x for x in document["links"] if "spine02" not in x["a"] + x["b"]]

    body = put_roce(client, document)

    assert (body["absent_nodes"], body["absent_switches"]) == (
        ["gpu0006"],
        [{"name": "spine02", "guid": None}],
    )
    assert node(client, ROCE, "gpu0006")["state"] == "absent"

    put_roce(client, roce_inventory())

    back = node(client, ROCE, "gpu0006")
    assert (back["role"], back["state"]) == ("management", "free")
    created(
        client.post("/v1/tenants", json={"name": "acme", "kind": "external", "qos_class": "gold"})
    )
    assert_problem(allocate(client, "acme", "roce-west", nodes=["gpu0006"]), 409, "conflict")
