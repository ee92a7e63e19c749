"""Accepted peerings in isolation proofs (issue 13, item 4): intended edges, named to the peer.

tests/policies/policy_fabrics.py's fabric with int-a (gpu04) and int-b (gpu05) peered: on
InfiniBand the shared partition peer_int-a_int-b (0x0106) holds both tenants' ports as full
members; on RoCE each VRF imports the other's RT (int-a: L3VNI 50003, int-b: 50004). A tenant
view names the peer and no other tenant; `check_claims` refuses a proof that hides a peering or
claims one the artifacts do not show, and checks a proof without ``peerings`` as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from policies.errors import InvalidValueError
from policies.evidence.peering_claims import peering_claims
from policies.evidence.proofs import check_claims
from policies.infiniband.model import IbSnapshot, Partition, format_guid
from policies.model import Owner
from policies.roce.model import RoceSnapshot
from tests.policies import policy_fabrics as fab
from tests.policies.test_proof_policy import Statement, guids, proof, tampered

PEERED = (fab.INT_PEERING,)
IB_PEERING = [{"peer": "tenant:int-b", "segment": "0x0106"}]
ROCE_PEERING = [{"peer": "tenant:int-b", "segment": "50004"}]
BUILDS: dict[str, tuple[Callable[..., IbSnapshot | RoceSnapshot], list[dict[str, str]]]] = {
    "infiniband": (fab.ib_snapshot, IB_PEERING),
    "roce": (fab.roce_snapshot, ROCE_PEERING),
}
VIEWS = ("full", "tenant")


def refused(statement: Statement, files: dict[str, bytes], reason: str) -> None:
    with pytest.raises(InvalidValueError, match=reason):
        check_claims(statement, files)


# --- claims ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("technology", BUILDS)
def test_a_peered_tenants_proof_claims_the_peering_and_verifies(technology: str, view: str):
    build, expected = BUILDS[technology]
    statement, files = proof(build(peerings=PEERED), "int-a", view)
    predicate = statement["predicate"]

    assert predicate["peerings"] == expected
    [segment] = [e["segment"] for e in expected]
    assert {"owner": "tenant:int-b", "segment": segment} in predicate["reachable"]
    assert ("tenant:int-b", segment) in check_claims(statement, files)


@pytest.mark.parametrize("technology", BUILDS)
def test_the_peer_claims_the_same_peering_the_other_way(technology: str):
    build, _ = BUILDS[technology]
    statement, files = proof(build(peerings=PEERED), "int-b", "tenant")

    segment = "0x0106" if technology == "infiniband" else "50003"
    assert statement["predicate"]["peerings"] == [{"peer": "tenant:int-a", "segment": segment}]
    assert ("tenant:int-a", segment) in check_claims(statement, files)


@pytest.mark.parametrize("technology", BUILDS)
def test_a_tenant_view_names_its_peer_and_no_other_tenant(technology: str):
    build, _ = BUILDS[technology]
    statement, _ = proof(build(peerings=PEERED), "int-a", "tenant")

    text = json.dumps(statement["predicate"])
    assert "int-b" in text
    assert "ext-a" not in text
    assert "ext-b" not in text


def test_an_infiniband_tenant_view_lists_the_peers_ports_in_the_shared_partition():
    statement, _ = proof(fab.ib_snapshot(peerings=PEERED), "int-a", "tenant")
    predicate = statement["predicate"]

    [shared] = [s for s in predicate["segments"] if s["segment"] == "0x0106"]
    peer_ports = set(guids("gpu05"))
    assert {m["endpoint"] for m in shared["members"]} == set(guids("gpu04")) | peer_ports
    assert {m["membership"] for m in shared["members"]} == {"full"}
    assert shared["others"] == {"count": 0, "membership": "limited"}
    assert {g for g, o in predicate["ownership"].items() if o == "tenant:int-b"} == peer_ports


@pytest.mark.parametrize("technology", BUILDS)
def test_other_tenants_views_do_not_name_the_peered_tenants(technology: str):
    build, _ = BUILDS[technology]
    statement, files = proof(build(peerings=PEERED), "ext-a", "tenant")

    assert statement["predicate"]["peerings"] == []
    assert "int-" not in json.dumps(statement["predicate"])
    check_claims(statement, files)


@pytest.mark.parametrize("technology", BUILDS)
def test_a_tenant_without_peerings_claims_none(technology: str):
    build, _ = BUILDS[technology]

    assert peering_claims(build(), "int-a") == {"peerings": []}


def test_an_infiniband_peering_whose_peer_holds_no_port_is_claimed_without_reach():
    holders = {n: o for n, o in fab.HOLDERS.items() if o != Owner.tenant("int-b")}
    statement, files = proof(fab.ib_snapshot(holders=holders, peerings=PEERED), "int-a", "full")

    assert statement["predicate"]["peerings"] == IB_PEERING
    assert not {r["owner"] for r in statement["predicate"]["reachable"]} & {"tenant:int-b"}
    check_claims(statement, files)


# --- proofs issued before the claim ---------------------------------------------------------------


@pytest.mark.parametrize("technology", BUILDS)
def test_a_proof_without_peerings_verifies_as_before(technology: str):
    build, _ = BUILDS[technology]
    for snapshot in (build(), build(peerings=PEERED)):
        statement, files = proof(snapshot, "int-a", "full")
        older = tampered(statement, lambda p: p.pop("peerings"))

        assert check_claims(older, files) == check_claims(statement, files)


@pytest.mark.parametrize("technology", BUILDS)
def test_a_tenant_view_without_peerings_may_not_name_the_peer(technology: str):
    build, _ = BUILDS[technology]
    statement, files = proof(build(peerings=PEERED), "int-a", "tenant")

    refused(
        tampered(statement, lambda p: p.pop("peerings")),
        files,
        "a tenant view names other owners: tenant:int-b",
    )


# --- tampering ------------------------------------------------------------------------------------


@pytest.mark.parametrize("technology", BUILDS)
def test_a_proof_hiding_its_peering_fails(technology: str):
    build, expected = BUILDS[technology]
    statement, files = proof(build(peerings=PEERED), "int-a", "full")

    segment = expected[0]["segment"]
    refused(
        tampered(statement, lambda p: p.update(peerings=[])),
        files,
        f"reaches tenant:int-b@{segment} through no claimed peering",
    )


def test_an_infiniband_proof_hiding_a_peering_partition_without_reach_fails():
    holders = {n: o for n, o in fab.HOLDERS.items() if o != Owner.tenant("int-b")}
    statement, files = proof(fab.ib_snapshot(holders=holders, peerings=PEERED), "int-a", "full")

    refused(
        tampered(statement, lambda p: p.update(peerings=[])),
        files,
        r"peering partition peer_int-a_int-b \(0x0106\), which the proof does not claim",
    )


def test_an_infiniband_proof_claiming_a_peering_the_file_lacks_fails():
    statement, files = proof(fab.ib_snapshot(), "int-a", "full")

    refused(
        tampered(statement, lambda p: p.update(peerings=IB_PEERING)),
        files,
        "has no partition peer_int-a_int-b=0x0106",
    )


def test_an_infiniband_peering_claimed_at_another_tenants_partition_fails():
    statement, files = proof(fab.ib_snapshot(peerings=PEERED), "int-a", "full")

    # 0x0103 is int-a's own partition: a real P_Key, not the peering's.
    refused(
        tampered(
            statement,
            lambda p: p.update(
                peerings=[*IB_PEERING, {"peer": "tenant:int-b", "segment": "0x0103"}]
            ),
        ),
        files,
        "has no partition peer_int-a_int-b=0x0103",
    )


def test_an_infiniband_peering_with_a_stranger_named_in_a_tenant_view_fails():
    statement, files = proof(fab.ib_snapshot(peerings=PEERED), "int-a", "tenant")

    # Claiming ext-b as a peer would let the view name it; the file has no such partition.
    forged = [*IB_PEERING, {"peer": "tenant:ext-b", "segment": "0x0102"}]
    refused(
        tampered(statement, lambda p: p.update(peerings=forged)),
        files,
        "has no partition peer_ext-b_int-a=0x0102",
    )


def test_an_infiniband_peering_partition_with_a_limited_member_fails():
    snapshot = fab.ib_snapshot(peerings=PEERED)
    [peer_port, _] = guids("gpu05")

    def limit(partition: Partition) -> Partition:
        members = tuple(
            replace(m, full=False) if format_guid(m.guid) == peer_port else m
            for m in partition.members
        )
        return replace(partition, members=members)

    partitions = tuple(limit(p) if p.peering else p for p in snapshot.partitions)
    # What the file permits is a partition of full members: a limited one is no peering.
    statement, files = proof(replace(snapshot, partitions=partitions), "int-a", "full")

    refused(statement, files, f"members are not exactly .* limited: \\['{peer_port}'\\]")


def test_a_roce_proof_claiming_a_peering_its_vrf_does_not_import_fails():
    peered, _ = proof(fab.roce_snapshot(peerings=PEERED), "int-a", "full")
    statement, files = proof(fab.roce_snapshot(), "int-a", "full")
    peer_vrf = peered["predicate"]["vrfs"]["tenant:int-b"]

    def claim(predicate: dict[str, Any]) -> None:
        predicate["vrfs"]["tenant:int-b"] = peer_vrf
        predicate["peerings"] = ROCE_PEERING

    refused(tampered(statement, claim), files, "does not import 65000:50004")


def test_a_roce_peering_claimed_at_another_vni_fails():
    statement, files = proof(fab.roce_snapshot(peerings=PEERED), "int-a", "full")

    refused(
        tampered(
            statement,
            lambda p: p.update(
                peerings=[*ROCE_PEERING, {"peer": "tenant:int-b", "segment": "50001"}]
            ),
        ),
        files,
        "no VRF Vrf50001",
    )


@pytest.mark.parametrize(
    ("peerings", "reason"),
    [
        ({"peer": "tenant:int-b"}, "'peerings' is not a list"),
        (["tenant:int-b"], "not {'peer', 'segment'}"),
        ([{"peer": "tenant:int-a", "segment": "0x0106"}], "is not another tenant"),
        ([{"peer": "service:storage", "segment": "0x0100"}], "is not another tenant"),
        ([{"peer": "tenant:int-b", "segment": 262}], "is not a string"),
        ([IB_PEERING[0], IB_PEERING[0]], "lists a peering twice"),
        ([IB_PEERING[0], {"peer": "tenant:int-b", "segment": "0x106"}], "is not a P_Key"),
    ],
)
def test_a_malformed_peering_claim_fails(peerings: Any, reason: str):
    statement, files = proof(fab.ib_snapshot(peerings=PEERED), "int-a", "full")

    refused(tampered(statement, lambda p: p.update(peerings=peerings)), files, reason)
