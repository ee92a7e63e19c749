"""Consented peering over HTTP (issue 13, item 4): routes, roles, problems and dry runs.

ib-east as onboarded plus labs, a second internal tenant on gpu0007. Every route is under the
acting tenant: research requests, labs accepts, either ends; another tenant's routes are 404.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tenancy.schemas import TokenCreate
from tenancy.usecases import tokens
from tests.builders import FABRIC, assert_problem, audit_trail, created, ok

ADMIN = "bootstrap-admin-token"
WITH_LABS = {"fabric": FABRIC, "peer": "labs"}


def add_labs(client: TestClient, headers: dict[str, str] | None = None) -> None:
    created(client.post("/v1/tenants", json={"name": "labs", "kind": "internal"}, headers=headers))
    created(
        client.post(
            "/v1/tenants/labs/allocations",
            json={"fabric": FABRIC, "nodes": ["gpu0007"]},
            headers=headers,
        )
    )


def request_labs(client: TestClient, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return created(client.post("/v1/tenants/research/peerings", json=WITH_LABS, headers=headers))


def bearer(client: TestClient, role: str, tenant: str | None = None) -> dict[str, str]:
    uow = client.app.state.uow  # type: ignore[attr-defined]  # the app create_app built
    made = tokens.create_token(uow, spec=TokenCreate(name=f"t-{role}", role=role, tenant=tenant))
    return {"Authorization": f"Bearer {made.token}"}


@pytest.fixture
def labs_client(client: TestClient, onboarded) -> TestClient:
    add_labs(client)
    return client


# --- the lifecycle over HTTP -------------------------------------------------------------------


def test_request_accept_list_and_end_over_http(labs_client, engine):
    client = labs_client
    asked = request_labs(client)
    assert asked["state"] == "requested" and asked["segment"] is None

    requests = ok(client.get("/v1/tenants/labs/peering-requests"))
    assert (requests["count"], [r["id"] for r in requests["data"]]) == (1, [asked["id"]])
    accepted = ok(client.post(f"/v1/tenants/labs/peering-requests/{asked['id']}/accept"))
    assert accepted["state"] == "accepted"
    assert accepted["segment"] == {"kind": "ib_partition", "pkey": "0x0105"}
    assert ok(client.get("/v1/tenants/research/peerings"))["data"] == [accepted]
    edges = ok(client.get("/v1/tenants/research/reachability"))["fabrics"][0]["edges"]
    assert {
        "from": "tenant:labs",
        "to": "tenant:research",
        "segment": "0x0105",
        "allowed": True,
    } in (edges)

    ended = client.delete(f"/v1/tenants/labs/peerings/{asked['id']}")
    assert ended.status_code == 204 and ended.content == b""
    assert ok(client.get("/v1/tenants/research/peerings"))["count"] == 0
    history = ok(client.get("/v1/tenants/research/peerings?state=ended"))["data"]
    assert [(p["id"], p["state"]) for p in history] == [(asked["id"], "ended")]
    assert [a for a, _ in audit_trail(engine) if a.startswith("peering.")] == [
        "peering.request",
        "peering.accept",
        "peering.end",
    ]


def test_an_external_tenants_request_is_a_409_naming_the_policy_rule(client, onboarded, db_dump):
    before = db_dump()

    body = assert_problem(
        client.post("/v1/tenants/acme/peerings", json={"fabric": FABRIC, "peer": "globex"}),
        409,
        "conflict",
    )

    assert body["rule"] == "policy-peering"
    assert "policy-peering" in body["detail"]
    assert db_dump() == before


def test_a_duplicate_request_is_a_409_and_changes_nothing(labs_client, db_dump):
    request_labs(labs_client)
    before = db_dump()

    reverse = {"fabric": FABRIC, "peer": "research"}
    assert_problem(labs_client.post("/v1/tenants/research/peerings", json=WITH_LABS), 409)
    assert_problem(labs_client.post("/v1/tenants/labs/peerings", json=reverse), 409)
    assert db_dump() == before


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"fabric": FABRIC, "peer": "research"}, 422),  # itself
        ({"fabric": FABRIC, "peer": "Not A Slug"}, 422),
        ({"fabric": FABRIC}, 422),
        ({"fabric": FABRIC, "peer": "labs", "extra": 1}, 422),
        ({"fabric": FABRIC, "peer": "nobody"}, 404),
        ({"fabric": "ib-nowhere", "peer": "labs"}, 404),
    ],
    ids=["self", "bad-slug", "no-peer", "unknown-member", "unknown-peer", "unknown-fabric"],
)
def test_a_bad_request_is_a_problem_and_changes_nothing(labs_client, db_dump, body, status):
    before = db_dump()

    assert_problem(labs_client.post("/v1/tenants/research/peerings", json=body), status)
    assert db_dump() == before


def test_an_unknown_peering_is_a_404_on_accept_and_end(labs_client):
    missing = "00000000-0000-4000-8000-000000000000"

    assert_problem(
        labs_client.post(f"/v1/tenants/labs/peering-requests/{missing}/accept"), 404, "not-found"
    )
    assert_problem(labs_client.delete(f"/v1/tenants/labs/peerings/{missing}"), 404, "not-found")


# --- dry runs ----------------------------------------------------------------------------------


def test_dry_runs_of_request_accept_and_end_write_nothing(labs_client, db_dump):
    client = labs_client
    before = db_dump()
    body = ok(client.post("/v1/tenants/research/peerings?dry_run=true", json=WITH_LABS))
    assert body["dry_run"] is True and body["holds"] is True
    assert db_dump() == before

    asked = request_labs(client)
    before = db_dump()
    accept = f"/v1/tenants/labs/peering-requests/{asked['id']}/accept"
    rehearsed = ok(client.post(f"{accept}?dry_run=true"))
    assert db_dump() == before
    (fabric,) = rehearsed["fabrics"]
    assert [(e["from"], e["to"], e["allowed"]) for e in fabric["reachability"]["added"]] == [
        ("tenant:labs", "tenant:research", True)
    ]

    ok(client.post(accept))
    before = db_dump()
    ended = ok(client.delete(f"/v1/tenants/research/peerings/{asked['id']}?dry_run=true"))
    assert db_dump() == before
    removed = ended["fabrics"][0]["reachability"]["removed"]
    assert [(e["from"], e["to"]) for e in removed] == [("tenant:labs", "tenant:research")]


# --- who may do what ---------------------------------------------------------------------------


@pytest.fixture
def closed(make_client, onboarded) -> TestClient:
    """A service with an admin token (no open mode), labs onboarded."""
    client: TestClient = make_client(admin_token=ADMIN)
    add_labs(client, {"Authorization": f"Bearer {ADMIN}"})
    return client


def test_tenant_admins_request_accept_and_end_their_own_tenants_peerings(closed):
    research = bearer(closed, "tenant-admin", "research")
    labs = bearer(closed, "tenant-admin", "labs")

    asked = request_labs(closed, research)
    assert asked["requested_by"].startswith("token:t-tenant-admin:")
    # The requester cannot accept its own request: it is not addressed to it.
    own = f"/v1/tenants/research/peering-requests/{asked['id']}/accept"
    assert_problem(closed.post(own, headers=research), 404, "not-found")
    accept = f"/v1/tenants/labs/peering-requests/{asked['id']}/accept"
    assert ok(closed.post(accept, headers=labs))["state"] == "accepted"
    assert (
        closed.delete(f"/v1/tenants/research/peerings/{asked['id']}", headers=research).status_code
        == 204
    )


def test_to_a_tenant_role_a_peer_the_policy_rules_out_looks_exactly_like_a_missing_one(
    closed, db_dump
):
    acme = bearer(closed, "tenant-admin", "acme")  # external: the policy lets it peer with none
    before = db_dump()

    hidden = closed.post(
        "/v1/tenants/acme/peerings", json={"fabric": FABRIC, "peer": "globex"}, headers=acme
    )
    missing = closed.post(
        "/v1/tenants/acme/peerings", json={"fabric": FABRIC, "peer": "nobody"}, headers=acme
    )

    assert_problem(hidden, 404, "not-found")
    unnamed = [
        body.json() | {"detail": None, "name": None, "instance": None} for body in (hidden, missing)
    ]
    assert unnamed[0] | {"request_id": None} == unnamed[1] | {"request_id": None}
    assert hidden.json()["detail"].replace("globex", "nobody") == missing.json()["detail"]
    assert "external" not in hidden.text and "policy" not in hidden.text
    assert db_dump() == before
    operator = {"Authorization": f"Bearer {ADMIN}"}
    refused = closed.post(
        "/v1/tenants/acme/peerings", json={"fabric": FABRIC, "peer": "globex"}, headers=operator
    )
    assert assert_problem(refused, 409, "conflict")["rule"] == "policy-peering"


def test_a_tenant_viewer_reads_its_peerings_but_changes_none(closed):
    operator = {"Authorization": f"Bearer {ADMIN}"}
    viewer = bearer(closed, "tenant-viewer", "labs")
    asked = request_labs(closed, operator)

    assert ok(closed.get("/v1/tenants/labs/peering-requests", headers=viewer))["count"] == 1
    assert ok(closed.get("/v1/tenants/labs/peerings", headers=viewer))["count"] == 1
    accept = f"/v1/tenants/labs/peering-requests/{asked['id']}/accept"
    assert_problem(closed.post(accept, headers=viewer), 403, "forbidden")
    assert_problem(
        closed.delete(f"/v1/tenants/labs/peerings/{asked['id']}", headers=viewer), 403, "forbidden"
    )


def test_another_tenant_sees_nothing_of_a_peering(closed):
    operator = {"Authorization": f"Bearer {ADMIN}"}
    acme = bearer(closed, "tenant-admin", "acme")
    asked = request_labs(closed, operator)
    peering = asked["id"]

    for method, path in [
        ("GET", "/v1/tenants/labs/peering-requests"),
        ("GET", "/v1/tenants/research/peerings"),
        ("POST", f"/v1/tenants/labs/peering-requests/{peering}/accept"),
        ("DELETE", f"/v1/tenants/research/peerings/{peering}"),
        ("POST", "/v1/tenants/labs/peerings"),
    ]:
        response = closed.request(method, path, headers=acme, json=WITH_LABS)
        assert assert_problem(response, 404)["detail"].startswith("tenant '"), (method, path)
    # Under its own tenant, acme finds neither the request nor the peering.
    assert ok(closed.get("/v1/tenants/acme/peerings?state=all", headers=acme))["count"] == 0
    assert_problem(
        closed.post(f"/v1/tenants/acme/peering-requests/{peering}/accept", headers=acme), 404
    )
    assert_problem(closed.delete(f"/v1/tenants/acme/peerings/{peering}", headers=acme), 404)


# --- offboarding -------------------------------------------------------------------------------


def test_offboarding_a_tenant_ends_its_peerings(labs_client):
    client = labs_client
    asked = request_labs(client)
    ok(client.post(f"/v1/tenants/labs/peering-requests/{asked['id']}/accept"))

    ok(client.delete("/v1/tenants/labs"))

    listed = ok(client.get("/v1/tenants/research/peerings?state=all"))["data"]
    assert [(p["id"], p["state"], p["segment"]) for p in listed] == [(asked["id"], "ended", None)]
    partitions = client.get(f"/v1/fabrics/{FABRIC}/artifacts/opensm/partitions.conf").text
    assert "peer_labs_research" not in partitions
