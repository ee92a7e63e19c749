"""Deeply nested and alias-bomb bodies get a 422 problem, never a 500 (issue 10, items 9, 12)."""

from typing import Any

import pytest

PROBLEM = "application/problem+json"
DEEP = "[" * 100_000


def assert_problem(response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
def test_a_deeply_nested_roce_topology_is_a_422(client, roce_onboarded, content_type):
    response = client.put(
        f"/v1/fabrics/{roce_onboarded.fabric}/topology",
        content=DEEP,
        headers={"Content-Type": content_type},
    )

    assert_problem(response, 422)


def test_a_yaml_alias_bomb_topology_is_a_422_naming_aliases(client, roce_onboarded):
    bomb = 'a: &a ["x", "x"]\nb: &b [*a, *a]\nc: [*b, *b]\n'

    response = client.put(
        f"/v1/fabrics/{roce_onboarded.fabric}/topology",
        content=bomb,
        headers={"Content-Type": "application/yaml"},
    )

    assert "anchors and aliases" in assert_problem(response, 422)["detail"]


def test_a_deeply_nested_config_db_audit_is_a_422(client, roce_onboarded):
    response = client.post(
        f"/v1/fabrics/{roce_onboarded.fabric}/audits",
        params={"format": "config_db", "leaf": "leaf01"},
        content=DEEP,
        headers={"Content-Type": "text/plain"},
    )

    assert_problem(response, 422)


def test_a_deeply_nested_json_body_is_a_400_problem(client, onboarded):
    # FastAPI's own body parsing: a body it cannot decode is a 400 problem, not a 500.
    response = client.post(
        f"/v1/fabrics/{onboarded.fabric}/observations",
        content=DEEP,
        headers={"Content-Type": "application/json"},
    )

    assert "parsing the body" in assert_problem(response, 400)["detail"]
