"""/v1/qos-classes and /v1/tenants: seeded classes, onboarding, names, lookups."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.builders import FakeClock, assert_problem, created, ok

ACME = {"name": "acme", "kind": "external", "qos_class": "gold"}
BAD_NAMES = [
    "acme\n",
    "ac\nme",
    "ac;me",
    "ac:me",
    "ac=me",
    "ac,me",
    "ac me",
    "Acme",
    "-acme",
    "",
    "a" * 64,
]


def test_gold_silver_and_bronze_are_seeded_and_listed_by_name(client):
    page = ok(client.get("/v1/qos-classes"))

    ecn = {"ecn_min_bytes": 153600, "ecn_max_bytes": 1536000, "ecn_probability": 5}
    assert page == {
        "data": [
            {
                "name": "bronze",
                "ib_sl": 1,
                "ib_rate": 3,
                "ib_mtu": 4,
                "vlarb_weight": 16,
                "roce_dscp": 10,
                "roce_tc": 1,
                "lossless": False,
                "ets_weight": 20,
                **ecn,
            },
            {
                "name": "gold",
                "ib_sl": 3,
                "ib_rate": 3,
                "ib_mtu": 4,
                "vlarb_weight": 128,
                "roce_dscp": 26,
                "roce_tc": 3,
                "lossless": True,
                "ets_weight": 50,
                **ecn,
            },
            {
                "name": "silver",
                "ib_sl": 2,
                "ib_rate": 3,
                "ib_mtu": 4,
                "vlarb_weight": 64,
                "roce_dscp": 28,
                "roce_tc": 4,
                "lossless": True,
                "ets_weight": 30,
                **ecn,
            },
        ],
        "count": 3,
        "next": None,
    }


def test_a_new_qos_class_is_created_with_defaults_and_listed(client):
    body = created(client.post("/v1/qos-classes", json={"name": "platinum", "ib_sl": 4}))

    assert body == {
        "name": "platinum",
        "ib_sl": 4,
        "ib_rate": 3,
        "ib_mtu": 4,
        "vlarb_weight": 32,
        "roce_dscp": 0,
        "roce_tc": 0,
        "lossless": False,
        "ets_weight": 10,
        "ecn_min_bytes": 153600,
        "ecn_max_bytes": 1536000,
        "ecn_probability": 5,
    }
    assert ok(client.get("/v1/qos-classes"))["count"] == 4


def test_a_qos_class_with_every_field_is_returned_as_sent(client):
    spec = {
        "name": "ultra",
        "ib_sl": 15,
        "ib_rate": 21,
        "ib_mtu": 5,
        "vlarb_weight": 255,
        "roce_dscp": 34,
        "roce_tc": 5,
        "lossless": True,
        "ets_weight": 40,
        "ecn_min_bytes": 100000,
        "ecn_max_bytes": 900000,
        "ecn_probability": 10,
    }

    assert created(client.post("/v1/qos-classes", json=spec)) == spec


def test_a_second_qos_class_named_gold_is_a_409_and_changes_nothing(client, db_dump):
    before = db_dump()

    assert_problem(
        client.post("/v1/qos-classes", json={"name": "gold", "ib_sl": 5}), 409, "conflict"
    )
    assert db_dump() == before


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "platinum", "ib_sl": 16},
        {"name": "platinum", "ib_sl": -1},
        {"name": "platinum", "ib_sl": 4, "ib_mtu": 0},
        {"name": "platinum", "ib_sl": 4, "ib_mtu": 6},
        {"name": "platinum", "ib_sl": 4, "ib_rate": 1},
        {"name": "platinum", "ib_sl": 4, "vlarb_weight": 0},
        {"name": "platinum"},
        {"name": "plat;inum", "ib_sl": 4},
        {"name": "platinum\n", "ib_sl": 4},
        {"name": "platinum", "ib_sl": 4, "dscp": 26},
    ],
    ids=repr,
)
def test_an_invalid_qos_class_is_a_422_and_changes_nothing(client, db_dump, spec):
    before = db_dump()

    assert_problem(client.post("/v1/qos-classes", json=spec), 422, "validation-error")
    assert db_dump() == before


def test_onboarding_a_tenant_returns_201_with_an_active_record(client):
    body = created(client.post("/v1/tenants", json=ACME))

    assert body == {
        "name": "acme",
        "kind": "external",
        "status": "active",
        "qos_class": "gold",
        "created_at": "2026-03-01T12:00:00Z",
        "offboarded_at": None,
        "billing_account": "acme",
        "max_nodes": None,
    }


def test_a_tenant_reads_back_with_the_same_fields(client):
    posted = created(client.post("/v1/tenants", json=ACME))

    read = ok(client.get("/v1/tenants/acme"))

    assert {**read, "created_at": None} == {**posted, "created_at": None}


def test_a_tenant_timestamp_reads_back_as_an_aware_utc_instant(client, clock: FakeClock):
    created(client.post("/v1/tenants", json=ACME))

    listed = ok(client.get("/v1/tenants"))["data"][0]["created_at"]
    read = ok(client.get("/v1/tenants/acme"))["created_at"]

    for text in (listed, read):
        moment = datetime.fromisoformat(text)
        assert moment.tzinfo is not None, f"{text!r} has no time zone"
        assert moment == clock.now


def test_tenants_are_listed_by_name_and_filtered_by_kind_and_status(client, onboarded):
    everyone = ok(client.get("/v1/tenants"))
    external = ok(client.get("/v1/tenants", params={"kind": "external"}))
    offboarded = ok(client.get("/v1/tenants", params={"status": "offboarded"}))

    assert [t["name"] for t in everyone["data"]] == ["acme", "globex", "research"]
    assert (everyone["count"], everyone["next"]) == (3, None)
    assert [t["name"] for t in external["data"]] == ["acme", "globex"]
    assert external["count"] == 2
    assert offboarded == {"data": [], "count": 0, "next": None}


@pytest.mark.parametrize("query", [{"kind": "partner"}, {"status": "deleted"}], ids=repr)
def test_a_bad_tenant_filter_is_a_422_problem(client, query):
    assert_problem(client.get("/v1/tenants", params=query), 422, "validation-error")


def test_a_second_tenant_named_acme_is_a_409_and_changes_nothing(client, db_dump):
    created(client.post("/v1/tenants", json=ACME))
    before = db_dump()

    body = assert_problem(
        client.post("/v1/tenants", json={**ACME, "kind": "internal"}), 409, "conflict"
    )

    assert "acme" in body["detail"]
    assert db_dump() == before


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_a_tenant_name_that_is_not_a_slug_is_a_422_and_changes_nothing(client, db_dump, name):
    before = db_dump()

    body = assert_problem(
        client.post("/v1/tenants", json={**ACME, "name": name}), 422, "validation-error"
    )

    assert "/body/name" in body["detail"]
    assert db_dump() == before


@pytest.mark.parametrize(
    "change",
    [
        {"kind": "partner"},
        {"kind": None},
        {"qos_class": "Gold"},
        {"qos_class": "gold\n"},
        {"owner": "bob"},
    ],
    ids=repr,
)
def test_an_invalid_tenant_field_is_a_422_and_changes_nothing(client, db_dump, change):
    before = db_dump()

    assert_problem(client.post("/v1/tenants", json={**ACME, **change}), 422, "validation-error")
    assert db_dump() == before


def test_a_tenant_with_an_unknown_qos_class_is_refused_naming_the_class(client, db_dump):
    before = db_dump()

    response = client.post("/v1/tenants", json={**ACME, "qos_class": "platinum"})

    assert response.status_code in (404, 422)
    body = assert_problem(response, response.status_code)
    assert "platinum" in body["detail"]
    assert db_dump() == before


def test_an_unknown_tenant_is_a_404_problem_naming_it(client):
    body = assert_problem(client.get("/v1/tenants/initech"), 404, "not-found")

    assert "initech" in body["detail"]
