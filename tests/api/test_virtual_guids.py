"""Virtual GUIDs: the fabric setting, binding to the first tenant, the ledger and draining."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.builders import assert_problem, created, ok

FABRIC = "/v1/fabrics/ib-east"
RANGE = "0x0200000000000000-0x02000000000000ff"
VF = "0x0200000000000001"
SETTING = {"enabled": True, "ranges": [RANGE], "sm": "nvidia"}


def _enable(client: TestClient) -> dict[str, Any]:
    return ok(client.patch(FABRIC, json={"virtual_guids": SETTING}))


def _partition(client: TestClient, tenant: str, name: str = "vfs") -> dict[str, Any]:
    body = {"fabric": "ib-east", "name": name}
    return created(client.post(f"/v1/tenants/{tenant}/partitions", json=body))


def test_the_setting_is_off_by_default_and_reads_back_once_enabled(client, onboarded):
    assert ok(client.get(FABRIC))["virtual_guids"] == {
        "enabled": False,
        "ranges": [],
        "sm": "nvidia",
    }

    assert _enable(client)["virtual_guids"] == SETTING


def test_a_virtual_guid_binds_to_the_first_tenant_and_shows_in_the_ledger(client, onboarded):
    _enable(client)
    _partition(client, "acme")

    body = ok(client.post(f"/v1/tenants/acme/partitions/vfs/members/{VF}"))

    assert body["members"] == [{"guid": VF, "membership": "full", "kind": "virtual", "node": None}]
    ledger = ok(client.get(f"{FABRIC}/virtual-guids"))["data"]
    assert [(v["guid"], v["tenant"], v["state"], v["partitions"]) for v in ledger] == [
        (VF, "acme", "bound", ["vfs"])
    ]


def test_a_virtual_guid_bound_to_another_tenant_is_refused(client, onboarded, db_dump):
    _enable(client)
    _partition(client, "acme")
    _partition(client, "globex")
    ok(client.post(f"/v1/tenants/acme/partitions/vfs/members/{VF}"))
    before = db_dump()

    response = client.post(f"/v1/tenants/globex/partitions/vfs/members/{VF}")

    assert "acme" in assert_problem(response, 409, "conflict")["detail"]
    assert db_dump() == before


def test_a_guid_in_a_range_is_refused_while_virtual_guids_are_off(client, onboarded):
    _partition(client, "acme")

    assert_problem(client.post(f"/v1/tenants/acme/partitions/vfs/members/{VF}"), 422)


def test_a_left_virtual_guid_is_free_at_once_where_no_target_can_hold_it(client, onboarded):
    _enable(client)
    _partition(client, "acme")
    _partition(client, "globex")
    ok(client.post(f"/v1/tenants/acme/partitions/vfs/members/{VF}"))

    ok(client.delete(f"/v1/tenants/acme/partitions/vfs/members/{VF}"))

    assert ok(client.get(f"{FABRIC}/virtual-guids"))["data"] == []
    ok(client.post(f"/v1/tenants/globex/partitions/vfs/members/{VF}"))


def test_disabling_is_refused_while_the_ledger_holds_a_guid(client, onboarded, db_dump):
    _enable(client)
    _partition(client, "acme")
    ok(client.post(f"/v1/tenants/acme/partitions/vfs/members/{VF}"))
    before = db_dump()

    response = client.patch(FABRIC, json={"virtual_guids": {"enabled": False}})

    assert VF in assert_problem(response, 409, "conflict")["detail"]
    assert db_dump() == before


def test_bad_ranges_are_a_422(client, onboarded):
    for bad in ["0x02-0x01", "0x0-0x5", "02-03", "0x1", "0x1-0x" + "f" * 17]:
        body = {"virtual_guids": {"enabled": True, "ranges": [bad]}}
        assert_problem(client.patch(FABRIC, json=body), 422)


def test_the_verdict_shows_virtual_memberships_as_unobserved_and_renders_them(client, onboarded):
    _enable(client)
    _partition(client, "acme")
    ok(client.post(f"/v1/tenants/acme/partitions/vfs/members/{VF}"))

    verdict = ok(client.get(f"{FABRIC}/verification"))

    assert verdict["holds"] is True
    assert verdict["unobserved"] == [
        {
            "guid": VF,
            "partition": "0x0104",
            "name": "part_acme_vfs",
            "tenant": "acme",
            "membership": "full",
            "state": "unobserved",
        }
    ]
    conf = client.get(f"{FABRIC}/artifacts/opensm/partitions.conf").text
    assert "part_acme_vfs=0x0104, ipoib" in conf and f"    {VF}=full ;" in conf
    assert "virt_enabled 2" in client.get(f"{FABRIC}/artifacts/opensm/opensm.conf").text


def test_a_fabric_without_virtual_guids_has_no_unobserved_member(client, onboarded):
    assert "unobserved" not in ok(client.get(f"{FABRIC}/verification"))


def test_a_deployed_virtual_guid_drains_until_every_target_read_back_its_removal(client, onboarded):
    created(client.put(f"{FABRIC}/targets/sm-a", json={"kind": "opensm"}))
    _enable(client)
    _partition(client, "acme")
    _partition(client, "globex")
    ok(client.post(f"/v1/tenants/acme/partitions/vfs/members/{VF}"))
    _read_back(client)  # sm-a enforces the snapshot holding the GUID

    ok(client.delete(f"/v1/tenants/acme/partitions/vfs/members/{VF}"))

    (entry,) = ok(client.get(f"{FABRIC}/virtual-guids"))["data"]
    assert (entry["state"], entry["partitions"], entry["tenant"]) == ("draining", [], "acme")
    refused = client.post(f"/v1/tenants/globex/partitions/vfs/members/{VF}")
    assert "draining" in assert_problem(refused, 409, "conflict")["detail"]
    _read_back(client)
    assert ok(client.get(f"{FABRIC}/virtual-guids"))["data"] == []
    ok(client.post(f"/v1/tenants/globex/partitions/vfs/members/{VF}"))


def _read_back(client) -> None:
    """The master fetches the signed manifest, applies it and reads it back."""
    ok(client.get(f"{FABRIC}/signed-manifest"))
    digest = ok(client.get(f"{FABRIC}/sync"))["desired"]
    body = {"state": "applied", "digest": digest, "role": "master", "observed_digest": digest}
    response = client.post(f"{FABRIC}/targets/sm-a/reports", json=body)
    assert response.status_code in (200, 201), response.text


def test_a_tenant_admin_refused_a_held_guid_is_not_told_which_tenant_holds_it(client, onboarded):
    from tests.api.test_peerings import bearer

    _enable(client)
    _partition(client, "acme")
    _partition(client, "globex")
    ok(client.post(f"/v1/tenants/acme/partitions/vfs/members/{VF}"))
    globex = bearer(client, "tenant-admin", "globex")

    for dry_run in ("false", "true"):
        response = client.post(
            f"/v1/tenants/globex/partitions/vfs/members/{VF}?dry_run={dry_run}", headers=globex
        )
        detail = assert_problem(response, 409, "conflict")["detail"]
        assert "another tenant" in detail and "acme" not in response.text


def test_overlapping_ranges_are_a_422_and_a_range_holding_a_port_a_409(client, onboarded, db_dump):
    before = db_dump()
    overlapping = [RANGE, "0x0200000000000080-0x0200000000000100"]
    for ranges in (overlapping, [RANGE, RANGE], ["0x10000000000000000-0x10000000000000001"]):
        body = {"virtual_guids": {"enabled": True, "ranges": ranges}}
        assert_problem(client.patch(FABRIC, json=body), 422)

    body = {"virtual_guids": {"enabled": True, "ranges": ["0x0000000000100000-0x00000000001000ff"]}}
    detail = assert_problem(client.patch(FABRIC, json=body), 409, "conflict")["detail"]

    assert "0x0000000000100001" in detail
    assert db_dump() == before
