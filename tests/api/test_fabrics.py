"""/v1/fabrics: creation, lookup, names and P_Key ranges."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.builders import FakeClock, assert_problem, created, ok

IB_EAST = {
    "name": "ib-east",
    "kind": "infiniband",
    "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
}


def test_creating_a_fabric_returns_201_with_its_range_and_default_key_budget(client):
    body = created(client.post("/v1/fabrics", json=IB_EAST))

    assert body == {
        "name": "ib-east",
        "kind": "infiniband",
        "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
        "pkeys_per_port": 128,
        "virtual_guids": {"enabled": False, "ranges": [], "sm": "nvidia"},
        "created_at": "2026-03-01T12:00:00Z",
    }


def test_a_created_fabric_reads_back_with_the_same_fields(client):
    posted = created(client.post("/v1/fabrics", json=IB_EAST))

    read = ok(client.get("/v1/fabrics/ib-east"))

    # created_at is compared as an instant by the time-zone test below
    assert {**read, "created_at": None} == {**posted, "created_at": None}


def test_a_fabric_timestamp_reads_back_as_an_aware_utc_instant(client, clock: FakeClock):
    created(client.post("/v1/fabrics", json=IB_EAST))

    read = datetime.fromisoformat(ok(client.get("/v1/fabrics/ib-east"))["created_at"])

    assert read.tzinfo is not None, "timestamps must carry their time zone"
    assert read == clock.now


def test_a_second_fabric_with_the_same_name_is_a_409_conflict_and_changes_nothing(client, db_dump):
    created(client.post("/v1/fabrics", json=IB_EAST))
    before = db_dump()

    response = client.post(
        "/v1/fabrics", json={**IB_EAST, "pkey_range": {"first": "0x0001", "last": "0x0002"}}
    )

    body = assert_problem(response, 409, "conflict")
    assert "ib-east" in body["detail"]
    assert db_dump() == before


@pytest.mark.parametrize(
    "name",
    [
        "ib-east\n",
        "ib\neast",
        "ib;east",
        "ib:east",
        "ib=east",
        "ib,east",
        "ib east",
        "IB-EAST",
        "-ib-east",
        "1b-east",
        "",
        "a" * 64,
    ],
    ids=repr,
)
def test_a_fabric_name_that_is_not_a_slug_is_a_422_and_changes_nothing(client, db_dump, name):
    before = db_dump()

    response = client.post("/v1/fabrics", json={**IB_EAST, "name": name})

    body = assert_problem(response, 422, "validation-error")
    assert "/body/name" in body["detail"]
    assert db_dump() == before


@pytest.mark.parametrize(
    "pkey_range",
    [
        {"first": "0x0000", "last": "0x0010"},
        {"first": "0x0001", "last": "0x7fff"},
        {"first": "0x0001", "last": "0x8001"},
        {"first": "0x0001", "last": "0x10000"},
        {"first": "256", "last": "0x0200"},
        {"first": "0xzz", "last": "0x0200"},
        {"first": "0x0100", "last": "0x0200", "step": 1},
        {"first": 256, "last": 512},
    ],
    ids=repr,
)
def test_a_bad_pkey_range_is_a_422_and_changes_nothing(client, db_dump, pkey_range):
    before = db_dump()

    response = client.post("/v1/fabrics", json={**IB_EAST, "pkey_range": pkey_range})

    assert_problem(response, 422, "validation-error")
    assert db_dump() == before


def test_a_pkey_range_whose_first_key_is_above_its_last_is_a_422_naming_the_order(client, db_dump):
    before = db_dump()

    response = client.post(
        "/v1/fabrics", json={**IB_EAST, "pkey_range": {"first": "0x0200", "last": "0x0100"}}
    )

    body = assert_problem(response, 422, "validation-error")
    assert "first must not be above" in body["detail"]
    assert db_dump() == before


@pytest.mark.parametrize(
    "change",
    [
        {"kind": "roce"},
        {"kind": None},
        {"pkeys_per_port": 1},
        {"pkeys_per_port": "many"},
        {"colour": "red"},
    ],
    ids=repr,
)
def test_an_invalid_fabric_field_is_a_422_and_changes_nothing(client, db_dump, change):
    before = db_dump()

    assert_problem(client.post("/v1/fabrics", json={**IB_EAST, **change}), 422, "validation-error")
    assert db_dump() == before


def test_a_body_that_is_not_json_is_a_422_problem(client, db_dump):
    before = db_dump()

    response = client.post(
        "/v1/fabrics", content=b"{name: ib-east", headers={"content-type": "application/json"}
    )

    assert_problem(response, 422, "validation-error")
    assert db_dump() == before


def test_an_unknown_fabric_is_a_404_problem_naming_it(client):
    body = assert_problem(client.get("/v1/fabrics/ib-nowhere"), 404, "not-found")

    assert "ib-nowhere" in body["detail"]
