"""A tenant's several InfiniBand partitions through the API: create, fill, read, delete, refuse.

On SQLite alone (tests/api/conftest.py): the use cases run on both backends in
tests/tenancy/test_partitions_property.py and the migration test.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient

from tests.builders import (
    PORT_GUIDS,
    TENANT_PKEYS,
    assert_problem,
    created,
    ok,
    partition_members,
    uow_partitions_conf,
)

ACME = "/v1/tenants/acme/partitions"
ACME_PORTS = PORT_GUIDS["gpu0001"] + PORT_GUIDS["gpu0002"]
GLOBEX_PORT = PORT_GUIDS["gpu0005"][0]


def _create(client: TestClient, name: str = "jobs", **extra: Any) -> httpx2.Response:
    return client.post(ACME, json={"fabric": "ib-east", "name": name, **extra})


def test_a_new_partition_takes_the_lowest_free_key_and_starts_empty(client, onboarded):
    body = created(_create(client))

    assert (body["name"], body["pkey"], body["members"]) == ("jobs", "0x0104", [])
    assert (body["ipoib"], body["index0"], body["qos_class"]) == (True, False, "gold")


def test_the_default_partition_is_listed_first_with_the_tenants_ports(client, onboarded):
    created(_create(client))

    listed = ok(client.get(ACME))["data"]

    assert [(p["name"], p["pkey"]) for p in listed] == [
        ("default", TENANT_PKEYS["acme"]),
        ("jobs", "0x0104"),
    ]
    assert [m["guid"] for m in listed[0]["members"]] == sorted(ACME_PORTS)


def test_members_put_is_the_exact_set_and_reaches_partitions_conf(client, onboarded, uow):
    created(_create(client, pkey="0x0200"))
    members = [{"guid": ACME_PORTS[0]}, {"guid": ACME_PORTS[2], "membership": "limited"}]

    body = ok(client.put(f"{ACME}/jobs/members", json={"members": members}))

    assert [(m["guid"], m["membership"]) for m in body["members"]] == [
        (ACME_PORTS[0], "full"),
        (ACME_PORTS[2], "limited"),
    ]
    conf = partition_members(uow_partitions_conf(uow), "part_acme_jobs")
    assert f"{ACME_PORTS[0]}=full" in conf and f"{ACME_PORTS[2]}=limited" in conf
    body = ok(client.put(f"{ACME}/jobs/members", json={"members": members[1:]}))
    assert [m["guid"] for m in body["members"]] == [ACME_PORTS[2]]


def test_a_port_of_another_tenants_node_is_refused_and_changes_nothing(client, onboarded, db_dump):
    created(_create(client))
    before = db_dump()

    response = client.put(f"{ACME}/jobs/members", json={"members": [{"guid": GLOBEX_PORT}]})

    assert_problem(response, 409, "conflict")
    assert db_dump() == before


def test_a_guid_that_is_no_port_and_in_no_range_is_a_422(client, onboarded, db_dump):
    created(_create(client))
    before = db_dump()

    response = client.post(f"{ACME}/jobs/members/0x0200000000000001")

    assert_problem(response, 422)
    assert db_dump() == before


@pytest.mark.parametrize("pkey", ["0x0000", "0x7fff", "0x8105", "0x0050", "0x10000", "105"])
def test_a_pkey_outside_the_pool_or_invalid_is_refused(client, onboarded, db_dump, pkey):
    before = db_dump()

    response = _create(client, pkey=pkey)

    assert response.status_code in (409, 422), response.text
    assert db_dump() == before


def test_a_pkey_held_by_another_owner_is_a_409(client, onboarded, db_dump):
    before = db_dump()

    response = _create(client, pkey=TENANT_PKEYS["globex"])

    assert "held" in assert_problem(response, 409, "conflict")["detail"]
    assert db_dump() == before


@pytest.mark.parametrize("name", ["Jobs", "jobs_1", "", "default", "j" * 64, "1jobs"])
def test_names_that_are_not_slugs_or_taken_are_refused(client, onboarded, name):
    response = _create(client, name=name)

    assert response.status_code in (409, 422), response.text


def test_index0_on_two_partitions_of_one_port_is_refused(client, onboarded, db_dump):
    for name in ("a", "b"):
        created(_create(client, name=name, index0=True))
    ok(client.post(f"{ACME}/a/members/{ACME_PORTS[0]}"))
    before = db_dump()

    response = client.post(f"{ACME}/b/members/{ACME_PORTS[0]}")

    body = assert_problem(response, 409)
    assert "index0-conflict" in response.text, body
    assert db_dump() == before


def test_a_32nd_partition_is_refused_under_the_default_policy(client, onboarded, db_dump):
    for number in range(30):  # with the default partition: 31
        created(_create(client, name=f"p{number}"))
    before = db_dump()

    response = _create(client, name="one-too-many")

    assert "max_partitions" in assert_problem(response, 409, "conflict")["detail"]
    assert db_dump() == before


def test_deleting_a_partition_with_members_quarantines_its_key(client, onboarded):
    created(_create(client, pkey="0x0300"))
    ok(client.post(f"{ACME}/jobs/members/{ACME_PORTS[0]}"))

    assert client.delete(f"{ACME}/jobs").status_code == 204

    assert_problem(client.get(f"{ACME}/jobs"), 404)
    refused = client.post(
        "/v1/tenants/globex/partitions", json={"fabric": "ib-east", "name": "x", "pkey": "0x0300"}
    )
    assert "quarantined" in assert_problem(refused, 409)["detail"]


def test_the_default_partitions_members_cannot_be_set(client, onboarded):
    response = client.put(f"{ACME}/default/members", json={"members": []})

    assert "allocations" in assert_problem(response, 409, "conflict")["detail"]


def test_releasing_a_node_takes_its_ports_out_of_the_tenants_partitions(client, onboarded):
    created(_create(client))
    ok(client.post(f"{ACME}/jobs/members/{ACME_PORTS[0]}"))
    allocation = onboarded.allocation_ids["acme"]

    assert client.delete(f"/v1/tenants/acme/allocations/{allocation}").status_code == 204

    assert ok(client.get(f"{ACME}/jobs"))["members"] == []
    assert [p["name"] for p in ok(client.get(ACME))["data"]] == ["jobs"]


def test_a_change_set_creates_fills_and_deletes_partitions(client, onboarded):
    operations = [
        {"op": "create_partition", "tenant": "acme", "fabric": "ib-east", "name": "jobs"},
        {
            "op": "set_members",
            "tenant": "acme",
            "name": "jobs",
            "members": [{"guid": ACME_PORTS[1]}],
        },
    ]

    body = ok(client.post("/v1/changesets", json={"operations": operations}))

    assert [r["op"] for r in body["results"]] == ["create_partition", "set_members"]
    assert [m["guid"] for m in body["results"][1]["result"]["members"]] == [ACME_PORTS[1]]
    deleting = [{"op": "delete_partition", "tenant": "acme", "name": "jobs"}]
    assert (
        ok(client.post("/v1/changesets", json={"operations": deleting}))["results"][0]["result"]
        is None
    )
    assert_problem(client.get(f"{ACME}/jobs"), 404)


def test_a_dry_run_changes_nothing(client, onboarded, db_dump):
    before = db_dump()

    response = client.post(f"{ACME}?dry_run=true", json={"fabric": "ib-east", "name": "jobs"})

    assert response.status_code in (200, 201), response.text
    assert db_dump() == before


def test_a_roce_fabric_answers_409(client, onboarded):
    from tests.builders import api_create_roce_fabric

    api_create_roce_fabric(client)

    response = client.post(ACME, json={"fabric": "roce-west", "name": "jobs"})

    assert "RoCE" in assert_problem(response, 409, "conflict")["detail"]


def test_offboarding_deletes_every_partition_and_quarantines_their_keys(client, onboarded):
    created(_create(client, pkey="0x0300"))
    ok(client.post(f"{ACME}/jobs/members/{ACME_PORTS[0]}"))

    assert client.delete("/v1/tenants/acme").status_code in (200, 204)

    assert ok(client.get(ACME))["data"] == []
    conf = partitions_conf(client)
    assert "part_acme_jobs" not in conf and "tenant_acme" not in conf
    refused = client.post(
        "/v1/tenants/globex/partitions", json={"fabric": "ib-east", "name": "x", "pkey": "0x0300"}
    )
    assert "quarantined" in assert_problem(refused, 409)["detail"]


def partitions_conf(client: TestClient) -> str:
    return str(client.get("/v1/fabrics/ib-east/artifacts/opensm/partitions.conf").text)


def test_a_node_hour_is_billed_once_whatever_partitions_its_ports_are_in(client, clock, onboarded):
    for name in ("a", "b"):
        created(_create(client, name=name))
        members = [{"guid": guid} for guid in ACME_PORTS]
        ok(client.put(f"{ACME}/{name}/members", json={"members": members}))
    clock.advance(3600)

    records = ok(
        client.get("/v1/usage/records", params={"from": "2026-03-01T00:00:00Z", "tenant": "acme"})
    )["data"]

    (capacity,) = [r for r in records if r["resource_type"] == "fabric-capacity"]
    assert (capacity["node_seconds"], capacity["partition"]) == (2 * 3600, "default")


def test_an_owner_takes_its_own_quarantined_key_back(client, onboarded):
    created(_create(client, pkey="0x0300"))
    assert client.delete(f"{ACME}/jobs").status_code == 204

    body = created(_create(client, name="again", pkey="0x0300"))

    assert body["pkey"] == "0x0300"
    assert ok(client.get(f"{ACME}/again"))["pkey"] == "0x0300"


def test_members_are_ports_of_the_partitions_own_fabric_when_another_has_the_same_guids(
    client, onboarded
):
    from tests.builders import api_create_fabric

    api_create_fabric(client, "ib-north")  # the same capture: the same port GUIDs
    created(_create(client))
    ok(client.put(f"{ACME}/jobs/members", json={"members": [{"guid": ACME_PORTS[0]}]}))
    ok(client.post(f"{ACME}/jobs/members/{ACME_PORTS[2]}"))  # gpu0002: free on ib-north
    body = {"fabric": "ib-north", "nodes": ["gpu0001"]}
    north = created(client.post("/v1/tenants/acme/allocations", json=body))["id"]

    assert client.delete(f"/v1/tenants/acme/allocations/{north}").status_code == 204

    members = ok(client.get(f"{ACME}/jobs", params={"fabric": "ib-east"}))["members"]
    assert [m["guid"] for m in members] == [ACME_PORTS[0], ACME_PORTS[2]]
    assert f"{ACME_PORTS[0]}=full" in partition_members(partitions_conf(client), "part_acme_jobs")


def test_the_listing_pages_in_its_order(client, onboarded):
    from tests.builders import walk_pages

    for name in ("c", "a", "b"):
        created(_create(client, name=name))

    pages = walk_pages(client, ACME, 2)

    assert [p["name"] for page in pages for p in page["data"]] == ["default", "a", "b", "c"]
    assert ok(client.get(ACME, params={"limit": 2}))["count"] == 4


def test_a_guid_in_the_path_is_read_as_the_bodys_are(client, onboarded, db_dump):
    created(_create(client))
    ok(client.post(f"{ACME}/jobs/members/{ACME_PORTS[0]}"))
    before = db_dump()

    for zeros_or_ones in ("0x0", "0xffffffffffffffff"):
        assert_problem(client.post(f"{ACME}/jobs/members/{zeros_or_ones}"), 422)
    assert db_dump() == before
    short = hex(int(ACME_PORTS[0], 16))  # 0x100003: the same GUID without leading zeros
    assert ok(client.delete(f"{ACME}/jobs/members/{short}"))["members"] == []
