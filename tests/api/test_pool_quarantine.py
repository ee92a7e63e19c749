"""Identifier pools against tenant-driven churn, over HTTP as tenant-admins and agents act.

Two tenant-admins requesting, accepting and ending peerings over and over used to take a fresh
P_Key per cycle and quarantine it for a day, so they could exhaust a fabric's range in minutes.
Now each tenant may hold only its share of a pool (the policy's `max_pool_share_percent`), a
key no deploy target can have received is free at its release, and a deployed one is kept from
other owners until every target has read back its release; the quarantine period only bounds
it on a fabric without targets.

ib-small has 8 P_Keys (0x0a00-0x0a07): at the default 25 % each tenant may hold 2. research and
labs are internal tenants (the default policy lets internal tenants peer); so are team-c and
team-d, the bystanders whose takes must still succeed.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tenancy.schemas import TokenCreate
from tenancy.store.settings import DEFAULT_QUARANTINE_SECONDS
from tenancy.usecases import tokens
from tests.builders import api_create_fabric, assert_problem, created, ok, rows

ADMIN = "bootstrap-admin-token"
OPERATOR = {"Authorization": f"Bearer {ADMIN}"}
SMALL = "ib-small"
FABRIC_PATH = f"/v1/fabrics/{SMALL}"
KEYS = [f"0x{value:04x}" for value in range(0x0A00, 0x0A08)]


def bearer(client: TestClient, tenant: str) -> dict[str, str]:
    """A tenant-admin token of `tenant`."""
    uow = client.app.state.uow  # type: ignore[attr-defined]  # the app create_app built
    spec = TokenCreate(name=f"admin-{tenant}", role="tenant-admin", tenant=tenant)
    return {"Authorization": f"Bearer {tokens.create_token(uow, spec=spec).token}"}


@pytest.fixture
def small(make_client: Any, onboarded: Any) -> TestClient:
    """A service with an admin token, ib-small created and four internal tenants."""
    client: TestClient = make_client(admin_token=ADMIN)
    client.headers.update(OPERATOR)
    api_create_fabric(client, SMALL, pkey_range={"first": KEYS[0], "last": KEYS[-1]})
    for name in ("labs", "team-c", "team-d"):
        created(client.post("/v1/tenants", json={"name": name, "kind": "internal"}))
    return client


def request(client: TestClient, tenant: str, peer: str, headers: dict[str, str]) -> str:
    body = {"fabric": SMALL, "peer": peer}
    return str(
        created(client.post(f"/v1/tenants/{tenant}/peerings", json=body, headers=headers))["id"]
    )


def accept(client: TestClient, peer: str, peering: str, headers: dict[str, str]) -> Any:
    return client.post(f"/v1/tenants/{peer}/peering-requests/{peering}/accept", headers=headers)


def end(client: TestClient, tenant: str, peering: str, headers: dict[str, str]) -> None:
    response = client.delete(f"/v1/tenants/{tenant}/peerings/{peering}", headers=headers)
    assert response.status_code == 204, response.text


def peer(client: TestClient, a: str, b: str, headers: dict[str, str] = OPERATOR) -> str:
    """An operator requests for `a`, `b` accepts (`headers`: an operator's); the P_Key."""
    peering = request(client, a, b, OPERATOR)
    return str(ok(accept(client, b, peering, headers))["segment"]["pkey"])


def cycle(
    client: TestClient, research: dict[str, str], labs: dict[str, str], *, fetch: bool
) -> Any:
    """research asks, labs accepts, (an agent fetches the manifest,) research ends it.

    Returns the acceptance's response; a refused one leaves the request, which research
    withdraws.
    """
    peering = request(client, "research", "labs", research)
    accepted = accept(client, "labs", peering, labs)
    if accepted.status_code == 200 and fetch:
        signed_manifest_digest(client)
    end(client, "research", peering, research)
    return accepted


def register(client: TestClient, name: str) -> None:
    created(client.put(f"{FABRIC_PATH}/targets/{name}", json={"kind": "opensm"}))


def signed_manifest_digest(client: TestClient) -> str:
    """Fetch the signed manifest as an agent does; the digest it binds."""
    ok(client.get(f"{FABRIC_PATH}/signed-manifest"))
    return str(ok(client.get(f"{FABRIC_PATH}/sync"))["desired"])


def report(client: TestClient, name: str, digest: str, role: str = "master") -> None:
    """An applied report; a master's read-back matched it, a standby reads back nothing."""
    observed = digest if role == "master" else None
    body = {"state": "applied", "digest": digest, "role": role, "observed_digest": observed}
    response = client.post(f"{FABRIC_PATH}/targets/{name}/reports", json=body)
    assert response.status_code in (200, 201), response.text


def key_states(engine: Any) -> dict[str, str]:
    """ib-small's held P_Keys and their states."""
    found = rows(
        engine,
        "SELECT s.value, s.state FROM segment s JOIN fabric f ON f.id = s.fabric_id "
        "WHERE f.name = :name",
        name=SMALL,
    )
    return {f"0x{int(value):04x}": str(state) for value, state in found}


# --- the share -----------------------------------------------------------------------------------


def test_two_tenant_admins_peering_over_and_over_are_held_to_their_share_not_the_pool(small):
    research, labs = bearer(small, "research"), bearer(small, "labs")
    register(small, "sm-a")

    answers = [cycle(small, research, labs, fetch=True) for _ in KEYS]

    # 25 % of 8 keys: two deployed keys in quarantine count for both tenants, then refusals.
    assert [answer.status_code for answer in answers] == [200, 200] + [409] * (len(KEYS) - 2)
    refusal = assert_problem(answers[-1], 409, "pool-share-exceeded")
    assert (refusal["pool"], refusal["limit"], refusal["fabric"]) == ("pkey", 2, SMALL)
    assert refusal["tenant"] in ("research", "labs")
    # Everyone else still gets keys: the two hold a quarter of the pool each at most.
    assert peer(small, "team-c", "team-d", bearer(small, "team-d")) == KEYS[2]


def test_an_operator_is_not_held_to_a_tenants_share(small):
    research, labs = bearer(small, "research"), bearer(small, "labs")
    register(small, "sm-a")
    for _ in range(2):
        cycle(small, research, labs, fetch=True)

    peering = request(small, "research", "labs", research)
    assert_problem(accept(small, "labs", peering, labs), 409, "pool-share-exceeded")

    assert ok(accept(small, "labs", peering, OPERATOR))["segment"]["pkey"] == KEYS[2]


def test_the_share_follows_the_policy_of_the_tenants_kind(small):
    half = {"peering": ["internal"], "max_pool_share_percent": 50}
    ok(small.put("/v1/policy", json={"kinds": {"internal": half}}))
    research, labs = bearer(small, "research"), bearer(small, "labs")
    register(small, "sm-a")

    statuses = [cycle(small, research, labs, fetch=True).status_code for _ in range(5)]

    assert statuses == [200, 200, 200, 200, 409]  # 50 % of 8


# --- quarantine ----------------------------------------------------------------------------------


def test_a_key_no_target_can_have_received_is_free_at_its_release(small, engine):
    research, labs = bearer(small, "research"), bearer(small, "labs")
    register(small, "sm-a")  # it never fetches: nothing accepted reaches it

    keys = {ok(cycle(small, research, labs, fetch=False))["segment"]["pkey"] for _ in range(20)}

    assert keys == {KEYS[0]}
    assert key_states(engine) == {}


def test_a_deployed_key_is_kept_from_other_owners_until_every_target_read_back_its_release(
    small, engine, clock
):
    register(small, "sm-a")
    register(small, "sm-b")
    research, labs = bearer(small, "research"), bearer(small, "labs")
    peering = request(small, "research", "labs", research)
    assert ok(accept(small, "labs", peering, labs))["segment"]["pkey"] == KEYS[0]
    holding = signed_manifest_digest(small)
    report(small, "sm-a", holding)
    report(small, "sm-b", holding, role="standby")
    end(small, "research", peering, research)

    assert key_states(engine) == {KEYS[0]: "quarantined"}
    assert peer(small, "team-c", "team-d") == KEYS[1]  # another owner skips it
    clock.advance(DEFAULT_QUARANTINE_SECONDS + 1)  # targets exist: no fixed time ends it
    removal = signed_manifest_digest(small)
    report(small, "sm-a", removal)  # the master read back the release; the standby not yet
    assert key_states(engine)[KEYS[0]] == "quarantined"
    assert peer(small, "team-c", "research") == KEYS[2]

    report(small, "sm-b", signed_manifest_digest(small), role="standby")

    assert KEYS[0] not in key_states(engine)
    assert peer(small, "team-d", "research") == KEYS[0]


def test_without_targets_a_released_key_waits_for_the_quarantine_period(small, engine, clock):
    research, labs = bearer(small, "research"), bearer(small, "labs")
    assert ok(cycle(small, research, labs, fetch=False))["segment"]["pkey"] == KEYS[0]

    # Nothing observes what is deployed here (files may be installed by hand): the period holds.
    assert key_states(engine) == {KEYS[0]: "quarantined"}
    assert peer(small, "team-c", "team-d") == KEYS[1]
    clock.advance(DEFAULT_QUARANTINE_SECONDS)
    assert peer(small, "team-c", "labs") == KEYS[0]
