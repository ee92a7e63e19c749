"""PUT .../topology and port identity (issue 10, item 1): one 409 problem type for both
technologies when a known port would change host while a host involved is held, storage or
management; the move reported in the 200 response when both hosts are free."""

from __future__ import annotations

import json
from typing import Any

import httpx2
from fastapi.testclient import TestClient

from tests.builders import (
    APPLICATION_JSON,
    TEXT_PLAIN,
    assert_problem,
    example_topology,
    ok,
    partition_members,
    replace_line,
    roce_inventory,
)

IB_TOPOLOGY = "/v1/fabrics/ib-east/topology"
ROCE_TOPOLOGY = "/v1/fabrics/roce-west/topology"


def put_ib(client: TestClient, text: str) -> httpx2.Response:
    return client.put(IB_TOPOLOGY, content=text, headers=TEXT_PLAIN)


def put_roce(client: TestClient, document: dict[str, Any]) -> httpx2.Response:
    return client.put(ROCE_TOPOLOGY, content=json.dumps(document), headers=APPLICATION_JSON)


def claiming(old: str, new: str) -> str:
    """The demo with one CA record's NodeDescription rewritten (as root on its host can)."""
    text = example_topology()
    number = next(
        n
        for n, line in enumerate(text.split("\n"), start=1)
        if line.startswith("Ca") and f'"{old}"' in line
    )
    return replace_line(text, number, lambda line: line.replace(f'"{old}"', f'"{new}"'))


def host(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(n for n in document["nodes"] if n["name"] == name)
    return found


def swapped_eth0(a: str, b: str) -> dict[str, Any]:
    document = roce_inventory()
    nic_a, nic_b = host(document, a)["nics"][0], host(document, b)["nics"][0]
    nic_a["port"], nic_b["port"] = nic_b["port"], nic_a["port"]
    return document


def move(port: str, source: str, target: str) -> dict[str, str]:
    return {"port": port, "from": source, "to": target}


# --- InfiniBand ------------------------------------------------------------------------------


def test_the_issues_demo_rename_is_a_409_port_moved_naming_the_port_and_both_hosts(
    client, onboarded, db_dump
):
    text = replace_line(
        example_topology(), 180, lambda line: line.replace('"gpu0001 mlx5_0"', '"gpu0005 mlx5_9"')
    )
    before = db_dump()

    body = assert_problem(put_ib(client, text), 409, "/problems/port-moved")

    assert body["title"] == "Port claims another host"
    assert body["moved"] == [move("0x0000000000100003", "gpu0001", "gpu0005")]
    assert "0x0000000000100003" in body["detail"]
    assert db_dump() == before
    partitions = client.get("/v1/fabrics/ib-east/artifacts/opensm/partitions.conf").text
    assert "0x0000000000100003" not in partition_members(partitions, "tenant_globex")


def test_a_management_nodes_port_claiming_a_free_host_is_a_409(client, onboarded):
    body = assert_problem(
        put_ib(client, claiming("sm01 mlx5_0", "gpu0007 mlx5_7")), 409, "/problems/port-moved"
    )

    assert body["moved"] == [move("0x0000000000100001", "sm01", "gpu0007")]


def test_a_free_nodes_port_claiming_a_storage_host_in_a_service_is_a_409(client, onboarded):
    body = assert_problem(
        put_ib(client, claiming("gpu0007 mlx5_0", "stor01 mlx5_7")), 409, "/problems/port-moved"
    )

    assert body["moved"] == [move("0x000000000010001b", "gpu0007", "stor01")]


# --- RoCE ------------------------------------------------------------------------------------


def test_swapping_two_tenants_nics_on_roce_is_the_same_409_port_moved(
    client, roce_onboarded, db_dump
):
    before = db_dump()

    body = assert_problem(
        put_roce(client, swapped_eth0("gpu0001", "gpu0005")), 409, "/problems/port-moved"
    )

    assert body["title"] == "Port claims another host"
    assert body["moved"] == [
        move("gpu0001/eth0", "leaf01:Ethernet0", "leaf01:Ethernet32"),
        move("gpu0005/eth0", "leaf01:Ethernet32", "leaf01:Ethernet0"),
        move("leaf01:Ethernet0", "gpu0001", "gpu0005"),
        move("leaf01:Ethernet32", "gpu0005", "gpu0001"),
    ]
    assert db_dump() == before


def test_a_storage_hosts_switch_port_claimed_by_a_new_host_is_a_409(client, roce_onboarded):
    document = roce_inventory()
    host(document, "stor02")["name"] = "stor09"

    body = assert_problem(put_roce(client, document), 409, "/problems/port-moved")

    assert body["moved"] == [
        move("leaf01:Ethernet56", "stor02", "stor09"),
        move("leaf02:Ethernet56", "stor02", "stor09"),
    ]


def test_swapping_two_free_hosts_nics_on_roce_is_applied_and_reported(client, roce_onboarded):
    for tenant in ("acme", "research"):
        allocations = ok(client.get(f"/v1/tenants/{tenant}/allocations"))["data"]
        for allocation in allocations:
            response = client.delete(f"/v1/tenants/{tenant}/allocations/{allocation['id']}")
            assert response.status_code == 204, response.text

    body = ok(put_roce(client, swapped_eth0("gpu0001", "gpu0003")))

    assert body["moved"] == [
        move("gpu0001/eth0", "leaf01:Ethernet0", "leaf01:Ethernet16"),
        move("gpu0003/eth0", "leaf01:Ethernet16", "leaf01:Ethernet0"),
        move("leaf01:Ethernet0", "gpu0001", "gpu0003"),
        move("leaf01:Ethernet16", "gpu0003", "gpu0001"),
    ]
    gpu0001 = ok(client.get("/v1/fabrics/roce-west/nodes/gpu0001"))
    assert gpu0001["nics"][0] == {"name": "eth0", "switch": "leaf01", "port": "Ethernet16"}
