"""``?dry_run=true`` on mutating routes (issue 12, item 4): the what-if, and nothing written."""

from __future__ import annotations

import pytest

from tests.builders import FABRIC, assert_problem, ok

STORAGE = {"fabric": FABRIC, "service": "storage"}


def test_a_dry_run_allocation_reports_the_new_partition_and_writes_nothing(
    client, onboarded, db_dump
):
    before = db_dump()

    body = ok(
        client.post(
            "/v1/tenants/globex/allocations?dry_run=true", json={"fabric": FABRIC, "count": 1}
        )
    )

    assert db_dump() == before
    assert body["dry_run"] is True and body["holds"] is True
    (fabric,) = body["fabrics"]
    assert fabric["fabric"] == FABRIC
    assert fabric["snapshot_digest_before"] != fabric["snapshot_digest_after"]
    assert fabric["reachability"] == {"added": [], "removed": []}
    partitions = next(a for a in fabric["artifacts"] if a["path"] == "opensm/partitions.conf")
    assert partitions["sha256_before"] != partitions["sha256_after"]
    assert partitions["diff"].startswith("--- a/opensm/partitions.conf")


def test_a_dry_run_revoke_reports_the_removed_edge(client, onboarded, db_dump):
    grant = onboarded.grant_ids["acme"]
    before = db_dump()

    body = ok(client.delete(f"/v1/tenants/acme/grants/{grant}?dry_run=1"))

    assert db_dump() == before
    removed = body["fabrics"][0]["reachability"]["removed"]
    assert [(e["from"], e["to"]) for e in removed] == [("tenant:acme", "service:storage")]


def test_a_dry_run_tenant_touches_no_fabric_and_an_error_is_the_same_problem(
    client, onboarded, db_dump
):
    before = db_dump()
    body = ok(client.post("/v1/tenants?dry_run=true", json={"name": "hooli", "kind": "external"}))
    assert body == {"dry_run": True, "view": "full", "holds": True, "fabrics": []}
    assert_problem(
        client.post("/v1/tenants?dry_run=true", json={"name": "acme", "kind": "external"}), 409
    )
    assert db_dump() == before


def test_opensm_keys_never_appear_in_a_dry_runs_diff(client, onboarded):
    body = ok(
        client.patch(f"/v1/fabrics/{FABRIC}/nodes/gpu0008?dry_run=true", json={"role": "storage"})
    )

    for fabric in body["fabrics"]:
        for artifact in fabric["artifacts"]:
            for line in (artifact["diff"] or "").splitlines():
                if line.lstrip("+- ").startswith(("m_key ", "sm_key ", "sa_key ")):
                    assert line.endswith("<redacted>"), line


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/tokens?dry_run=true", {"name": "x", "role": "operator"}),
        ("DELETE", "/v1/tokens/00000000-0000-4000-8000-000000000000?dry_run=true", None),
    ],
)
def test_token_management_refuses_a_dry_run_instead_of_applying_it(
    client, onboarded, db_dump, method, path, body
):
    before = db_dump()
    response = client.request(method, path, json=body)
    problem = assert_problem(response, 422)
    assert "no dry run" in problem["detail"]
    assert db_dump() == before


def test_a_dry_run_value_that_is_not_a_boolean_is_refused(client, onboarded, db_dump):
    before = db_dump()
    assert_problem(
        client.post("/v1/tenants?dry_run=maybe", json={"name": "hooli", "kind": "external"}), 422
    )
    assert db_dump() == before
