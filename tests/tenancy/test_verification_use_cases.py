"""Verification and rendered artifacts without HTTP: digests that follow the state, manifests that
match the files, per-leaf RoCE artifacts, and what is refused before anything is rendered."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from policies.errors import IsolationViolationError, NotFoundError
from policies.verdict import Verdict
from tenancy.gate import verification
from tenancy.schemas import AllocationCreate, GrantCreate, QosClassCreate, TenantCreate
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, shared_services, tenants
from tests.builders import (
    ARTIFACT_PATHS,
    DEFAULT_PARTITION_LINE,
    ROCE_ARTIFACT_PATHS,
    ROCE_LEAVES,
    TENANT_PKEYS,
    roce_inventory,
    uow_artifact_text,
    uow_onboard_roce,
    uow_partitions_conf,
)


def digest(uow: UnitOfWork, fabric: str = "ib-east") -> str:
    return verification.verify_fabric(uow, fabric_name=fabric).snapshot_digest


def config_db(uow: UnitOfWork, leaf: str) -> dict[str, dict[str, dict[str, Any]]]:
    document: dict[str, dict[str, dict[str, Any]]] = json.loads(
        uow_artifact_text(uow, "roce-west", f"sonic/{leaf}/config_db.json")
    )
    return document


# --- InfiniBand --------------------------------------------------------------------------------


def test_the_snapshot_digest_is_stable_until_the_state_changes(uow, onboarded):
    first, second = digest(uow), digest(uow)

    shared_services.grant_service(
        uow, tenant_name="globex", spec=GrantCreate(fabric="ib-east", service="storage")
    )

    assert first == second
    assert first.startswith("v2:") and len(first) == len("v2:") + 64
    assert digest(uow) != first


def test_the_manifest_lists_each_opensm_file_with_its_sha256_and_size(uow, onboarded):
    manifest = verification.list_artifacts(uow, fabric_name="ib-east")

    assert (manifest.fabric, manifest.snapshot_digest) == ("ib-east", digest(uow))
    assert [f.path for f in manifest.files] == sorted(ARTIFACT_PATHS)
    for entry in manifest.files:
        artifact, rendered_from = verification.get_artifact(
            uow, fabric_name="ib-east", path=entry.path
        )
        assert entry.sha256 == hashlib.sha256(artifact.content).hexdigest()
        assert entry.bytes == len(artifact.content)
        assert rendered_from == manifest.snapshot_digest


def test_partitions_conf_holds_the_default_line_and_every_key_but_not_the_snapshot_digest(
    uow, onboarded
):
    text = uow_partitions_conf(uow)
    lines = text.splitlines()

    assert DEFAULT_PARTITION_LINE in lines
    # The signed manifest binds the file to the snapshot; the body changes only with its content.
    assert digest(uow).removeprefix("v2:") not in text
    for tenant, pkey in TENANT_PKEYS.items():
        assert any(line.startswith(f"tenant_{tenant}={pkey},") for line in lines)
    assert any(line.startswith("service_storage=0x0100,") for line in lines)


def test_rendering_the_same_state_twice_is_byte_identical(uow, onboarded):
    for path in ARTIFACT_PATHS:
        first, _ = verification.get_artifact(uow, fabric_name="ib-east", path=path)
        again, _ = verification.get_artifact(uow, fabric_name="ib-east", path=path)
        assert first.content == again.content


def test_an_unknown_artifact_path_is_not_found_naming_it(uow, onboarded):
    with pytest.raises(NotFoundError, match=r"opensm/ib-routing\.conf"):
        verification.get_artifact(uow, fabric_name="ib-east", path="opensm/ib-routing.conf")


@pytest.mark.parametrize(
    "use_case",
    [
        lambda uow: verification.verify_fabric(uow, fabric_name="ib-nowhere"),
        lambda uow: verification.list_artifacts(uow, fabric_name="ib-nowhere"),
        lambda uow: verification.get_artifact(
            uow, fabric_name="ib-nowhere", path="opensm/partitions.conf"
        ),
    ],
    ids=["verify", "manifest", "artifact"],
)
def test_verifying_or_rendering_an_unknown_fabric_is_not_found(uow, onboarded, use_case):
    with pytest.raises(NotFoundError, match="ib-nowhere"):
        use_case(uow)


def test_a_fabric_that_does_not_verify_renders_no_artifacts(uow, onboarded, monkeypatch):
    broken = Verdict(holds=False, snapshot_digest="sha256:00", counterexamples=(), reachability=())
    monkeypatch.setattr(verification, "verify_snapshot", lambda snapshot: broken)

    with pytest.raises(IsolationViolationError, match="refusing to render") as refused:
        verification.list_artifacts(uow, fabric_name="ib-east")

    assert refused.value.extensions == {"snapshot_digest": "sha256:00", "counterexamples": []}


def test_a_tenants_reachability_lists_its_edges_on_each_fabric_it_holds(uow, onboarded):
    acme = verification.tenant_reachability(uow, tenant_name="acme")
    research = verification.tenant_reachability(uow, tenant_name="research")

    assert acme.tenant == "acme"
    assert [(f.fabric, f.holds) for f in acme.fabrics] == [("ib-east", True)]
    assert [(e.source, e.target, e.segment) for e in acme.fabrics[0].edges] == [
        ("tenant:acme", "service:storage", "0x0100")
    ]
    assert [(f.fabric, f.edges) for f in research.fabrics] == [("ib-east", [])]


def test_an_offboarded_tenant_has_no_fabric_left_to_reach(uow, onboarded):
    tenants.offboard_tenant(uow, name="acme")

    assert verification.tenant_reachability(uow, tenant_name="acme").fabrics == []


# --- RoCE --------------------------------------------------------------------------------------


def test_the_roce_artifacts_are_config_db_ownership_and_frr_conf_per_leaf(uow, roce_onboarded):
    manifest = verification.list_artifacts(uow, fabric_name="roce-west")

    assert [f.path for f in manifest.files] == list(ROCE_ARTIFACT_PATHS)
    assert manifest.snapshot_digest == digest(uow, "roce-west")


@pytest.mark.parametrize("leaf", ROCE_LEAVES)
def test_each_leafs_config_db_carries_every_vrf_with_its_l3vni(uow, roce_onboarded, leaf):
    document = config_db(uow, leaf)

    assert document["DEVICE_METADATA"]["localhost"]["hostname"] == leaf
    assert document["VRF"] == {f"Vrf5000{i}": {"vni": f"5000{i}"} for i in range(4)}
    maps = document["VXLAN_TUNNEL_MAP"]
    assert maps["vtep|map_50001_Vlan103"] == {"vlan": "Vlan103", "vni": "50001"}
    assert maps["vtep|map_10001_Vlan102"] == {"vlan": "Vlan102", "vni": "10001"}
    assert document["VLAN_INTERFACE"]["Vlan102|10.64.1.1/24"] == {}


def test_offboarding_a_roce_tenant_removes_its_vrf_from_every_artifact(uow, roce_onboarded):
    tenants.offboard_tenant(uow, name="research")

    for leaf in ROCE_LEAVES:
        document = config_db(uow, leaf)
        assert sorted(document["VRF"]) == ["Vrf50000", "Vrf50001", "Vrf50003"]
        assert "Vlan104" not in document["VLAN"] and "Vlan105" not in document["VLAN"]
        frr = uow_artifact_text(uow, "roce-west", f"frr/{leaf}/frr.conf")
        assert "Vrf50002" not in frr
        assert "65000:10002" not in frr and "65000:50002" not in frr


def test_a_tenants_vlan_lives_only_on_the_leaves_where_it_has_nics(uow):
    # gpu0007 has a single NIC, on leaf01: a tenant holding only gpu0007 must not reach leaf02.
    inventory = roce_inventory()
    leaf01 = next(s for s in inventory["switches"] if s["name"] == "leaf01")
    leaf01["ports"].append(
        {"name": "Ethernet64", "lanes": "64,65,66,67", "speed": 400000, "cable_length": "5m"}
    )
    inventory["nodes"].append(
        {"name": "gpu0007", "nics": [{"name": "eth0", "switch": "leaf01", "port": "Ethernet64"}]}
    )
    uow_onboard_roce(uow, inventory)
    tenants.create_tenant(uow, spec=TenantCreate(name="solo", kind="external"))
    allocated = allocations.allocate(
        uow, tenant_name="solo", spec=AllocationCreate(fabric="roce-west", nodes=["gpu0007"])
    )
    assert allocated.segment is not None
    segment = allocated.segment.model_dump()
    vlan, vrf = f"Vlan{segment['vlan']}", segment["vrf"]

    on_leaf01, on_leaf02 = config_db(uow, "leaf01"), config_db(uow, "leaf02")

    assert [k for k in on_leaf01["VLAN_MEMBER"] if k.startswith(f"{vlan}|")] == [
        f"{vlan}|Ethernet64"
    ]
    assert vrf in on_leaf01["VRF"]
    assert not [k for k in on_leaf02["VLAN_MEMBER"] if k.startswith(f"{vlan}|")]
    assert vlan not in on_leaf02["VLAN"] and vrf not in on_leaf02["VRF"]
    assert f"vrf {vrf}" in uow_artifact_text(uow, "roce-west", "frr/leaf01/frr.conf")
    assert f"vrf {vrf}" not in uow_artifact_text(uow, "roce-west", "frr/leaf02/frr.conf")


def test_a_third_lossless_class_in_use_is_an_isolation_violation(uow, roce_onboarded, db_dump):
    tenants.create_qos_class(
        uow,
        spec=QosClassCreate(
            name="platinum", ib_sl=4, roce_dscp=34, roce_tc=5, lossless=True, ets_weight=1
        ),
    )
    tenants.offboard_tenant(uow, name="globex")  # frees a node for the platinum tenant
    tenants.create_tenant(
        uow, spec=TenantCreate(name="initech", kind="external", qos_class="platinum")
    )
    before = db_dump()

    with pytest.raises(IsolationViolationError) as refused:
        allocations.allocate(
            uow, tenant_name="initech", spec=AllocationCreate(fabric="roce-west", count=1)
        )

    assert {c["rule"] for c in refused.value.extensions["counterexamples"]} == {
        "qos-lossless-limit"
    }
    assert db_dump() == before
