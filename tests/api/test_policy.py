"""The policy document over HTTP (issue 13): GET, PUT as JSON or YAML, dry runs, versions."""

from __future__ import annotations

import json

import pytest

from policies.policy import DEFAULT_POLICY
from tenancy.store.pagination import encode_cursor
from tests.builders import APPLICATION_YAML, FABRIC, assert_problem, audit_trail, ok

# Allowed by today's state: every external tenant's class is listed.
EXTERNAL_CLASSES = {"kinds": {"external": {"qos_classes": ["gold", "bronze"]}}}
# Refuted by today's state: globex (external) holds bronze.
GOLD_ONLY = {"kinds": {"external": {"qos_classes": ["gold"]}}}
YAML_CLASSES = """\
kinds:
  external:
    qos_classes: [gold, bronze]
"""


def test_the_default_policy_is_version_0_and_reproduces_todays_rules(client):
    body = ok(client.get("/v1/policy"))

    assert body == {
        "version": 0,
        "fingerprint": DEFAULT_POLICY.fingerprint,
        "created_at": None,
        "created_by": None,
        "kinds": {
            "internal": {
                "isolation": "segment",
                "qos_classes": None,
                "max_nodes": None,
                "peering": ["internal"],
                "default_grants": [],
                "max_pool_share_percent": 25,
                "max_partitions": 31,
                "release_on_last_removal": False,
            },
            "external": {
                "isolation": "segment",
                "qos_classes": None,
                "max_nodes": None,
                "peering": [],
                "default_grants": [],
                "max_pool_share_percent": 25,
                "max_partitions": 31,
                "release_on_last_removal": False,
            },
        },
        "services": {},
    }
    assert ok(client.get("/v1/policy/versions/0")) == body
    assert ok(client.get("/v1/policy/versions")) == {"data": [], "count": 0, "next": None}


def test_a_put_stores_version_1_audits_it_per_fabric_and_moves_the_digest(
    client, onboarded, engine
):
    digest_before = ok(client.get(f"/v1/fabrics/{FABRIC}/verification"))["snapshot_digest"]

    body = ok(client.put("/v1/policy", json=EXTERNAL_CLASSES))

    assert body["version"] == 1 and body["created_by"] == "anonymous"
    assert body["created_at"] == "2026-03-01T12:00:00Z"
    assert body["kinds"]["external"]["qos_classes"] == ["bronze", "gold"]
    assert body["kinds"]["internal"]["peering"] == ["internal"]  # omitted: the default's
    assert ok(client.get("/v1/policy")) == body
    assert ok(client.get("/v1/policy/versions/1")) == body
    assert ok(client.get("/v1/policy/versions"))["data"] == [body]
    assert audit_trail(engine)[-1] == ("policy.update", "policy/versions/1")
    verdict = ok(client.get(f"/v1/fabrics/{FABRIC}/verification"))
    assert verdict["holds"] and verdict["snapshot_digest"] != digest_before
    newest, previous = ok(client.get(f"/v1/fabrics/{FABRIC}/snapshots"))["data"][:2]
    assert (newest["digest"], newest["policy_version"]) == (verdict["snapshot_digest"], 1)
    assert (previous["digest"], previous["policy_version"]) == (digest_before, 0)


def test_the_same_rules_again_are_a_no_op_answering_the_current_version(client, onboarded, db_dump):
    first = ok(client.put("/v1/policy", json=EXTERNAL_CLASSES))
    before = db_dump()

    again = ok(
        client.put(
            "/v1/policy",
            json={"kinds": {"external": {"qos_classes": ["bronze", "gold", "gold"]}}},
        )
    )

    assert again == first
    assert db_dump() == before
    assert ok(client.put("/v1/policy", json={}))["version"] == 2  # back to the default's rules
    assert ok(client.get("/v1/policy"))["fingerprint"] == DEFAULT_POLICY.fingerprint


@pytest.mark.parametrize("media", ["application/yaml", "application/x-yaml", "text/yaml"])
def test_a_yaml_document_is_the_same_policy_as_its_json(client, media):
    body = ok(client.put("/v1/policy", content=YAML_CLASSES, headers={"content-type": media}))

    assert body["kinds"]["external"]["qos_classes"] == ["bronze", "gold"]
    assert ok(client.put("/v1/policy", json=EXTERNAL_CLASSES))["version"] == body["version"]


