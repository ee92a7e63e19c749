"""`count` allocations under a policy with customers on dedicated leaves, over HTTP (issue 13).

On examples/ib-rail.ibnetdiscover (four leaf groups of four GPU nodes): two customers land on
different leaf groups, and a third, with every free node on a leaf another tenant holds, gets a
409 problem saying so, with the counts as extension members.
"""

from __future__ import annotations

from typing import Any

import httpx2
from fastapi.testclient import TestClient

from tests.builders import REPO, api_create_fabric, assert_problem, created, ok

FABRIC = "ib-rail"
CUSTOMERS_DEDICATED = {"kinds": {"external": {"isolation": "dedicated_leaf"}}}


def rail_fabric(client: TestClient) -> None:
    """ib-rail with the roles and services of docs/operators/policy.md."""
    text = (REPO / "examples" / "ib-rail.ibnetdiscover").read_text()
    api_create_fabric(client, FABRIC, topology_text=text)
    for node, role in {"sm01": "management", "stor01": "storage", "stor02": "storage"}.items():
        ok(client.patch(f"/v1/fabrics/{FABRIC}/nodes/{node}", json={"role": role}))
    for name, nodes in {"storage": ["stor01", "stor02"], "telemetry": ["tel01"]}.items():
        created(client.post(f"/v1/fabrics/{FABRIC}/services", json={"name": name, "nodes": nodes}))


def customer(client: TestClient, name: str) -> None:
    created(client.post("/v1/tenants", json={"name": name, "kind": "external"}))


def allocate(client: TestClient, tenant: str, count: int) -> httpx2.Response:
    return client.post(f"/v1/tenants/{tenant}/allocations", json={"fabric": FABRIC, "count": count})


def switches(client: TestClient, tenant: str) -> set[str]:
    body: dict[str, Any] = ok(client.get(f"/v1/fabrics/{FABRIC}/nodes", params={"tenant": tenant}))
    return {port["switch"] for node in body["data"] for port in node["ports"]}


def leaves(*groups: int) -> set[str]:
    return {f"leaf-g{group}-r{rail}" for group in groups for rail in range(4)}


def test_customers_on_dedicated_leaves_get_different_leaf_groups_and_a_third_a_reasoned_409(
    client,
):
    rail_fabric(client)
    ok(client.put("/v1/policy", json=CUSTOMERS_DEDICATED))
    for name in ("acme", "globex", "initech"):
        customer(client, name)

    acme = created(allocate(client, "acme", 5))
    globex = created(allocate(client, "globex", 5))
    problem = assert_problem(allocate(client, "initech", 1), 409, "/conflict")

    assert acme["nodes"] == ["gpu0001", "gpu0002", "gpu0003", "gpu0004", "gpu0005"]
    assert globex["nodes"] == ["gpu0009", "gpu0010", "gpu0011", "gpu0012", "gpu0013"]
    assert switches(client, "acme") == leaves(1, 2)
    assert switches(client, "globex") == leaves(3, 4)
    assert problem["detail"] == (
        "fabric 'ib-rail' has 6 free compute node(s), 1 requested, but every leaf they are "
        "cabled to holds another tenant's port (dedicated_leaf)"
    )
    assert {k: problem[k] for k in ("requested", "available", "placeable", "isolation")} == {
        "requested": 1,
        "available": 6,
        "placeable": 0,
        "isolation": "dedicated_leaf",
    }
    assert ok(client.get(f"/v1/fabrics/{FABRIC}/verification"))["holds"] is True
    assert ok(client.get("/v1/tenants/initech/allocations"))["count"] == 0
