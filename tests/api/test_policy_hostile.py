"""Issue 13's surface probed from outside, as a hostile client would (kept as regression tests).

Bad input is a 4xx problem that writes nothing: bodies over the policy's size cap, YAML that
retypes a value with a tag or states a key twice, JSON that names a member twice, numbers that
are not quotas. Peering requests are acted on by the right side only, and a tenant never sees
another pair's peering. Unknown service names in a policy are accepted (decided in
tenancy/schemas/policy.py: services are created per fabric, possibly after the policy).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tenancy.schemas.policy import MAX_DOCUMENT_BYTES
from tests.builders import APPLICATION_YAML, FABRIC, assert_problem, created, ok

JSON = {"content-type": "application/json"}
WITH_LABS = {"fabric": FABRIC, "peer": "labs"}


@pytest.fixture
def peers(client: TestClient, onboarded) -> TestClient:
    """labs and ops, two more internal tenants (internal tenants may peer by default)."""
    for name in ("labs", "ops"):
        created(client.post("/v1/tenants", json={"name": name, "kind": "internal"}))
    return client


def request(client: TestClient, tenant: str, peer: str) -> dict[str, Any]:
    body = {"fabric": FABRIC, "peer": peer}
    return created(client.post(f"/v1/tenants/{tenant}/peerings", json=body))


# --- the policy document -----------------------------------------------------------------------


def test_a_policy_body_over_its_cap_is_a_413_before_it_is_parsed(client, onboarded, db_dump):
    before = db_dump()
    text = "# " + "x" * MAX_DOCUMENT_BYTES + "\nkinds: {}\n"

    body = assert_problem(client.put("/v1/policy", content=text, headers=APPLICATION_YAML), 413)

    assert str(MAX_DOCUMENT_BYTES) in body["detail"]
    assert db_dump() == before


def test_a_chunked_policy_body_over_its_cap_is_a_413_too(client, onboarded, db_dump):
    before = db_dump()

    def chunks() -> Iterator[bytes]:
        yield b"kinds: {}\n"
        for _ in range(MAX_DOCUMENT_BYTES // 1024 + 1):
            yield b"#" + b"x" * 1022 + b"\n"

    response = client.put("/v1/policy", content=chunks(), headers=APPLICATION_YAML)

    assert_problem(response, 413)
    assert db_dump() == before


def test_a_policy_body_at_its_cap_is_parsed(client, onboarded):
    text = "kinds: {external: {max_nodes: 50}}\n# "
    text += "x" * (MAX_DOCUMENT_BYTES - len(text))

    assert ok(client.put("/v1/policy", content=text, headers=APPLICATION_YAML))["version"] == 1


@pytest.mark.parametrize(
    "content",
    [
        "kinds: {external: {qos_classes: [!!binary Z29sZA==]}}",  # b"gold"
        "kinds: {external: {qos_classes: [!!str gold]}}",
        "kinds: {external: {max_nodes: !!int '5'}}",
        "kinds: !!map {external: {max_nodes: 5}}",
        "kinds: {external: {qos_classes: [! gold]}}",
    ],
    ids=["binary", "str", "int", "map", "non-specific"],
)
def test_a_yaml_tag_is_a_422_that_changes_nothing(client, onboarded, db_dump, content):
    before = db_dump()

    body = assert_problem(
        client.put("/v1/policy", content=content, headers=APPLICATION_YAML),
        422,
        "invalid-document",
    )

    assert "tags" in body["detail"] and body["line"] == 1
    assert db_dump() == before


@pytest.mark.parametrize(
    ("content", "headers", "named"),
    [
        (
            "kinds:\n  external: {}\n  external: {isolation: dedicated_leaf}\n",
            APPLICATION_YAML,
            "'external'",
        ),
        ("services: {storage: all, storage: internal}", APPLICATION_YAML, "'storage'"),
        (
            '{"kinds": {"external": {"qos_classes": ["gold"], "qos_classes": null}}}',
            JSON,
            "'qos_classes'",
        ),
        ('{"kinds": {}, "kinds": {"internal": {"max_nodes": 0}}}', JSON, "'kinds'"),
        (
            "services: {storage: all}\n<<: {services: {storage: internal}}\n",
            APPLICATION_YAML,
            "'<<'",
        ),
    ],
    ids=["yaml-kind", "yaml-service", "json-member", "json-top", "yaml-merge"],
)
def test_a_key_stated_twice_is_a_422_naming_it(client, onboarded, db_dump, content, headers, named):
    before = db_dump()

    response = client.put("/v1/policy", content=content, headers=headers)

    body = assert_problem(response, 422, "invalid-document")
    assert named in body["detail"]
    assert db_dump() == before


@pytest.mark.parametrize(
    ("content", "headers"),
    [
        ("just a string", APPLICATION_YAML),
        ("- kinds\n- services", APPLICATION_YAML),
        ("", APPLICATION_YAML),
        ("null", JSON),
        ("kinds: null", APPLICATION_YAML),
        ("kinds: {external: null}", APPLICATION_YAML),
        ("kinds: {external: {max_nodes: true}}", APPLICATION_YAML),
        ("kinds: {external: {max_nodes: 2147483648}}", APPLICATION_YAML),
        ("kinds: {external: {max_nodes: 2001-01-01}}", APPLICATION_YAML),
        ('{"kinds": {"external": {"max_nodes": 1e400}}}', JSON),
        ('{"kinds": {"external": {"max_nodes": NaN}}}', JSON),
        ("services: {1: internal}", APPLICATION_YAML),
    ],
)
def test_a_document_that_is_not_a_policy_is_a_422(client, onboarded, db_dump, content, headers):
    before = db_dump()

    assert_problem(client.put("/v1/policy", content=content.encode(), headers=headers), 422)

    assert db_dump() == before


def test_service_names_no_fabric_has_yet_are_accepted_as_written(client, onboarded):
    document = {
        "kinds": {"internal": {"default_grants": ["telemetry"]}},
        "services": {"telemetry": "internal"},
    }

    body = ok(client.put("/v1/policy", json=document))

    assert body["kinds"]["internal"]["default_grants"] == ["telemetry"]
    assert body["services"] == {"telemetry": "internal"}


@pytest.mark.parametrize("max_nodes", [True, 1.0, 2**31, 2**63])
def test_a_quota_that_is_not_a_32_bit_count_is_a_422(client, onboarded, db_dump, max_nodes):
    before = db_dump()

    body = assert_problem(client.patch("/v1/tenants/acme", json={"max_nodes": max_nodes}), 422)

    assert body["errors"][0]["pointer"] == "/body/max_nodes"
    assert db_dump() == before


# --- peerings: who may act, who sees what ------------------------------------------------------


def test_only_the_peer_accepts_a_request(peers, db_dump):
    asked = request(peers, "research", "labs")
    before = db_dump()

    for tenant in ("research", "ops"):  # the requester, a third tenant
        accept = f"/v1/tenants/{tenant}/peering-requests/{asked['id']}/accept"
        assert_problem(peers.post(accept), 404, "not-found")
    assert_problem(peers.delete(f"/v1/tenants/ops/peerings/{asked['id']}"), 404, "not-found")

    assert db_dump() == before


def test_a_third_tenant_and_the_requester_see_no_request_addressed_to_another(peers):
    request(peers, "research", "labs")

    assert ok(peers.get("/v1/tenants/ops/peerings?state=all"))["count"] == 0
    assert ok(peers.get("/v1/tenants/ops/peering-requests"))["count"] == 0
    assert ok(peers.get("/v1/tenants/research/peering-requests"))["count"] == 0
    assert ok(peers.get("/v1/tenants/labs/peering-requests"))["count"] == 1


def test_accepting_twice_and_ending_twice_are_404s_that_change_nothing(peers, db_dump):
    asked = request(peers, "research", "labs")
    accept = f"/v1/tenants/labs/peering-requests/{asked['id']}/accept"
    ok(peers.post(accept))
    before = db_dump()
    assert_problem(peers.post(accept), 404, "not-found")
    assert db_dump() == before

    assert peers.delete(f"/v1/tenants/labs/peerings/{asked['id']}").status_code == 204
    before = db_dump()
    for tenant in ("labs", "research"):
        assert_problem(peers.delete(f"/v1/tenants/{tenant}/peerings/{asked['id']}"), 404)
    assert db_dump() == before


def test_offboarding_ends_pending_requests_in_both_directions(peers):
    sent = request(peers, "labs", "research")
    received = request(peers, "ops", "labs")

    ok(peers.delete("/v1/tenants/labs"))

    for tenant, asked in (("research", sent), ("ops", received)):
        (listed,) = ok(peers.get(f"/v1/tenants/{tenant}/peerings?state=all"))["data"]
        assert (listed["id"], listed["state"]) == (asked["id"], "ended")
    assert ok(peers.get("/v1/tenants/research/peering-requests"))["count"] == 0
    accept = f"/v1/tenants/research/peering-requests/{sent['id']}/accept"
    assert_problem(peers.post(accept), 404)


def test_a_retried_request_and_accept_with_one_idempotency_key_act_once(peers, db_dump):
    key = {"Idempotency-Key": "peer-labs-1"}
    first = peers.post("/v1/tenants/research/peerings", json=WITH_LABS, headers=key)
    before = db_dump()
    again = peers.post("/v1/tenants/research/peerings", json=WITH_LABS, headers=key)
    assert (again.status_code, again.json()) == (201, first.json())
    assert again.headers["Idempotent-Replayed"] == "true"
    assert db_dump() == before

    accept = f"/v1/tenants/labs/peering-requests/{first.json()['id']}/accept"
    accepted = peers.post(accept, headers=key)
    before = db_dump()
    replayed = peers.post(accept, headers=key)
    assert (replayed.status_code, replayed.json()) == (200, accepted.json())
    assert db_dump() == before


# --- a refusal names every counterexample ------------------------------------------------------


def test_a_policy_breaking_a_class_and_a_quota_is_refused_with_both(client, onboarded, db_dump):
    document = {"kinds": {"external": {"qos_classes": ["gold"], "max_nodes": 1}}}
    before = db_dump()

    body = assert_problem(client.put("/v1/policy", json=document), 409, "isolation-violation")

    rules = [(c["rule"], c.get("fabric")) for c in body["counterexamples"]]
    assert rules == [("policy-qos-class", FABRIC), ("policy-quota", None), ("policy-quota", None)]
    assert db_dump() == before


def test_a_dry_run_over_a_quota_still_names_the_fabrics_counterexamples(client, onboarded, db_dump):
    document = {"kinds": {"external": {"qos_classes": ["gold"], "max_nodes": 1}}}
    before = db_dump()

    response = client.put("/v1/policy?dry_run=true", json=document)

    body = assert_problem(response, 409, "isolation-violation")
    assert sorted({c["rule"] for c in body["counterexamples"]}) == [
        "policy-qos-class",
        "policy-quota",
    ]
    assert db_dump() == before


def test_a_patch_breaking_the_class_and_the_quota_is_refused_with_both(client, onboarded, db_dump):
    ok(client.put("/v1/policy", json={"kinds": {"external": {"qos_classes": ["gold", "bronze"]}}}))
    before = db_dump()

    response = client.patch("/v1/tenants/acme", json={"qos_class": "silver", "max_nodes": 1})

    body = assert_problem(response, 409, "isolation-violation")
    assert [c["rule"] for c in body["counterexamples"]] == ["policy-qos-class", "policy-quota"]
    assert db_dump() == before


@pytest.mark.parametrize(
    ("method", "path", "content"),
    [
        ("PATCH", "/v1/tenants/acme", '{"max_nodes": 5, "max_nodes": null}'),
        (
            "POST",
            "/v1/tenants/research/peerings",
            '{"fabric": "ib-east", "peer": "labs", "peer": "ops"}',
        ),
        ("POST", "/v1/tenants", '{"name": "x1", "kind": "internal", "kind": "external"}'),
    ],
    ids=["patch-tenant", "peering", "tenant"],
)
def test_a_json_body_naming_a_member_twice_is_a_422_naming_it(
    peers, db_dump, method, path, content
):
    before = db_dump()

    response = peers.request(method, path, content=content, headers=JSON)

    body = assert_problem(response, 422, "invalid-document")
    assert "twice" in body["detail"]
    assert db_dump() == before


def test_a_dry_run_patch_answers_the_verdict_and_writes_nothing(client, onboarded, db_dump):
    before = db_dump()

    body = ok(client.patch("/v1/tenants/acme?dry_run=true", json={"qos_class": "silver"}))

    assert body["dry_run"] is True and body["holds"] is True
    assert [f["fabric"] for f in body["fabrics"]] == [FABRIC]
    assert db_dump() == before
