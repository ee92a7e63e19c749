"""RoCE observations without HTTP: a leaf's posted CONFIG_DB/FRR state against the record.

The posted state is built from the leaf's rendered config_db.json and frr.conf (what a faithful
deployment reads back), then changed by hand.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlmodel import col, select

from cli.collect_roce import observation_document
from policies.errors import InvalidValueError
from policies.node_state import NodeState
from policies.roce.observed import (
    FrrState,
    LeafState,
    evpn_vnis,
    leaf_state,
    running_frr_state,
)
from policies.roce.parse_frr import parse_frr_conf
from tenancy import models as m
from tenancy.gate import verification
from tenancy.schemas import RoceObservationCreate, RoceObservationView
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.roce_observations import observe_leaf
from tests.builders import ROCE_FABRIC, RoceOnboarded, uow_artifact_text

LEAF = "leaf01"


def rendered_tables(uow: UnitOfWork) -> dict[str, Any]:
    text = uow_artifact_text(uow, ROCE_FABRIC, f"sonic/{LEAF}/config_db.json")
    tables: dict[str, Any] = json.loads(text)
    return tables


def running_frr(uow: UnitOfWork) -> FrrState:
    """FRR as a faithful deployment shows it: the rendered frr.conf running, bgpd listing its
    L2VNIs (the L3VNIs wait for VRF devices)."""
    text = uow_artifact_text(uow, ROCE_FABRIC, f"frr/{LEAF}/frr.conf")
    default = parse_frr_conf(text).instance(None)
    assert default is not None
    vnis = {
        str(v.vni): {
            "vni": v.vni,
            "type": "L2",
            "importRTs": v.rt_imports,
            "exportRTs": v.rt_exports,
        }
        for v in default.vnis
    }
    return running_frr_state(text, json.dumps(vnis))


def observe(
    uow: UnitOfWork, state: LeafState, frr: FrrState | None = None, leaf: str = LEAF
) -> RoceObservationView:
    document = RoceObservationCreate.model_validate(observation_document(leaf, state, frr))
    return observe_leaf(uow, fabric_name=ROCE_FABRIC, document=document)


def member_ports(tables: dict[str, Any], vlan: int) -> list[str]:
    return sorted(k.split("|")[1] for k in tables["VLAN_MEMBER"] if k.startswith(f"Vlan{vlan}|"))


def test_the_rendered_leaf_is_in_sync_and_holds(uow, roce_onboarded, db_dump):
    before = db_dump()

    report = observe(uow, leaf_state(rendered_tables(uow)), running_frr(uow))

    assert (report.fabric, report.leaf, report.frr_observed) == (ROCE_FABRIC, LEAF, True)
    digest = verification.verify_fabric(uow, fabric_name=ROCE_FABRIC).snapshot_digest
    assert report.snapshot_digest == digest
    assert report.in_sync and report.holds
    assert report.drift == []
    assert report.counterexamples == []
    assert db_dump() == before


def test_a_globex_port_in_acmes_vlan_is_drift_on_its_node_and_a_violation(
    uow, roce_onboarded: RoceOnboarded
):
    tables = rendered_tables(uow)
    acme, globex = roce_onboarded.segments["acme"], roce_onboarded.segments["globex"]
    intruder = member_ports(tables, globex["vlan"])[0]
    tables["VLAN_MEMBER"][f"Vlan{acme['vlan']}|{intruder}"] = {"tagging_mode": "untagged"}

    report = observe(uow, leaf_state(tables))

    [drift] = report.drift
    assert (drift.code, drift.subject, drift.owner) == (
        "vlan-member-unexpected",
        intruder,
        "tenant:globex",
    )
    assert drift.node is not None and drift.node.startswith("gpu")
    assert not report.holds and not report.frr_observed
    assert {c.rule for c in report.counterexamples} == {"cross-tenant-reachability"}


def test_an_import_of_another_tenants_route_target_is_a_leak(uow, roce_onboarded: RoceOnboarded):
    acme, globex = roce_onboarded.segments["acme"], roce_onboarded.segments["globex"]
    frr = running_frr(uow)
    imports = dict(frr.vrf_imports)
    leaked = f"65000:{acme['l3vni']}"
    imports[globex["vrf"]] = imports[globex["vrf"]] | {leaked}

    report = observe(uow, leaf_state(rendered_tables(uow)), FrrState(frr.vnis, imports))

    assert [(d.code, d.subject, d.observed) for d in report.drift] == [
        ("route-target-leak", globex["vrf"], sorted([f"65000:{globex['l3vni']}", leaked]))
    ]
    assert not report.holds


def test_a_draining_nodes_port_still_in_its_old_vlan_is_a_finding_on_that_node(
    uow, roce_onboarded: RoceOnboarded
):
    tables = rendered_tables(uow)
    vlan = roce_onboarded.segments["research"]["vlan"]
    port = member_ports(tables, vlan)[0]
    with uow.transaction() as tx:  # the record: the node was released and now drains
        query = (
            select(m.Node)
            .join(m.Nic, col(m.Nic.node_id) == col(m.Node.id))
            .join(m.RoceSwitchPort, col(m.RoceSwitchPort.id) == col(m.Nic.switch_port_id))
            .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
            .where(m.RoceSwitch.name == LEAF, m.RoceSwitchPort.name == port)
        )
        node = tx.session.exec(query).one()
        assert node is not None
        node.state = NodeState.DRAINING.value
        tx.session.add(node)
        name = node.name

    report = observe(uow, leaf_state(tables))

    drain = [d for d in report.drift if d.code == "draining-port-in-tenant-vlan"]
    assert [(d.node, d.subject, d.observed) for d in drain] == [(name, port, [f"Vlan{vlan}"])]


def test_a_leaf_the_fabric_lacks_is_refused(uow, roce_onboarded):
    with pytest.raises(InvalidValueError, match="leaf01, leaf02"):
        observe(uow, leaf_state(rendered_tables(uow)), leaf="spine01")


def test_roce_observations_apply_to_roce_fabrics_only(uow, onboarded):
    document = RoceObservationCreate.model_validate(
        observation_document(LEAF, leaf_state({}), None)
    )

    with pytest.raises(InvalidValueError, match="RoCE observations apply to RoCE fabrics"):
        observe_leaf(uow, fabric_name="ib-east", document=document)


def test_bgpds_vnis_round_trip_through_the_document():
    vnis = evpn_vnis(json.dumps({"10000": {"vni": 10000, "type": "L2", "importRTs": ["1:2"]}}))
    document = observation_document(LEAF, leaf_state({}), FrrState(vnis, {}))

    assert document["frr"] == {
        "vnis": [{"vni": 10000, "layer": "L2", "import_rts": ["1:2"], "export_rts": []}],
        "vrf_imports": {},
    }
    assert RoceObservationCreate.model_validate(document).frr is not None
