"""Routine onboarding and offboarding change no declared CONFIG_DB key on any RoCE leaf.

Every QoS class with RoCE parameters is in the snapshot whether a tenant uses it or not
(tenancy/record/snapshot/roce.py), so the fabric-wide DSCP map, schedulers, queues, PFC and buffers
stay as they are; the owned part of each leaf's patch (policies/roce/patch.py) is exactly the
tenant's VRF, VLANs, members, tunnel maps, SVIs and host-port QoS bindings. On the demo fabric
(tenancy/usecases/demo.py) and on the builders' onboarding (`roce_onboarded`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policies.model import Owner
from policies.roce.model import RoceSnapshot, VrfSegment
from policies.roce.ownership import leaf_ownership
from policies.roce.patch import apply_patch, leaf_patch, owned_entries
from policies.roce.render_sonic import ConfigDb, render_config_db
from tenancy.record.snapshot.roce import load_roce_snapshot
from tenancy.schemas import AllocationCreate, QosClassCreate, TenantCreate
from tenancy.store.db import make_engine
from tenancy.store.lookups import fabric_named
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, tenants
from tests.demo_db import demo_database

FABRIC = "roce-west"
Key = tuple[str, str]


def snapshot_of(uow: UnitOfWork) -> RoceSnapshot:
    with uow.transaction(read_only=True) as tx:
        return load_roce_snapshot(tx.session, fabric_named(tx.session, FABRIC))


def tenant_keys(snapshot: RoceSnapshot, tenant: str, leaf: str) -> set[Key]:
    """The CONFIG_DB keys the renderer writes for `tenant` on `leaf` (render_sonic `_overlay`)."""
    owner = Owner.tenant(tenant)
    holders = {n.name for n in snapshot.nodes if owner in n.owners}
    ports = {nic.port for nic in snapshot.nics if nic.switch == leaf and nic.node in holders}
    segment = next((s for s in snapshot.segments if s.owner == owner), None)
    if segment is None or not ports:
        return set()
    members = {("VLAN_MEMBER", f"Vlan{segment.vlan}|{port}") for port in ports}
    return _segment_keys(segment) | members | {("PORT_QOS_MAP", port) for port in ports}


def _segment_keys(segment: VrfSegment) -> set[Key]:
    l2, l3 = f"Vlan{segment.vlan}", f"Vlan{segment.l3vni_vlan}"
    return {
        ("VRF", segment.vrf),
        ("VLAN", l2),
        ("VLAN", l3),
        ("VXLAN_TUNNEL_MAP", f"vtep|map_{segment.l2vni}_{l2}"),
        ("VXLAN_TUNNEL_MAP", f"vtep|map_{segment.l3vni}_{l3}"),
        ("VLAN_INTERFACE", l2),
        ("VLAN_INTERFACE", f"{l2}|{segment.gateway}"),
        ("VLAN_INTERFACE", l3),
    }


def touched_keys(operations: Any, before: ConfigDb, after: ConfigDb) -> set[Key]:
    """(table, key) of each operation; a whole-table one names every key it adds or removes."""
    keys: set[Key] = set()
    for operation in operations:
        table, *rest = operation["path"][1:].replace("~1", "/").split("/", 1)
        if rest:
            keys.add((table, rest[0].replace("~0", "~")))
        else:
            keys |= {(table, key) for key in {**before.get(table, {}), **after.get(table, {})}}
    return keys


def assert_routine(before: RoceSnapshot, after: RoceSnapshot, tenant: str) -> None:
    """Every leaf's patch is owned only and names exactly `tenant`'s keys on that leaf."""
    for switch in after.leaves():
        leaf = switch.name
        running, target = render_config_db(before, leaf), render_config_db(after, leaf)
        ownership = leaf_ownership(after, leaf)
        patch = leaf_patch(running, target, ownership)
        assert patch.disruptive == (), f"{leaf}: {patch.disruptive}"
        expected = tenant_keys(before, tenant, leaf) | tenant_keys(after, tenant, leaf)
        assert touched_keys(patch.owned, running, target) == expected, leaf
        patched = apply_patch(running, patch.operations(allow_disruptive=False))
        assert owned_entries(patched, ownership) == owned_entries(target, ownership)
        assert patched == target, f"{leaf}: only owned keys differ between the two renders"


@pytest.fixture
def demo_uow(tmp_path: Path) -> UnitOfWork:
    url = demo_database(tmp_path / "demo.db")
    return UnitOfWork(make_engine(url), Settings(database_url=url, verify_cross_check=True))


def offboard_then_onboard(uow: UnitOfWork, leaving: str, joining: str, qos: str) -> None:
    initial = snapshot_of(uow)
    tenants.offboard_tenant(uow, name=leaving)
    offboarded = snapshot_of(uow)
    assert Owner.tenant(leaving) not in {s.owner for s in offboarded.segments}
    assert_routine(initial, offboarded, leaving)

    tenants.create_tenant(uow, spec=TenantCreate(name=joining, kind="external", qos_class=qos))
    allocations.allocate(uow, tenant_name=joining, spec=AllocationCreate(fabric=FABRIC, count=2))
    onboarded = snapshot_of(uow)
    assert any(s.owner == Owner.tenant(joining) for s in onboarded.segments)
    assert_routine(offboarded, onboarded, joining)


def test_offboarding_the_demos_bronze_tenant_and_onboarding_another_are_routine(demo_uow):
    # globex is the demo's only bronze tenant: its class's map, scheduler and queues stay.
    offboard_then_onboard(demo_uow, "globex", "initech", "bronze")


def test_the_gold_tenant_leaving_and_a_silver_one_joining_are_routine_on_the_builders_fabric(
    uow, roce_onboarded
):
    offboard_then_onboard(uow, "acme", "initech", "silver")


def test_every_leaf_carries_every_roce_class_and_none_without_roce_parameters(uow, roce_onboarded):
    tenants.offboard_tenant(uow, name="globex")  # bronze is in use by no one now
    # An InfiniBand-only class (RoCE defaults: DSCP 0, TC 0, lossy) adds nothing on RoCE.
    tenants.create_qos_class(uow, spec=QosClassCreate(name="ibonly", ib_sl=5))
    snapshot = snapshot_of(uow)

    assert [q.name for q in snapshot.qos_classes] == ["gold", "silver", "bronze"]
    config = render_config_db(snapshot, "leaf01")
    assert config["DSCP_TO_TC_MAP"]["AI_FABRIC"]["10"] == "1"  # bronze's DSCP -> its TC
    assert "scheduler.bronze" in config["SCHEDULER"]
    assert "TENANT_IBONLY" not in config["DSCP_TO_TC_MAP"]


def test_a_class_that_does_not_fit_beside_the_others_is_defined_but_not_carried(
    uow, roce_onboarded
):
    before = snapshot_of(uow)
    # gold and silver hold both lossless priorities and ETS adds up to 100 already
    spec = QosClassCreate(name="platinum", ib_sl=4, roce_dscp=34, roce_tc=5, lossless=True)
    tenants.create_qos_class(uow, spec=spec)
    after = snapshot_of(uow)

    assert [q.name for q in after.qos_classes] == ["gold", "silver", "bronze"]
    assert "platinum" in {q.name for q in after.defined_qos_classes}
    for leaf in after.leaves():
        assert render_config_db(after, leaf.name) == render_config_db(before, leaf.name)
