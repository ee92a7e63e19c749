"""Usage metering over HTTP (issue 6): records, FOCUS CSV and the CloudEvents feed."""

from __future__ import annotations

import csv
import io
import random
from typing import Any

import pytest

from policies.usage import FOCUS_COLUMNS
from tests.builders import (
    FABRIC,
    PORT_GUIDS,
    TENANT_PKEYS,
    assert_problem,
    created,
    ok,
    walk_pages,
)

RECORDS = "/v1/usage/records"
EVENTS = "/v1/usage/events"
FROM = "2026-03-01T00:00:00Z"


@pytest.fixture
def timeline(client, clock, onboarded):
    """12:00 onboarded (acme: gpu0001-2 with 2 ports each + storage; research and globex 2 nodes
    each); 12:30 acme releases its nodes; 13:15 acme's grant is revoked; now is 14:20."""
    clock.advance(30 * 60)
    assert client.delete(f"/v1/tenants/acme/allocations/{onboarded.allocation_ids['acme']}")
    clock.advance(45 * 60)
    assert client.delete(f"/v1/tenants/acme/grants/{onboarded.grant_ids['acme']}")
    clock.advance(65 * 60)
    return client


def _brief(record: dict[str, Any]) -> tuple[Any, ...]:
    return (
        record["period_start"],
        record["resource_type"],
        record["service"],
        record["node_seconds"],
        record["port_seconds"],
        record["access_seconds"],
        record["final"],
    )


def test_records_of_a_tenant_are_exact_for_a_literal_timeline(timeline):
    body = ok(timeline.get(RECORDS, params={"from": FROM, "tenant": "acme"}))

    assert body["complete_until"] == "2026-03-01T14:00:00Z"
    assert body["count"] == 3 and body["next"] is None
    assert sorted(_brief(r) for r in body["data"]) == [
        ("2026-03-01T12:00:00Z", "fabric-capacity", None, 3600, 7200, 0, True),
        ("2026-03-01T12:00:00Z", "service-access", "storage", 0, 0, 3600, True),
        ("2026-03-01T13:00:00Z", "service-access", "storage", 0, 0, 900, True),
    ]
    capacity = next(r for r in body["data"] if r["resource_type"] == "fabric-capacity")
    assert capacity == {
        "id": capacity["id"],
        "billing_account": "acme",
        "tenant": "acme",
        "fabric": FABRIC,
        "resource_type": "fabric-capacity",
        "qos_class": "gold",
        "service": None,
        "partition": "default",
        "origin": None,
        "period_start": "2026-03-01T12:00:00Z",
        "period_end": "2026-03-01T13:00:00Z",
        "node_seconds": 3600,
        "port_seconds": 7200,
        "access_seconds": 0,
        "node_hours": "1.000000",
        "port_hours": "2.000000",
        "access_hours": "0.000000",
        "final": True,
    }
    assert capacity["id"].startswith("usg_")


def test_daily_records_sum_the_day(timeline):
    params = {"from": FROM, "to": "2026-03-02T00:00:00Z", "granularity": "day"}
    body = ok(timeline.get(RECORDS, params={**params, "tenant": "research"}))

    [record] = body["data"]
    assert _brief(record) == (
        "2026-03-01T00:00:00Z",
        "fabric-capacity",
        None,
        16800,
        33600,
        0,
        False,
    )
    assert record["period_end"] == "2026-03-02T00:00:00Z"
    assert record["node_hours"] == "4.666667"


def test_records_page_with_the_cursor_and_cover_every_tenant(timeline):
    everything = ok(timeline.get(RECORDS, params={"from": FROM}))
    pages = walk_pages(timeline, RECORDS, 2, **{"from": FROM})

    assert [r for p in pages for r in p["data"]] == everything["data"]
    assert {r["tenant"] for r in everything["data"]} == {"acme", "research", "globex"}
    keys = [(r["period_start"], r["id"]) for r in everything["data"]]
    assert keys == sorted(keys) and len(set(keys)) == len(keys) == everything["count"]


def test_csv_has_exactly_the_focus_columns_and_parses(timeline):
    response = timeline.get(f"{RECORDS}.csv", params={"from": FROM, "tenant": "acme"})

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert response.text.count("\r\n") == 5 and "\n" not in response.text.replace("\r\n", "")
    header, *rows = list(csv.reader(io.StringIO(response.text, newline="")))
    assert header == list(FOCUS_COLUMNS)
    by_unit = sorted(
        (r[header.index("ConsumedUnit")], r[header.index("ConsumedQuantity")]) for r in rows
    )
    assert by_unit == [
        ("access-hour", "0.250000"),
        ("access-hour", "1.000000"),
        ("node-hour", "1.000000"),
        ("port-hour", "2.000000"),
    ]
    assert {r[header.index("BillingAccountId")] for r in rows} == {"acme"}


BAD_QUERIES = [
    "",
    "?from=yesterday",
    "?from=2026-03-01T00:00:00",  # no offset
    "?from=2026-03-01",
    "?from=2026-03-01T12:00:00Z&to=2026-03-01T12:00:00Z",
    "?from=2026-03-01T13:00:00Z&to=2026-03-01T12:00:00Z",
    "?from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z",  # 59 days hourly
    "?from=2024-01-01T00:00:00Z&to=2026-01-01T00:00:00Z&granularity=day",
    "?from=2026-03-01T00:00:00Z&granularity=week",
    "?from=2026-03-01T00:00:00Z&tenant=NOT_A_SLUG",
]


@pytest.mark.parametrize(
    "url",
    [RECORDS + q for q in BAD_QUERIES]
    + [f"{RECORDS}.csv{q}" for q in BAD_QUERIES]
    + [f"{RECORDS}?from=2026-03-01T00:00:00Z&cursor=not-a-cursor"],
)
def test_bad_ranges_are_422_problems(client, url):
    assert_problem(client.get(url), 422)


