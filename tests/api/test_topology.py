"""PUT /v1/fabrics/{fabric}/topology: import, re-import and reconciliation of ibnetdiscover text."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient

from tests.builders import (
    PORT_GUIDS,
    TEXT_PLAIN,
    assert_problem,
    created,
    example_topology,
    line_number,
    ok,
    replace_line,
)

IB_EAST = {
    "name": "ib-east",
    "kind": "infiniband",
    "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
}
TOPOLOGY = "/v1/fabrics/ib-east/topology"


@pytest.fixture
def fabric(client):
    created(client.post("/v1/fabrics", json=IB_EAST))
    return "ib-east"


def put_topology(client: TestClient, text: str | bytes, **headers: str) -> httpx2.Response:
    return client.put(TOPOLOGY, content=text, headers={**TEXT_PLAIN, **headers})


def test_importing_the_sample_reports_every_port_as_added_in_guid_order(client, fabric):
    added = ok(put_topology(client, example_topology()))["added"]

    assert [port["guid"] for port in added] == sorted(g for gs in PORT_GUIDS.values() for g in gs)
    assert added[0] == {
        "guid": "0x0000000000100001",
        "node": "sm01",
        "hca": "mlx5_0",
        "port": 1,
        "allocated": False,
        "action": "added",
    }
    assert {(p["node"], p["hca"]) for p in added if p["node"] == "gpu0001"} == {
        ("gpu0001", "mlx5_0"),
        ("gpu0001", "mlx5_1"),
    }


def test_imported_nodes_are_compute_nodes_with_lower_case_hex_port_guids(client, fabric):
    ok(put_topology(client, example_topology()))

    node = ok(client.get("/v1/fabrics/ib-east/nodes/gpu0001"))

    assert node == {
        "name": "gpu0001",
        "role": "compute",
        "state": "free",
        "tenant": None,
        "service": None,
        "ports": [
            {
                "guid": "0x0000000000100003",
                "hca": "mlx5_0",
                "port": 1,
                "switch": "leaf01",
                "switch_port": 1,
            },
            {
                "guid": "0x0000000000100005",
                "hca": "mlx5_1",
                "port": 1,
                "switch": "leaf02",
                "switch_port": 1,
            },
        ],
    }


def test_a_charset_parameter_on_text_plain_is_accepted(client, fabric):
    response = put_topology(
        client, example_topology(), **{"content-type": "text/plain; charset=utf-8"}
    )

    assert ok(response)["ports"] == 19


def malformed_cases() -> list[Any]:
    text = example_topology()
    ca_line = line_number(text, 'Ca\t1 "H-0000000000100024"')
    switch_line = line_number(text, 'Switch\t36 "S-0000000000200001"')
    port_line = line_number(text, "[1](100025)")
    return [
        pytest.param(replace_line(text, ca_line, "Ca\t1 garbage"), ca_line, id="garbled-ca-record"),
        pytest.param(
            replace_line(
                text, ca_line, lambda line: line.replace("stor02 mlx5_0", "stor02;x mlx5_0")
            ),
            ca_line,
            id="hostname-with-semicolon",
        ),
        pytest.param(
            replace_line(
                text, ca_line, lambda line: line.replace("stor02 mlx5_0", "stor02=x mlx5_0")
            ),
            ca_line,
            id="hostname-with-equals",
        ),
        pytest.param(
            replace_line(
                text, ca_line, lambda line: line.replace("stor02 mlx5_0", "stor 02 mlx5_0")
            ),
            ca_line,
            id="nodedescription-with-three-words",
        ),
        pytest.param(
            replace_line(
                text,
                switch_line,
                lambda line: line.replace("S-0000000000200001", "S-00000000002000zz"),
            ),
            switch_line,
            id="non-hex-switch-guid",
        ),
        pytest.param(
            replace_line(text, port_line, "[1](100025) ???"), port_line, id="garbled-port-line"
        ),
        pytest.param(
            replace_line(
                text,
                port_line,
                '[2](100025) \t"S-0000000000200001"[9]\t\t# lid 23 lmc 0 "leaf02" lid 3 4xSDR',
            ),
            port_line,
            id="port-beyond-the-ca-port-count",
        ),
        pytest.param(replace_line(text, 6, "this is not ibnetdiscover output"), 6, id="free-text"),
    ]


@pytest.mark.parametrize(("text", "line"), malformed_cases())
def test_malformed_ibnetdiscover_is_a_422_naming_the_line_and_changes_nothing(
    client, fabric, db_dump, text, line
):
    ok(put_topology(client, example_topology()))
    before = db_dump()

    body = assert_problem(put_topology(client, text), 422, "invalid-document")

    assert body["detail"].startswith(f"line {line}: "), body["detail"]
    assert body["line"] == line
    assert db_dump() == before


def test_an_empty_topology_is_a_422_naming_line_1(client, fabric, db_dump):
    before = db_dump()

    body = assert_problem(put_topology(client, ""), 422, "invalid-document")

    assert body["detail"].startswith("line 1: ")
    assert db_dump() == before


def test_a_topology_that_is_not_utf8_is_a_422_and_changes_nothing(client, fabric, db_dump):
    before = db_dump()

    response = put_topology(client, example_topology().encode() + b"\xff\xfe")

    assert_problem(response, 422, "invalid-document")
    assert db_dump() == before


@pytest.mark.parametrize("content_type", ["application/json", "application/octet-stream", None])
def test_a_topology_that_is_not_text_plain_is_a_415_and_changes_nothing(
    client, fabric, db_dump, content_type
):
    before = db_dump()
    headers = {"content-type": content_type} if content_type else {}

    response = client.put(TOPOLOGY, content=example_topology().encode(), headers=headers)

    body = assert_problem(response, 415)
    assert "text/plain" in body["detail"]
    assert db_dump() == before


def test_a_topology_for_an_unknown_fabric_is_a_404_and_changes_nothing(client, db_dump):
    before = db_dump()

    body = assert_problem(
        client.put(
            "/v1/fabrics/ib-nowhere/topology", content=example_topology(), headers=TEXT_PLAIN
        ),
        404,
        "not-found",
    )

    assert "ib-nowhere" in body["detail"]
    assert db_dump() == before
