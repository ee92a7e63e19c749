"""The policy in isolation proofs (issue 13): version and fingerprint, the tenant's kind and
isolation, and the dedicated-leaf topology, checked against the artifacts by `check_claims`.

The fabrics are tests/policies/policy_fabrics.py's: ext-a (external, on dedicated leaves) holds
gpu01 and gpu02 on leaf group 1 (leaf-g1-r0 and leaf-g1-r1), where storage (stor01, on r0) and
the free gpu03 are too; int-a (internal) is on segments.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.artifacts import Artifact
from policies.errors import InvalidValueError
from policies.evidence.claims import claims_for
from policies.evidence.policy_claims import policy_claims
from policies.evidence.proofs import build_statement, check_claims
from policies.infiniband.model import IbSnapshot, format_guid
from policies.infiniband.render import PARTITIONS_PATH, render_partitions_conf
from policies.infiniband.verify import verify_isolation
from policies.model import Owner
from policies.policy import DEFAULT_POLICY, TenantKind
from policies.roce.model import RoceSnapshot
from policies.roce.render_frr import render_frr_conf
from policies.roce.render_sonic import render_config_db_json
from policies.roce.verify import verify_roce
from policies.verdict import Rule
from tests.policies.policy_fabrics import (
    HOLDERS,
    LEAVES,
    POLICY,
    ib_guid,
    ib_snapshot,
    roce_snapshot,
)

Statement = dict[str, Any]
Files = dict[str, bytes]


def artifacts(snapshot: IbSnapshot | RoceSnapshot) -> tuple[Artifact, ...]:
    if isinstance(snapshot, IbSnapshot):
        return (Artifact(PARTITIONS_PATH, render_partitions_conf(snapshot).encode()),)
    return tuple(
        Artifact(path, text.encode())
        for leaf in LEAVES
        for path, text in (
            (f"sonic/{leaf}/config_db.json", render_config_db_json(snapshot, leaf)),
            (f"frr/{leaf}/frr.conf", render_frr_conf(snapshot, leaf)),
        )
    )


def proof(
    snapshot: IbSnapshot | RoceSnapshot, tenant: str = "ext-a", view: str = "full"
) -> tuple[Statement, Files]:
    """A statement as the service builds it (signature aside) and the files it covers."""
    files = artifacts(snapshot)
    subjects, claims = claims_for(snapshot, tenant, files, view)  # type: ignore[arg-type]
    kind = "roce" if isinstance(snapshot, RoceSnapshot) else "infiniband"
    predicate = {"tenant": tenant, "kind": kind, "verdict": {"holds": True}} | claims
    return build_statement(subjects, predicate), {f.path: f.content for f in files}


def tampered(statement: Statement, change: Callable[[dict[str, Any]], None]) -> Statement:
    """The statement with its predicate changed (as if re-signed by a key the verifier trusts)."""
    forged = copy.deepcopy(statement)
    change(forged["predicate"])
    return forged


def leaf(predicate: dict[str, Any], name: str) -> dict[str, Any]:
    return next(e for e in predicate["dedicated_leaf"]["leaves"] if e["leaf"] == name)


def guids(node: str) -> list[str]:
    return [format_guid(ib_guid(node, hca)) for hca in (0, 1)]


SNAPSHOTS: dict[str, Callable[[], IbSnapshot | RoceSnapshot]] = {
    "infiniband": ib_snapshot,
    "roce": roce_snapshot,
}


# --- claims -------------------------------------------------------------------------------------


def test_a_dedicated_tenants_proof_carries_the_policy_and_its_leaves_with_others_counted():
    statement, _ = proof(ib_snapshot())
    predicate = statement["predicate"]

    assert predicate["policy"] == {
        "version": 3,
        "fingerprint": POLICY.fingerprint,
        "tenant_kind": "external",
        "isolation": "dedicated_leaf",
    }
    gpu01, gpu02 = guids("gpu01"), guids("gpu02")
    assert predicate["dedicated_leaf"] == {
        "holds": True,
        "leaves": [
            {
                "leaf": "leaf-g1-r0",
                "endpoints": [gpu01[0], gpu02[0]],
                "others": {"tenants": 0, "services": 1, "unassigned": 1, "management": 0},
            },
            {
                "leaf": "leaf-g1-r1",
                "endpoints": [gpu01[1], gpu02[1]],
                "others": {"tenants": 0, "services": 0, "unassigned": 1, "management": 0},
            },
        ],
        "uncabled": [],
    }


def test_a_management_host_on_the_leaf_is_counted_as_management():
    statement, _ = proof(ib_snapshot(), tenant="ext-b")

    r0 = leaf(statement["predicate"], "leaf-g3-r0")
    assert r0["others"] == {"tenants": 0, "services": 0, "unassigned": 1, "management": 1}


def test_a_roce_proof_lists_the_tenants_switch_ports_leaf_by_leaf():
    statement, _ = proof(roce_snapshot())

    topology = statement["predicate"]["dedicated_leaf"]
    assert [(e["leaf"], e["endpoints"]) for e in topology["leaves"]] == [
        ("leaf-g1-r0", ["leaf-g1-r0:Ethernet0", "leaf-g1-r0:Ethernet8"]),
        ("leaf-g1-r1", ["leaf-g1-r1:Ethernet0", "leaf-g1-r1:Ethernet8"]),
    ]
    assert topology["holds"] is True


def test_a_segment_tenants_proof_carries_the_policy_and_no_topology():
    statement, files = proof(ib_snapshot(), tenant="int-a")
    predicate = statement["predicate"]

    assert predicate["policy"]["tenant_kind"] == "internal"
    assert predicate["policy"]["isolation"] == "segment"
    assert "dedicated_leaf" not in predicate
    assert check_claims(statement, files)


def test_without_the_tenants_facts_the_proof_states_the_version_only_unless_told_the_kind():
    snapshot = ib_snapshot(tenants=())

    assert policy_claims(snapshot, "ext-a") == {
        "policy": {"version": 3, "fingerprint": POLICY.fingerprint}
    }
    told = policy_claims(snapshot, "ext-a", TenantKind.EXTERNAL)
    assert told["policy"]["isolation"] == "dedicated_leaf"
    assert told["dedicated_leaf"]["holds"] is True


def test_the_default_policy_is_stated_as_version_0_on_segments():
    claims = policy_claims(ib_snapshot(policy=DEFAULT_POLICY), "ext-a")

    assert claims == {
        "policy": {
            "version": 0,
            "fingerprint": DEFAULT_POLICY.fingerprint,
            "tenant_kind": "external",
            "isolation": "segment",
        }
    }


def test_a_shared_leaf_is_counted_and_never_named_and_the_claim_does_not_hold():
    shared = ib_snapshot(holders={**HOLDERS, "gpu03": Owner.tenant("int-a")})

    claims = policy_claims(shared, "ext-a")

    topology = claims["dedicated_leaf"]
    assert topology["holds"] is False
    assert [e["others"]["tenants"] for e in topology["leaves"]] == [1, 1]
    assert "int-a" not in json.dumps(topology)
    assert all(guid not in json.dumps(topology) for guid in guids("gpu03"))


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["gpu03", "gpu05", "gpu06", "gpu08"]),
        st.sampled_from(["ext-a", "ext-b", "int-a", "int-b"]),
    )
)
def test_the_claim_holds_iff_the_verifier_finds_no_shared_leaf_of_the_tenant(extra):
    snapshot = ib_snapshot(holders={**HOLDERS, **{n: Owner.tenant(t) for n, t in extra.items()}})
    refuted = {
        owner.name
        for c in verify_isolation(snapshot).counterexamples
        if c.rule is Rule.DEDICATED_LEAF
        for owner in (c.a.owner, c.b.owner)  # type: ignore[union-attr]
    }

    for tenant in ("ext-a", "ext-b"):
        assert policy_claims(snapshot, tenant)["dedicated_leaf"]["holds"] is (tenant not in refuted)


# --- offline check ------------------------------------------------------------------------------


@pytest.mark.parametrize("technology", ["infiniband", "roce"])
@pytest.mark.parametrize("view", ["full", "tenant"])
def test_true_policy_claims_verify(technology, view):
    snapshot = SNAPSHOTS[technology]()
    verdict = (
        verify_roce(snapshot) if isinstance(snapshot, RoceSnapshot) else verify_isolation(snapshot)
    )
    assert verdict.holds

    statement, files = proof(snapshot, view=view)

    assert check_claims(statement, files)


@pytest.mark.parametrize("technology", ["infiniband", "roce"])
def test_a_proof_issued_before_policies_still_verifies(technology):
    statement, files = proof(SNAPSHOTS[technology]())

    def before_policies(predicate: dict[str, Any]) -> None:
        del predicate["policy"], predicate["dedicated_leaf"]

    assert check_claims(tampered(statement, before_policies), files)


@pytest.mark.parametrize("technology", ["infiniband", "roce"])
def test_an_other_tenant_counted_on_a_leaf_refutes_a_holding_claim(technology):
    statement, files = proof(SNAPSHOTS[technology]())

    def one_more(predicate: dict[str, Any]) -> None:
        leaf(predicate, "leaf-g1-r1")["others"]["tenants"] = 1

    with pytest.raises(InvalidValueError, match=r"ports on leaf-g1-r1 \(1\), so dedicated_leaf"):
        check_claims(tampered(statement, one_more), files)


def test_a_claim_that_does_not_hold_is_refused_even_when_it_says_so():
    statement, files = proof(ib_snapshot())

    def admitted(predicate: dict[str, Any]) -> None:
        predicate["dedicated_leaf"]["holds"] = False
        leaf(predicate, "leaf-g1-r0")["others"]["tenants"] = 2

    with pytest.raises(InvalidValueError, match=r"does not hold: other tenants on leaf-g1-r0"):
        check_claims(tampered(statement, admitted), files)


def test_a_guid_added_to_a_leaf_but_not_to_the_endpoints_fails():
    statement, files = proof(ib_snapshot())

    def added(predicate: dict[str, Any]) -> None:
        leaf(predicate, "leaf-g1-r0")["endpoints"].append(guids("gpu03")[0])

    with pytest.raises(InvalidValueError, match="not the tenant's endpoints"):
        check_claims(tampered(statement, added), files)


def test_a_guid_added_to_the_topology_and_endpoints_is_not_in_the_tenants_partition():
    statement, files = proof(ib_snapshot())
    stranger = guids("gpu03")[0]

    def added(predicate: dict[str, Any]) -> None:
        leaf(predicate, "leaf-g1-r0")["endpoints"].append(stranger)
        predicate["endpoints"].append(stranger)

    with pytest.raises(InvalidValueError, match=f"only in the topology: \\['{stranger}'\\]"):
        check_claims(tampered(statement, added), files)


def test_a_leaf_hidden_from_the_topology_is_found_in_the_tenants_partition():
    statement, files = proof(ib_snapshot())
    hidden = guids("gpu01")[1] + "|" + guids("gpu02")[1]

    def hide(predicate: dict[str, Any]) -> None:
        gone = leaf(predicate, "leaf-g1-r1")["endpoints"]
        predicate["dedicated_leaf"]["leaves"].remove(leaf(predicate, "leaf-g1-r1"))
        predicate["endpoints"] = [e for e in predicate["endpoints"] if e not in gone]

    with pytest.raises(InvalidValueError, match=f"only in the file: \\['({hidden})', '({hidden})'"):
        check_claims(tampered(statement, hide), files)


def test_a_guid_moved_to_the_uncabled_list_still_has_to_be_in_the_partition():
    statement, files = proof(ib_snapshot())

    def uncable(predicate: dict[str, Any]) -> None:
        moved = leaf(predicate, "leaf-g1-r1")["endpoints"].pop()
        predicate["dedicated_leaf"]["uncabled"].append(moved)

    assert check_claims(tampered(statement, uncable), files)


def test_a_dedicated_tenant_without_ports_has_no_leaves_and_verifies():
    holders = {node: owner for node, owner in HOLDERS.items() if owner != Owner.tenant("ext-a")}
    statement, files = proof(ib_snapshot(holders=holders, grants=()))

    assert statement["predicate"]["dedicated_leaf"] == {"holds": True, "leaves": [], "uncabled": []}
    assert check_claims(statement, files) == frozenset()


def test_a_roce_port_moved_to_uncabled_fails():
    statement, files = proof(roce_snapshot())

    def uncable(predicate: dict[str, Any]) -> None:
        moved = leaf(predicate, "leaf-g1-r1")["endpoints"].pop()
        predicate["dedicated_leaf"]["uncabled"].append(moved)

    with pytest.raises(InvalidValueError, match="RoCE topology lists uncabled ports"):
        check_claims(tampered(statement, uncable), files)


def test_a_guid_listed_on_two_leaves_fails():
    statement, files = proof(ib_snapshot())

    def twice(predicate: dict[str, Any]) -> None:
        leaf(predicate, "leaf-g1-r1")["endpoints"].append(guids("gpu01")[0])

    with pytest.raises(InvalidValueError, match="an endpoint on two leaves"):
        check_claims(tampered(statement, twice), files)


def test_a_roce_port_added_to_a_leaf_is_not_in_the_tenants_vlan():
    statement, files = proof(roce_snapshot())
    storage_port = "leaf-g1-r0:Ethernet24"  # stor01's: a VLAN member, of storage's VLAN

    def added(predicate: dict[str, Any]) -> None:
        leaf(predicate, "leaf-g1-r0")["endpoints"].append(storage_port)
        predicate["endpoints"].append(storage_port)

    with pytest.raises(InvalidValueError, match=r"sonic/leaf-g1-r0/config_db.json: VLAN 100 has"):
        check_claims(tampered(statement, added), files)


def test_a_roce_segment_claiming_another_owners_vlan_fails():
    statement, files = proof(roce_snapshot())

    def storage_vlan(predicate: dict[str, Any]) -> None:
        predicate["segments"][0]["vlan"] = "104"  # storage's VLAN, in storage's VRF

    with pytest.raises(InvalidValueError, match="VLAN 104 is not in the tenant's Vrf50001"):
        check_claims(tampered(statement, storage_vlan), files)


def test_a_roce_leaf_count_below_the_ports_in_other_vlans_fails():
    statement, files = proof(roce_snapshot())

    def fewer(predicate: dict[str, Any]) -> None:
        leaf(predicate, "leaf-g1-r0")["others"]["services"] = 0

    with pytest.raises(InvalidValueError, match=r"1 port\(s\) in other owners' VLANs"):
        check_claims(tampered(statement, fewer), files)


def test_a_roce_leaf_that_is_no_subject_fails():
    statement, files = proof(roce_snapshot())

    def extra_leaf(predicate: dict[str, Any]) -> None:
        others = {"tenants": 0, "services": 0, "unassigned": 0, "management": 0}
        entry = {"leaf": "leaf-g2-r0", "endpoints": [], "others": others}
        predicate["dedicated_leaf"]["leaves"].append(entry)

    with pytest.raises(InvalidValueError, match=r"are not the proof's config_db\.json subjects"):
        check_claims(tampered(statement, extra_leaf), files)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda p: p.pop("dedicated_leaf"), "carries no dedicated_leaf topology"),
        (lambda p: p["policy"].update(isolation="segment"), "carries a dedicated_leaf topology"),
        (lambda p: p.pop("policy"), "dedicated_leaf topology but no policy"),
        (lambda p: p["policy"].update(version=-1), "not a whole number"),
        (lambda p: p["policy"].update(fingerprint="md5:0"), "fingerprint"),
        (lambda p: p["policy"].pop("tenant_kind"), "kind or isolation, not both"),
        (lambda p: p["policy"].update(isolation="air_gap"), "unknown isolation"),
        (lambda p: leaf(p, "leaf-g1-r0")["others"].update(tenants=True), "is not a count"),
        (lambda p: leaf(p, "leaf-g1-r0")["others"].pop("management"), "does not count"),
        (lambda p: p["dedicated_leaf"].update(holds="yes"), "the proof claims 'yes'"),
    ],
)
def test_malformed_or_inconsistent_policy_claims_fail(change, reason):
    statement, files = proof(ib_snapshot())

    with pytest.raises(InvalidValueError, match=reason):
        check_claims(tampered(statement, change), files)