@pytest.mark.parametrize(
    ("content", "headers", "status", "problem"),
    [
        ("kinds: [unclosed", APPLICATION_YAML, 422, "invalid-document"),
        ("kinds: &a {}\nservices: *a", APPLICATION_YAML, 422, "invalid-document"),
        ('{"kinds": ', {"content-type": "application/json"}, 422, "invalid-document"),
        ("kinds: {}", {"content-type": "text/plain"}, 415, "unsupported-media-type"),
        ('{"kinds": {"other": {}}}', {"content-type": "application/json"}, 422, "validation-error"),
        ('{"rules": {}}', {"content-type": "application/json"}, 422, "validation-error"),
        ('["kinds"]', {"content-type": "application/json"}, 422, "validation-error"),
        ("kinds: {external: {max_nodes: -1}}", APPLICATION_YAML, 422, "validation-error"),
        ("kinds: {external: {max_nodes: 1.5}}", APPLICATION_YAML, 422, "validation-error"),
        ("kinds: {external: {isolation: rack}}", APPLICATION_YAML, 422, "validation-error"),
        ("services: {storage: customers}", APPLICATION_YAML, 422, "validation-error"),
        ("kinds: {external: {peering: [partners]}}", APPLICATION_YAML, 422, "validation-error"),
        (
            "kinds: {external: {max_pool_share_percent: 0}}",
            APPLICATION_YAML,
            422,
            "validation-error",
        ),
        (
            "kinds: {external: {max_pool_share_percent: 101}}",
            APPLICATION_YAML,
            422,
            "validation-error",
        ),
        (
            "kinds: {external: {max_pool_share_percent: 0.5}}",
            APPLICATION_YAML,
            422,
            "validation-error",
        ),
        (
            "kinds: {external: {max_pool_share_percent: null}}",
            APPLICATION_YAML,
            422,
            "validation-error",
        ),
    ],
)
def test_a_bad_document_is_a_4xx_problem_and_changes_nothing(
    client, db_dump, content, headers, status, problem
):
    before = db_dump()

    assert_problem(client.put("/v1/policy", content=content, headers=headers), status, problem)

    assert db_dump() == before


def test_an_unknown_qos_class_is_a_422_naming_it(client, db_dump):
    before = db_dump()

    body = assert_problem(
        client.put("/v1/policy", json={"kinds": {"internal": {"qos_classes": ["platinum"]}}}),
        422,
        "validation-error",
    )

    assert body["qos_class"] == "platinum" and "platinum" in body["detail"]
    assert db_dump() == before


def test_a_tightening_the_state_violates_is_a_409_with_its_counterexamples(
    client, onboarded, db_dump
):
    before = db_dump()

    body = assert_problem(client.put("/v1/policy", json=GOLD_ONLY), 409, "isolation-violation")

    assert db_dump() == before
    (example,) = body["counterexamples"]
    assert example["rule"] == "policy-qos-class" and example["fabric"] == FABRIC
    assert example["a"]["owner"] == "tenant:globex" and "'bronze'" in example["message"]
    assert [f["fabric"] for f in body["fabrics"]] == [FABRIC]
    assert ok(client.get("/v1/policy"))["version"] == 0


def test_a_quota_below_what_tenants_hold_is_a_409_naming_each(client, onboarded, db_dump):
    before = db_dump()

    body = assert_problem(
        client.put("/v1/policy", json={"kinds": {"external": {"max_nodes": 1}}}), 409
    )

    assert db_dump() == before
    assert [(c["rule"], c["message"].split()[0]) for c in body["counterexamples"]] == [
        ("policy-quota", "tenant:acme"),
        ("policy-quota", "tenant:globex"),
    ]


def test_a_dry_run_shows_the_counterexamples_and_writes_nothing(client, onboarded, db_dump):
    before = db_dump()

    refused = ok(client.put("/v1/policy?dry_run=true", json=GOLD_ONLY))
    allowed = ok(client.put("/v1/policy?dry_run=true", json=EXTERNAL_CLASSES))

    assert db_dump() == before
    assert refused["dry_run"] is True and refused["holds"] is False
    (fabric,) = refused["fabrics"]
    assert [c["rule"] for c in fabric["counterexamples"]] == ["policy-qos-class"]
    assert allowed["holds"] is True
    (fabric,) = allowed["fabrics"]
    assert fabric["snapshot_digest_before"] != fabric["snapshot_digest_after"]
    assert fabric["reachability"] == {"added": [], "removed": []}


def test_versions_page_oldest_first_and_an_unknown_one_is_a_404(client):
    for classes in (["gold"], ["silver"], ["bronze"]):
        ok(client.put("/v1/policy", json={"kinds": {"internal": {"qos_classes": classes}}}))

    first = ok(client.get("/v1/policy/versions?limit=2"))
    rest = ok(client.get(f"/v1/policy/versions?limit=2&cursor={first['next']}"))

    assert [v["version"] for v in first["data"] + rest["data"]] == [1, 2, 3]
    assert first["count"] == 3 and rest["next"] is None
    assert_problem(client.get("/v1/policy/versions/4"), 404, "not-found")
    assert_problem(client.get(f"/v1/policy/versions?cursor={encode_cursor('x')}"), 422)
    assert_problem(client.get("/v1/policy/versions/-1"), 422)


def test_the_document_is_stored_canonically(client, engine):
    ok(client.put("/v1/policy", content=YAML_CLASSES, headers=APPLICATION_YAML))

    with engine.connect() as connection:
        (stored,) = connection.exec_driver_sql("SELECT document FROM policy_version").one()

    assert json.loads(stored)["kinds"]["external"]["qos_classes"] == ["bronze", "gold"]


# --- the policy in the rest of the service ------------------------------------------------------


