"""RoCE observations through the API: `POST /v1/fabrics/{fabric}/observations` with `kind` roce.

The body is what ``isofabric collect roce`` prints (cli/collect_roce.py
`observation_document`), built here from the leaf's rendered config_db.json.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cli.collect_roce import observation_document
from policies.roce.observed import leaf_state
from tests.builders import RoceOnboarded, assert_problem, ok

OBSERVATIONS = "/v1/fabrics/roce-west/observations"


def rendered_document(client: TestClient, leaf: str = "leaf01") -> dict[str, Any]:
    config_db = ok(client.get(f"/v1/fabrics/roce-west/artifacts/sonic/{leaf}/config_db.json"))
    return observation_document(leaf, leaf_state(config_db), None)


def test_a_leaf_that_reads_back_as_rendered_is_in_sync(
    client, roce_onboarded: RoceOnboarded, db_dump
) -> None:
    def state() -> dict[str, Any]:
        # On PostgreSQL rendered artifacts land in the shared read cache: derived, not state.
        return {table: rows for table, rows in db_dump().items() if table != "cached_read"}

    before = state()
    verdict = ok(client.get("/v1/fabrics/roce-west/verification"))

    report = ok(client.post(OBSERVATIONS, json=rendered_document(client)))

    assert report["snapshot_digest"] == verdict["snapshot_digest"]
    assert (report["leaf"], report["in_sync"], report["holds"]) == ("leaf01", True, True)
    assert report["drift"] == report["counterexamples"] == []
    assert report["frr_observed"] is False
    assert state() == before


def test_a_port_in_another_tenants_vlan_is_drift_and_a_violation(
    client, roce_onboarded: RoceOnboarded
) -> None:
    document = rendered_document(client)
    acme = roce_onboarded.segments["acme"]
    globex = f"Vlan{roce_onboarded.segments['globex']['vlan']}"
    intruder = min(p for p, vlans in document["vlan_members"].items() if globex in vlans)
    document["vlan_members"][intruder].append(f"Vlan{acme['vlan']}")

    report = ok(client.post(OBSERVATIONS, json=document))

    assert [(d["code"], d["subject"], d["owner"]) for d in report["drift"]] == [
        ("vlan-member-unexpected", intruder, "tenant:globex")
    ]
    assert report["holds"] is False and report["in_sync"] is False
    [example] = report["counterexamples"]
    assert example["rule"] == "cross-tenant-reachability"
    assert example["partition"] == str(acme["l2vni"])


def test_a_roce_observation_of_an_infiniband_fabric_is_a_422(client, onboarded) -> None:
    document = observation_document("leaf01", leaf_state({}), None)

    body = assert_problem(client.post("/v1/fabrics/ib-east/observations", json=document), 422)

    assert "RoCE observations apply to RoCE fabrics" in body["detail"]


def test_a_leaf_the_fabric_lacks_is_a_422(client, roce_onboarded) -> None:
    document = {**rendered_document(client), "leaf": "spine01"}

    assert (
        "leaf01, leaf02" in assert_problem(client.post(OBSERVATIONS, json=document), 422)["detail"]
    )


# VXLAN VNIs are 24 bits: 2**24 is one too many.
TOO_BIG_VNI = {"vni": 2**24, "layer": "L2", "import_rts": [], "export_rts": []}


@pytest.mark.parametrize(
    ("member", "value", "pointer"),
    [
        ("frr", {"vnis": [TOO_BIG_VNI], "vrf_imports": {}}, "/body/frr/vnis/0/vni"),
        ("vrfs", {"Vrf1": "50001"}, "/body/vrfs/Vrf1"),
        ("leaf", "Leaf 01", "/body/leaf"),
    ],
)
def test_a_malformed_document_is_a_422_naming_the_member(
    client, roce_onboarded, member, value, pointer
) -> None:
    document = {**rendered_document(client), member: value}

    body = assert_problem(client.post(OBSERVATIONS, json=json.loads(json.dumps(document))), 422)

    assert pointer in {error["pointer"] for error in body["errors"]}
