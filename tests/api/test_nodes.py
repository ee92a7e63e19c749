"""/v1/fabrics/{fabric}/nodes: filters by tenant, freedom and role; setting a node's role."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import assert_problem, ok

NODES = "/v1/fabrics/ib-east/nodes"


def names(page: dict[str, Any]) -> list[str]:
    return [node["name"] for node in page["data"]]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"tenant": "acme"}, ["gpu0001", "gpu0002"]),
        ({"free": "true"}, ["gpu0007", "gpu0008", "sm01"]),
        (
            {"free": "false"},
            ["gpu0001", "gpu0002", "gpu0003", "gpu0004", "gpu0005", "gpu0006", "stor01", "stor02"],
        ),
        ({"free": "true", "role": "compute"}, ["gpu0007", "gpu0008"]),
    ],
    ids=repr,
)
def test_node_filters_in_the_query_string_select_and_count_the_nodes(
    client, onboarded, query, expected
):
    page = ok(client.get(NODES, params=query))

    assert names(page) == expected
    assert page["count"] == len(expected)


@pytest.mark.parametrize(
    "query", [{"role": "gpu"}, {"free": "maybe"}, {"tenant": "a" * 64}], ids=repr
)
def test_a_bad_node_filter_is_a_422_problem(client, onboarded, query):
    assert_problem(client.get(NODES, params=query), 422, "validation-error")


def test_nodes_of_an_unknown_fabric_are_a_404_problem(client):
    assert_problem(client.get("/v1/fabrics/ib-nowhere/nodes"), 404, "not-found")


def test_an_unknown_node_is_a_404_problem_naming_it(client, onboarded):
    body = assert_problem(client.get(f"{NODES}/gpu0999"), 404, "not-found")

    assert "gpu0999" in body["detail"]


def test_patching_a_free_nodes_role_returns_the_node_with_its_new_role(client, onboarded):
    node = ok(client.patch(f"{NODES}/gpu0008", json={"role": "storage"}))

    assert (node["name"], node["role"], node["tenant"]) == ("gpu0008", "storage", None)
    assert names(ok(client.get(NODES, params={"role": "storage"}))) == [
        "gpu0008",
        "stor01",
        "stor02",
    ]


def test_making_an_allocated_node_a_management_node_is_a_409_and_changes_nothing(
    client, onboarded, db_dump
):
    before = db_dump()

    body = assert_problem(
        client.patch(f"{NODES}/gpu0001", json={"role": "management"}), 409, "conflict"
    )

    assert "gpu0001" in body["detail"]
    assert db_dump() == before


@pytest.mark.parametrize(
    "patch", [{"role": "admin"}, {"role": None}, {}, {"role": "storage", "rack": "r1"}], ids=repr
)
def test_an_invalid_node_patch_is_a_422_and_changes_nothing(client, onboarded, db_dump, patch):
    before = db_dump()

    assert_problem(client.patch(f"{NODES}/gpu0008", json=patch), 422, "validation-error")
    assert db_dump() == before


def test_patching_an_unknown_node_is_a_404_and_changes_nothing(client, onboarded, db_dump):
    before = db_dump()

    assert_problem(client.patch(f"{NODES}/gpu0999", json={"role": "storage"}), 404, "not-found")
    assert db_dump() == before