def test_bad_event_cursor_is_422(client):
    assert_problem(client.get(EVENTS, params={"cursor": "bm90LWpzb24"}), 422)


def test_events_are_final_hourly_cloud_events_in_order(timeline):
    body = ok(timeline.get(EVENTS))

    finals = [r for r in ok(timeline.get(RECORDS, params={"from": FROM}))["data"] if r["final"]]
    assert [e["data"] for e in body["data"]] == finals
    for event in body["data"]:
        assert event["specversion"] == "1.0"
        assert event["type"] == "isofabric.usage.hourly.v1"
        assert event["id"] == event["data"]["id"]
    assert body["next"]
    again = ok(timeline.get(EVENTS, params={"cursor": body["next"]}))
    assert again == {"data": [], "next": body["next"]}  # nothing new: the cursor stays usable


@pytest.mark.parametrize("run", range(5))
def test_a_consumer_that_stops_anywhere_and_resumes_sees_every_event_exactly_once(
    client, clock, onboarded, run
):
    rng = random.Random(run)
    seen: list[dict[str, Any]] = []
    cursor: str | None = None
    spare = ["gpu0007", "gpu0008"]
    # Ten hours pass in random steps while tenants come and go and a consumer polls.
    for _ in range(40):
        clock.advance(rng.randint(1, 45) * 60)
        if spare and rng.random() < 0.2:
            client.post(
                "/v1/tenants/globex/allocations", json={"fabric": FABRIC, "nodes": [spare.pop()]}
            )
        for _poll in range(rng.randint(0, 3)):  # stop after a random number of pages
            query = {"limit": rng.randint(1, 4), **({"cursor": cursor} if cursor else {})}
            page = ok(client.get(EVENTS, params=query))
            seen += page["data"]
            assert page["next"]
            cursor = page["next"]
    while True:  # finally drain
        page = ok(client.get(EVENTS, params={"cursor": cursor, "limit": 7}))
        if not page["data"]:
            break
        seen += page["data"]
        cursor = page["next"]

    finals = [
        r
        for r in ok(client.get(RECORDS, params={"from": FROM, "limit": 1000}))["data"]
        if r["final"]
    ]
    assert [e["id"] for e in seen] == [r["id"] for r in finals]
    assert [e["data"] for e in seen] == finals
    assert len(finals) > 10


def test_service_access_names_no_partition_and_capacity_is_counted_once_per_node(timeline):
    body = ok(timeline.get(RECORDS, params={"from": FROM, "tenant": "acme"}))

    capacity = [r for r in body["data"] if r["resource_type"] == "fabric-capacity"]
    access = [r for r in body["data"] if r["resource_type"] == "service-access"]
    assert {r["partition"] for r in capacity} == {"default"}
    assert {r["partition"] for r in access} == {None}
    assert len({(r["period_start"], r["qos_class"]) for r in capacity}) == len(capacity)


def test_usage_of_nodes_the_ufm_api_allocated_says_orchestrator(client, clock, onboarded):
    """12:00 onboarded; 12:30 acme's scheduler puts gpu0007's port in acme's P_Key through the
    UFM-compatible API (which allocates the node); now is 14:20."""
    clock.advance(30 * 60)
    before = ok(client.get(RECORDS, params={"from": FROM, "tenant": "acme"}))["data"]
    operator = created(client.post("/v1/tokens", json={"name": "ops", "role": "operator"}))
    bearer = {"Authorization": f"Bearer {operator['token']}"}
    spec = {"name": "k8s", "role": "orchestrator", "fabric": FABRIC, "tenant": "acme"}
    orchestrator = created(client.post("/v1/tokens", json=spec, headers=bearer))["token"]
    added = client.post(
        "/ufmRest/resources/pkeys/",
        auth=("k8s", orchestrator),
        json={"pkey": TENANT_PKEYS["acme"], "guids": [PORT_GUIDS["gpu0007"][0]]},
    )
    assert (added.status_code, added.json()) == (200, {})
    clock.advance(110 * 60)

    page = ok(client.get(RECORDS, params={"from": FROM, "tenant": "acme"}, headers=bearer))
    capacity = {
        (r["period_start"][11:16], r["origin"]): r
        for r in page["data"]
        if r["resource_type"] == "fabric-capacity"
    }
    assert {key: r["node_seconds"] for key, r in capacity.items()} == {
        ("12:00", None): 2 * 3600,
        ("12:00", "orchestrator"): 1800,
        ("13:00", None): 2 * 3600,
        ("13:00", "orchestrator"): 3600,
        ("14:00", None): 2 * 1200,
        ("14:00", "orchestrator"): 1200,
    }
    # acme's own nodes keep the record (and id) they had before the orchestrator came.
    (own,) = [r for r in before if r["resource_type"] == "fabric-capacity"]
    assert capacity["12:00", None]["id"] == own["id"]
    assert capacity["12:00", "orchestrator"]["id"] != own["id"]
    assert capacity["12:00", "orchestrator"]["port_seconds"] == 2 * 1800  # both of its ports

    text = client.get(f"{RECORDS}.csv", params={"from": FROM, "tenant": "acme"}, headers=bearer)
    header, *rows = list(csv.reader(io.StringIO(text.text, newline="")))
    assert header[-1] == "Origin"
    origins = {(r[header.index("ChargePeriodStart")][11:16], r[-1]) for r in rows}
    assert ("12:00", "orchestrator") in origins and ("12:00", "") in origins
    events = ok(client.get(EVENTS, headers=bearer))["data"]
    assert {e["data"]["origin"] for e in events if e["subject"] == "acme"} == {
        None,
        "orchestrator",
    }
