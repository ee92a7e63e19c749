"""Change sets (issue 12, item 3): operations applied in order as one verified unit."""

from __future__ import annotations

from sqlalchemy import text

from tenancy.gate.full_check import full_check
from tests.builders import FABRIC, assert_problem, created, ok

CHANGESETS = "/v1/changesets"
STORAGE = {"fabric": FABRIC, "service": "storage"}


def onboard_ops(*names: str, count: int = 1) -> list[dict[str, object]]:
    ops: list[dict[str, object]] = []
    for name in names:
        ops.append({"op": "create_tenant", "name": name, "kind": "external", "qos_class": "gold"})
        ops.append({"op": "allocate", "tenant": name, "fabric": FABRIC, "count": count})
    return ops


def audit_actions(engine, since: int) -> list[tuple[str, str, str | None, str | None]]:
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT action, target, digest_before, digest_after FROM audit_entry "
                'WHERE "index" >= :since ORDER BY "index"'
            ),
            {"since": since},
        )
        return [tuple(row) for row in rows]


def log_size(engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM audit_entry")).scalar_one())


def test_a_change_set_onboards_tenants_in_order_with_one_audit_entry_per_operation(
    client, onboarded, engine
):
    before_digest = ok(client.get(f"/v1/fabrics/{FABRIC}/verification"))["snapshot_digest"]
    since = log_size(engine)

    body = ok(client.post(CHANGESETS, json={"operations": onboard_ops("hooli", "initech")}))

    assert body["dry_run"] is False
    assert [(r["index"], r["op"]) for r in body["results"]] == [
        (0, "create_tenant"),
        (1, "allocate"),
        (2, "create_tenant"),
        (3, "allocate"),
    ]
    assert body["results"][0]["result"]["name"] == "hooli"
    assert body["results"][3]["result"]["tenant"] == "initech"
    verdict = ok(client.get(f"/v1/fabrics/{FABRIC}/verification"))
    assert verdict["holds"] and body["fabrics"] == [
        {"fabric": FABRIC, "holds": True, "snapshot_digest": verdict["snapshot_digest"]}
    ]
    entries = audit_actions(engine, since)
    assert [e[0] for e in entries] == [
        "tenant.create",
        "allocation.create",
        "tenant.create",
        "allocation.create",
    ]
    after = verdict["snapshot_digest"]
    assert [e[2:] for e in entries if e[0] == "allocation.create"] == [
        (before_digest, after),
        (after, after),
    ]


def test_every_operation_kind_runs_and_a_later_one_sees_an_earlier_ones_result(client, onboarded):
    made = ok(client.post(CHANGESETS, json={"operations": onboard_ops("hooli")}))
    allocation = made["results"][1]["result"]["id"]
    grant = ok(
        client.post(
            CHANGESETS, json={"operations": [{"op": "grant", "tenant": "hooli", **STORAGE}]}
        )
    )["results"][0]["result"]["id"]

    body = ok(
        client.post(
            CHANGESETS,
            json={
                "operations": [
                    {"op": "revoke", "tenant": "hooli", "grant_id": grant},
                    {"op": "release", "tenant": "hooli", "allocation_id": allocation},
                    {"op": "offboard", "tenant": "hooli"},
                ]
            },
        )
    )

    assert [r["result"] for r in body["results"][:2]] == [None, None]
    assert body["results"][2]["result"]["status"] == "offboarded"
    assert ok(client.get("/v1/tenants/hooli"))["status"] == "offboarded"


def test_a_failing_operation_is_named_by_index_and_nothing_changes(client, onboarded, db_dump):
    before = db_dump()
    operations = [
        *onboard_ops("hooli"),
        {"op": "allocate", "tenant": "nobody", "fabric": FABRIC, "count": 1},
    ]

    response = client.post(CHANGESETS, json={"operations": operations})

    body = assert_problem(response, 404)
    assert body["operation"] == 2 and body["detail"].startswith("operation 2 (allocate): ")
    assert db_dump() == before


def test_a_change_set_that_breaks_isolation_is_refused_whole(client, onboarded, db_dump):
    # acme is granted storage; three more services' P_Keys would overflow no port (the fabric
    # allows 32), but a tenant granted a service it lacks cannot be verified into a shared node:
    # assigning a tenant's node to a new service fails the operation, not the verification.
    before = db_dump()
    operations = [
        *onboard_ops("hooli"),
        {"op": "allocate", "tenant": "hooli", "fabric": FABRIC, "nodes": ["sm01"]},
    ]

    response = client.post(CHANGESETS, json={"operations": operations})

    assert response.status_code in (409, 422), response.text
    assert db_dump() == before


def test_malformed_change_sets_are_422(client, onboarded):
    bodies: list[dict[str, object]] = [
        {"operations": []},
        {"operations": [{"op": "explode"}]},
        {"operations": [{"op": "offboard"}]},
        {"operations": [{"op": "offboard", "tenant": "acme", "extra": 1}]},
        {"operations": [{"op": "offboard", "tenant": "acme"}], "dry_run": "yes"},
        {"operations": [{"op": "offboard", "tenant": "acme"}] * 10_001},
    ]
    for body in bodies:
        assert_problem(client.post(CHANGESETS, json=body), 422)


def test_a_dry_run_reports_the_verdict_delta_and_diffs_and_writes_nothing(
    client, onboarded, db_dump
):
    digest = ok(client.get(f"/v1/fabrics/{FABRIC}/verification"))["snapshot_digest"]
    before = db_dump()  # after the read: on PostgreSQL reads store the verdict for replicas
    operations = [*onboard_ops("hooli"), {"op": "grant", "tenant": "hooli", **STORAGE}]

    body = ok(client.post(CHANGESETS, json={"operations": operations, "dry_run": True}))

    assert db_dump() == before
    assert body["dry_run"] is True and [r["op"] for r in body["results"]] == [
        "create_tenant",
        "allocate",
        "grant",
    ]
    (fabric,) = body["what_if"]
    assert fabric["holds"] and fabric["snapshot_digest_before"] == digest
    assert fabric["snapshot_digest_after"] != digest
    assert fabric["reachability"] == {
        "added": [
            {"from": "tenant:hooli", "to": "service:storage", "segment": "0x0100", "allowed": True}
        ],
        "removed": [],
    }
    files = {a["path"]: a for a in fabric["artifacts"]}
    partitions = files["opensm/partitions.conf"]
    assert partitions["sha256_before"] != partitions["sha256_after"]
    assert "+hooli" in partitions["diff"] or "\n+" in partitions["diff"]
    assert files["opensm/opensm.conf"]["diff"] is None  # unchanged: no diff
    applied = ok(client.post(CHANGESETS, json={"operations": operations}))
    assert applied["fabrics"][0]["snapshot_digest"] == fabric["snapshot_digest_after"]


def test_a_dry_run_of_a_change_that_breaks_isolation_answers_its_counterexamples(
    client, onboarded, engine, db_dump
):
    with engine.begin() as connection:  # room for the tenant's own key and one service only
        connection.execute(text("UPDATE fabric SET pkeys_per_port = 3"))
    full_check(client.app.state.uow, fabric_name=FABRIC)  # the stored digest learns the change
    ok(client.post(CHANGESETS, json={"operations": onboard_ops("hooli")}))
    scratch = {"name": "scratch", "nodes": ["gpu0008"]}
    created(client.post(f"/v1/fabrics/{FABRIC}/services", json=scratch))
    ok(
        client.post(
            CHANGESETS, json={"operations": [{"op": "grant", "tenant": "hooli", **STORAGE}]}
        )
    )
    before = db_dump()
    second = {"op": "grant", "tenant": "hooli", "fabric": FABRIC, "service": "scratch"}

    body = ok(client.post(CHANGESETS, json={"operations": [second], "dry_run": True}))

    (fabric,) = body["what_if"]
    assert not fabric["holds"] and fabric["artifacts"] == []
    assert {c["rule"] for c in fabric["counterexamples"]} == {"pkey-budget-exceeded"}
    assert db_dump() == before
    assert_problem(client.post(CHANGESETS, json={"operations": [second]}), 409)
    assert db_dump() == before