def test_an_operator_patches_a_tenants_quota_class_and_account(client, onboarded, engine):
    body = ok(
        client.patch(
            "/v1/tenants/acme",
            json={"max_nodes": 4, "qos_class": "silver", "billing_account": "acct:7"},
        )
    )

    assert (body["max_nodes"], body["qos_class"], body["billing_account"]) == (
        4,
        "silver",
        "acct:7",
    )
    assert ok(client.get("/v1/tenants/acme")) == body
    assert audit_trail(engine)[-1] == ("tenant.update", "tenants/acme")
    assert ok(client.patch("/v1/tenants/acme", json={"max_nodes": None}))["max_nodes"] is None


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"max_nodes": 1}, 409),  # acme holds 2
        ({"max_nodes": -1}, 422),
        ({"max_nodes": "3"}, 422),
        ({"qos_class": None}, 422),
        ({"billing_account": None}, 422),
        ({"qos_class": "platinum"}, 404),
        ({"kind": "internal"}, 422),
    ],
)
def test_a_bad_patch_is_a_problem_and_changes_nothing(client, onboarded, db_dump, change, status):
    before = db_dump()

    body = assert_problem(client.patch("/v1/tenants/acme", json=change), status)

    assert db_dump() == before
    if status == 409:
        assert [c["rule"] for c in body["counterexamples"]] == ["policy-quota"]


def test_an_allocation_over_the_quota_is_a_409_with_the_counterexample(client, onboarded):
    ok(client.put("/v1/policy", json={"kinds": {"external": {"max_nodes": 2}}}))

    body = assert_problem(
        client.post("/v1/tenants/globex/allocations", json={"fabric": FABRIC, "count": 1}),
        409,
        "isolation-violation",
    )

    (example,) = body["counterexamples"]
    assert example["rule"] == "policy-quota"
    assert example["message"].startswith("tenant:globex (external) holds 3 nodes")


def test_a_first_allocation_brings_the_default_grants_and_the_versions_are_audited(
    client, onboarded
):
    ok(client.put("/v1/policy", json={"kinds": {"internal": {"default_grants": ["storage"]}}}))
    assert client.post("/v1/tenants", json={"name": "lab", "kind": "internal"}).status_code == 201

    ok_alloc = client.post("/v1/tenants/lab/allocations", json={"fabric": FABRIC, "count": 1})

    assert ok_alloc.status_code == 201, ok_alloc.text
    (granted,) = ok(client.get("/v1/tenants/lab/grants"))["data"]
    assert (granted["fabric"], granted["service"]) == (FABRIC, "storage")
    entries = ok(client.get("/v1/audit/entries?limit=1000"))["data"]
    assert ("policy.update", "policy/versions/1") in {(e["action"], e["target"]) for e in entries}


def test_a_policy_read_with_get_is_accepted_back_as_it_is(client, onboarded):
    first = ok(client.put("/v1/policy", json=EXTERNAL_CLASSES))

    same = ok(client.put("/v1/policy", json=first))
    edited = {**first, "kinds": {**first["kinds"]}}
    edited["kinds"]["external"] = {
        **first["kinds"]["external"],
        "qos_classes": ["bronze", "gold", "silver"],
    }
    second = ok(client.put("/v1/policy", json=edited))

    assert same == first  # the same rules: nothing written, the version in force
    assert second["version"] == first["version"] + 1
    assert second["kinds"]["external"]["qos_classes"] == ["bronze", "gold", "silver"]


def test_a_pool_share_round_trips_and_a_default_one_is_the_same_rules(client, onboarded):
    default = ok(client.get("/v1/policy"))
    stated = {"kinds": {"internal": {"peering": ["internal"], "max_pool_share_percent": 25}}}
    assert ok(client.put("/v1/policy", json=stated)) == default  # the default, stated: a no-op

    body = ok(
        client.put("/v1/policy", json={"kinds": {"external": {"max_pool_share_percent": 10}}})
    )

    assert body["version"] == 1 and body["fingerprint"] != default["fingerprint"]
    assert [body["kinds"][k]["max_pool_share_percent"] for k in ("internal", "external")] == [
        25,
        10,
    ]
    assert ok(client.get("/v1/policy")) == body
    assert ok(client.put("/v1/policy", json=body)) == body  # as GET answers it: nothing new


@pytest.mark.parametrize(
    ("member", "value", "status"),
    [
        ("version", 0, 409),  # read before the version in force: a stale edit
        ("fingerprint", "sha256:" + "0" * 64, 422),
        ("created_by", "token:someone-else:1", 422),
        ("created_at", "2020-01-01T00:00:00Z", 422),
    ],
)
def test_a_stale_version_or_an_edited_read_only_member_changes_nothing(
    client, onboarded, db_dump, member, value, status
):
    read = ok(client.put("/v1/policy", json=EXTERNAL_CLASSES))
    before = db_dump()

    response = client.put(
        "/v1/policy", json={**read, "services": {"storage": "all"}, member: value}
    )

    problem = assert_problem(response, status, "conflict" if status == 409 else "validation-error")
    assert problem.get("policy_version", 1) == 1 and db_dump() == before
    assert ("read-only" if status == 422 else "GET /v1/policy again") in problem["detail"]
