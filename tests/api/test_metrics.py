"""GET /metrics (issue 14, item 2): the Prometheus exposition, parsed with the official parser.

Every value asserted here is caused by real requests to the app (or a stored state they made):
an allocation claims a P_Key, a policy the state violates is refused by isolation, a cached
verdict that does not hold reads 0, deploy reports move a target's sync.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from policies.model import Owner
from policies.verdict import Counterexample, Endpoint, Rule, Verdict
from tenancy.gate.full_check import full_check
from tenancy.schemas import TokenCreate
from tenancy.usecases import tokens
from tests.builders import FABRIC, LOCAL_URL, assert_problem, created, ok

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
IB = f"/v1/fabrics/{FABRIC}"
GOLD_ONLY = {"kinds": {"external": {"qos_classes": ["gold"]}}}  # globex (bronze) violates it


def scrape(client: Any, headers: dict[str, str] | None = None) -> Samples:
    response = client.get("/metrics", headers=headers or {})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def allocate(client: Any, tenant: str, node: str) -> dict[str, Any]:
    body = {"fabric": FABRIC, "nodes": [node]}
    return created(client.post(f"/v1/tenants/{tenant}/allocations", json=body))


def new_tenant(client: Any, name: str) -> None:
    created(client.post("/v1/tenants", json={"name": name, "kind": "internal"}))


def test_a_new_tenants_first_allocation_raises_the_pkey_use_by_one(client, onboarded):
    before = scrape(client)
    new_tenant(client, "initech")
    allocate(client, "initech", "gpu0007")

    after = scrape(client)
    used = value(before, "isofabric_pool_used", fabric=FABRIC, pool="pkey")
    assert used is not None and used > 0
    assert value(after, "isofabric_pool_used", fabric=FABRIC, pool="pkey") == used + 1
    # ib-east's range is 0x0100-0x7ffe (tests/builders.py PKEY_RANGE)
    assert value(after, "isofabric_pool_size", fabric=FABRIC, pool="pkey") == 0x7FFE - 0x100 + 1
    free = value(before, "isofabric_nodes", fabric=FABRIC, state="free")
    allocated = value(before, "isofabric_nodes", fabric=FABRIC, state="allocated")
    assert free is not None and allocated is not None
    assert value(after, "isofabric_nodes", fabric=FABRIC, state="free") == free - 1
    assert value(after, "isofabric_nodes", fabric=FABRIC, state="allocated") == allocated + 1
    assert value(after, "isofabric_nodes", fabric=FABRIC, state="draining") == 0


def test_requests_are_counted_by_route_template_never_by_raw_path(client, onboarded):
    for tenant in ("acme", "globex", "acme"):
        ok(client.get(f"/v1/tenants/{tenant}"))
    client.get("/v1/no-such-route/acme")

    samples = scrape(client)
    tenant_route = {"method": "GET", "route": "/v1/tenants/{tenant}", "status": "200"}
    assert value(samples, "isofabric_http_requests_total", **tenant_route) == 3
    assert value(samples, "isofabric_http_request_duration_seconds_count", **tenant_route) == 3
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    assert value(samples, "isofabric_http_requests_total", **unmatched) == 1
    routes = {dict(labels).get("route") for _, labels in samples}
    assert not any(route and ("acme" in route or "globex" in route) for route in routes)


def test_mutations_count_an_isolation_refusal_apart_from_other_outcomes(client, onboarded):
    assert_problem(client.put("/v1/policy", json=GOLD_ONLY), 409, "isolation-violation")
    ok(client.put("/v1/policy?dry_run=true", json=GOLD_ONLY))
    assert_problem(
        client.post("/v1/tenants/nobody/allocations", json={"fabric": FABRIC, "count": 1}), 404
    )
    new_tenant(client, "initech")
    for _ in range(2):  # the retry gets the first answer again: nothing runs
        body = {"name": "hooli", "kind": "internal"}
        created(client.post("/v1/tenants", json=body, headers={"Idempotency-Key": "k-1"}))

    samples = scrape(client)

    def mutations(method: str, route: str, outcome: str) -> float | None:
        labels = {"method": method, "route": route, "outcome": outcome}
        return value(samples, "isofabric_mutations_total", **labels)

    assert mutations("PUT", "/v1/policy", "refused_isolation") == 1
    assert mutations("PUT", "/v1/policy", "dry_run") == 1
    assert mutations("PUT", "/v1/policy", "refused") is None
    assert mutations("POST", "/v1/tenants/{tenant}/allocations", "refused") == 1
    assert mutations("POST", "/v1/tenants", "committed") == 2
    assert mutations("POST", "/v1/tenants", "replayed") == 1
    # GETs are no mutations
    assert not any(
        name == "isofabric_mutations_total" and ("method", "GET") in labels
        for name, labels in samples
    )


def test_a_verdict_that_does_not_hold_reads_0_with_its_counterexamples(
    client, onboarded, monkeypatch
):
    assert value(scrape(client), "isofabric_fabric_verdict", fabric=FABRIC, kind="infiniband") == 1
    example = Counterexample(
        rule=Rule.CROSS_TENANT,
        message="tenant:acme reaches tenant:globex",
        segment=0x101,
        a=Endpoint(guid=1, node="gpu0001", owner=Owner.tenant("acme")),
        b=Endpoint(guid=2, node="gpu0005", owner=Owner.tenant("globex")),
    )
    broken = Verdict(
        holds=False, snapshot_digest="v2:00", counterexamples=(example,), reachability=()
    )
    monkeypatch.setattr("tenancy.gate.cached_reads.verify_snapshot", lambda _snapshot: broken)
    assert ok(client.get(f"{IB}/verification"))["holds"] is False  # computed once and kept

    samples = scrape(client)

    assert value(samples, "isofabric_fabric_verdict", fabric=FABRIC, kind="infiniband") == 0
    assert value(samples, "isofabric_fabric_counterexamples", fabric=FABRIC) == 1


def test_a_full_check_alarm_reads_verdict_0_and_its_duration_is_recorded(client, onboarded, engine):
    with engine.begin() as connection:  # a digest the state does not have
        connection.execute(text("UPDATE fabric_digest SET digest = :d"), {"d": "v2:" + "1" * 64})
    assert not full_check(client.app.state.uow, fabric_name=FABRIC).matches

    samples = scrape(client)

    assert value(samples, "isofabric_fabric_verdict", fabric=FABRIC, kind="infiniband") == 0
    assert value(samples, "isofabric_fabric_verification_alarm", fabric=FABRIC) == 1
    assert value(samples, "isofabric_fabric_counterexamples", fabric=FABRIC) is None  # unknown
    full = {"fabric": FABRIC, "check": "full"}
    assert value(samples, "isofabric_verification_duration_seconds_count", **full) == 1


def test_the_commit_gate_reports_each_verification(client, onboarded):
    incremental = {"fabric": FABRIC, "check": "incremental"}
    before = value(scrape(client), "isofabric_verification_duration_seconds_count", **incremental)
    allocate(client, "acme", "gpu0007")
    allocate(client, "globex", "gpu0008")

    after = scrape(client)
    assert (
        value(after, "isofabric_verification_duration_seconds_count", **incremental)
        == (before or 0) + 2
    )
    seconds = value(after, "isofabric_verification_duration_seconds_sum", **incremental)
    assert seconds is not None and seconds > 0


def test_audit_log_size_and_checkpoint_age(client, onboarded, clock):
    before = scrape(client)
    entries = value(before, "isofabric_audit_log_entries")
    assert entries is not None and entries > 0
    new_tenant(client, "initech")
    checkpoint = ok(client.get("/v1/audit/checkpoint"))
    clock.advance(120)

    after = scrape(client)
    assert value(after, "isofabric_audit_log_entries") == entries + 1 == checkpoint["size"]
    assert value(after, "isofabric_audit_checkpoint_entries") == checkpoint["size"]
    assert value(after, "isofabric_audit_checkpoint_age_seconds") == 120


def test_usage_lag_is_now_minus_the_end_of_the_last_final_hour(client, clock):
    # 12:00:00 - 5 min grace = 11:55 -> the feed is final up to 11:00: 3600 s behind
    assert value(scrape(client), "isofabric_usage_metering_lag_seconds") == 3600
    clock.advance(400)  # 12:06:40 - 5 min = 12:01:40 -> final up to 12:00
    assert value(scrape(client), "isofabric_usage_metering_lag_seconds") == 400


def test_deploy_targets_by_sync_state_and_seconds_since_in_sync(client, onboarded, clock):
    created(client.put(f"{IB}/targets/sm-a", json={"kind": "opensm"}))
    clock.advance(30)
    target = {"fabric": FABRIC, "target": "sm-a"}
    samples = scrape(client)
    assert value(samples, "isofabric_deploy_targets", fabric=FABRIC, state="unreported") == 1
    assert value(samples, "isofabric_deploy_target_seconds_since_in_sync", **target) == 30
    assert value(samples, "isofabric_untargeted_leaves", fabric=FABRIC) == 0  # RoCE only

    desired = ok(client.get(f"{IB}/sync"))["desired"]
    report = {"state": "applied", "digest": desired, "role": "master"}
    created(client.post(f"{IB}/targets/sm-a/reports", json=report))
    samples = scrape(client)
    assert value(samples, "isofabric_deploy_targets", fabric=FABRIC, state="in_sync") == 1
    assert value(samples, "isofabric_deploy_targets", fabric=FABRIC, state="unreported") == 0
    assert value(samples, "isofabric_deploy_target_seconds_since_in_sync", **target) == 0

    clock.advance(10)
    allocate(client, "acme", "gpu0007")  # a new desired snapshot: sm-a holds the old one
    clock.advance(50)
    samples = scrape(client)
    assert value(samples, "isofabric_deploy_targets", fabric=FABRIC, state="pending") == 1
    assert value(samples, "isofabric_deploy_target_seconds_since_in_sync", **target) == 50


def test_roce_leaves_that_carry_owners_ports_without_a_target_are_counted(client, roce_onboarded):
    fabric = roce_onboarded.fabric
    # every host has a NIC on leaf01 and one on leaf02; no leaf has a target yet
    assert value(scrape(client), "isofabric_untargeted_leaves", fabric=fabric) == 2

    created(client.put(f"/v1/fabrics/{fabric}/targets/leaf01", json={"kind": "sonic"}))

    assert value(scrape(client), "isofabric_untargeted_leaves", fabric=fabric) == 1
    assert ok(client.get(f"/v1/fabrics/{fabric}/sync"))["untargeted"] == ["leaf02"]


def test_roce_pools_report_use_and_size_per_pool(client, roce_onboarded):
    samples = scrape(client)
    fabric = roce_onboarded.fabric

    def pool(name: str) -> tuple[float | None, float | None]:
        labels = {"fabric": fabric, "pool": name}
        return value(samples, "isofabric_pool_used", **labels), value(
            samples, "isofabric_pool_size", **labels
        )

    settings = ok(client.get(f"/v1/fabrics/{fabric}"))
    owners = 4  # tenants acme, research, globex and service storage: one VRF segment each
    for name in ("l2vni", "l3vni"):
        bounds = settings[f"{name}_range"]
        assert pool(name) == (owners, bounds["last"] - bounds["first"] + 1)
    vlans = settings["vlan_range"]
    assert pool("vlan") == (2 * owners, vlans["last"] - vlans["first"] + 1)  # segment + L3VNI's
    prefix = int(settings["tenant_prefix_pool"].split("/")[1])
    assert pool("subnet") == (owners, 2 ** (settings["tenant_prefix_length"] - prefix))
    assert pool("rd") == (owners, 65535)
    assert value(samples, "isofabric_pool_used", fabric=fabric, pool="pkey") is None


def test_each_app_has_its_own_registry(make_client, onboarded):
    first, second = make_client(), make_client()
    ok(first.get("/v1/tenants/acme"))

    route = {"method": "GET", "route": "/v1/tenants/{tenant}", "status": "200"}
    assert value(scrape(first), "isofabric_http_requests_total", **route) == 1
    assert value(scrape(second), "isofabric_http_requests_total", **route) is None


# --- who may read it ------------------------------------------------------------------------------

ADMIN = "metrics-admin-token"


def bearer(client: Any, role: str, tenant: str | None = None) -> dict[str, str]:
    spec = TokenCreate(name=f"m-{role}", role=role, tenant=tenant)
    return {"Authorization": f"Bearer {tokens.create_token(client.app.state.uow, spec=spec).token}"}


def test_by_default_only_roles_that_read_every_fabric_may_scrape(make_client, onboarded):
    client = make_client(admin_token=ADMIN)

    assert_problem(client.get("/metrics"), 401, "unauthorized")
    assert_problem(client.get("/metrics", headers={"Authorization": "Bearer nope"}), 401)
    for role, tenant in (("tenant-viewer", "acme"), ("tenant-admin", "acme"), ("billing", None)):
        assert_problem(client.get("/metrics", headers=bearer(client, role, tenant)), 403)
    for role in ("auditor", "operator"):
        assert value(scrape(client, bearer(client, role)), "isofabric_state_read_ok") == 1
    assert value(scrape(client, {"Authorization": f"Bearer {ADMIN}"}), "isofabric_state_read_ok")


def test_without_any_token_yet_only_this_host_may_scrape(engine, settings, clock):
    from dataclasses import replace

    from fastapi.testclient import TestClient

    from api.app import create_app

    remote = TestClient(create_app(settings, engine=engine, clock=clock), client=("203.0.113.9", 1))
    local = TestClient(
        create_app(settings, engine=engine, clock=clock),
        client=("127.0.0.1", 1),
        base_url=LOCAL_URL,
    )
    opened = create_app(replace(settings, metrics_access="open"), engine=engine, clock=clock)
    with remote, local, TestClient(opened, client=("203.0.113.9", 1)) as anyone:
        assert_problem(remote.get("/metrics"), 401, "unauthorized")
        assert value(scrape(local), "isofabric_state_read_ok") == 1
        assert value(scrape(anyone), "isofabric_state_read_ok") == 1
        assert_problem(anyone.get("/v1/tenants"), 401, "unauthorized")  # the API stays closed


def test_open_access_lets_a_scraper_in_without_a_token(make_client, onboarded):
    client = make_client(admin_token=ADMIN, metrics_access="open")

    samples = scrape(client)

    assert value(samples, "isofabric_fabric_verdict", fabric=FABRIC, kind="infiniband") == 1
    assert_problem(client.get("/v1/tenants"), 401, "unauthorized")


def test_the_route_is_documented_as_text(client):
    operation = ok(client.get("/openapi.json"))["paths"]["/metrics"]["get"]

    assert operation["description"].startswith("The service's metrics")
    assert "text/plain" in operation["responses"]["200"]["content"]
    assert operation.get("parameters", []) == []


def test_a_management_node_counts_as_management_never_as_free(client, onboarded):
    """sm01 is ib-east's SM host (tests/builders.py ROLES): never held, so not capacity."""
    nodes = ok(client.get(f"{IB}/nodes", params={"limit": 1000}))["data"]
    free = [n for n in nodes if n["state"] == "free" and n["role"] != "management"]
    management = [n for n in nodes if n["role"] == "management"]
    assert [n["name"] for n in management] == ["sm01"]

    samples = scrape(client)

    assert value(samples, "isofabric_nodes", fabric=FABRIC, state="free") == len(free)
    assert value(samples, "isofabric_nodes", fabric=FABRIC, state="management") == 1
