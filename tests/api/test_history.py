"""?state= on allocations and grants: ended records are visible, bad states are a 422."""

from __future__ import annotations

import pytest

from tests.builders import Onboarded


def test_released_allocation_by_state(client, onboarded: Onboarded):
    acme = onboarded.allocation_ids["acme"]
    base = "/v1/tenants/acme/allocations"
    assert client.delete(f"{base}/{acme}").status_code == 204

    assert client.get(f"{base}/{acme}").status_code == 404
    listed = client.get(base, params={"state": "released"}).json()
    got = client.get(f"{base}/{acme}", params={"state": "released"}).json()

    assert [a["id"] for a in listed["data"]] == [acme]
    assert got["released_at"] is not None and got["segment"] is None and got["nodes"]
    assert client.get(base).json()["data"] == []


def test_revoked_grant_by_state(client, onboarded: Onboarded):
    grant = onboarded.grant_ids["acme"]
    base = "/v1/tenants/acme/grants"
    assert client.delete(f"{base}/{grant}").status_code == 204

    assert client.get(f"{base}/{grant}").status_code == 404
    got = client.get(f"{base}/{grant}", params={"state": "revoked"}).json()
    listed = client.get(base, params={"state": "all"}).json()

    assert got["revoked_at"] is not None and got["service"] == "storage"
    assert [g["id"] for g in listed["data"]] == [grant]


@pytest.mark.parametrize(
    "path", ["/v1/tenants/acme/allocations", "/v1/tenants/acme/grants"], ids=["alloc", "grant"]
)
@pytest.mark.parametrize("state", ["closed", "RELEASED", "", "revoked;drop"])
def test_an_unknown_state_is_a_422_problem(client, onboarded: Onboarded, path: str, state: str):
    response = client.get(path, params={"state": state})

    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize(
    ("path", "state"),
    [("/v1/tenants/acme/allocations", "revoked"), ("/v1/tenants/acme/grants", "released")],
)
def test_each_record_has_its_own_ended_word(client, onboarded: Onboarded, path: str, state: str):
    assert client.get(path, params={"state": state}).status_code == 422
