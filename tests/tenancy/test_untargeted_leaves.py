"""RoCE leaves without a deploy target (tenancy/usecases/deploy_sync.py, drains.py): a leaf that
carries owners' ports and has no target keeps the fabric out of sync (`untargeted`), and a host
cabled to a leaf without a target stays draining whatever the other leaves read back, until the
leaf's own target reads the removal back or an operator forces the drain.

The fabric is tests/api/test_roce_deploy.py's: every host has eth0 on leaf01; eth1 on leaf02,
except gpu0005/06 whose eth1 is on leaf03. acme holds gpu0001, globex gpu0005, the storage
service stor01/02 (leaf01 and leaf02).
"""

from __future__ import annotations

from typing import Any

from tenancy.schemas import (
    AllocationCreate,
    ForceDrain,
    ReportCreate,
    RoceFabricCreate,
    RoceInventory,
    ServiceCreate,
    TargetCreate,
    TenantCreate,
)
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import (
    allocations,
    deploy,
    deploy_sync,
    drains,
    fabrics,
    nodes,
    shared_services,
    tenants,
    topology,
)
from tests.api.test_roce_deploy import LEAVES, three_leaf_inventory
from tests.builders import ROCE_FABRIC, ROCE_FABRIC_SPEC, ROCE_STORAGE_NODES, SERVICE

SONIC = TargetCreate(kind="sonic")


def build(uow: UnitOfWork, *targets: str) -> str:
    """The three-leaf fabric with `targets` registered; returns globex's allocation id."""
    fabrics.create_fabric(uow, spec=RoceFabricCreate.model_validate(ROCE_FABRIC_SPEC))
    inventory = RoceInventory.model_validate(three_leaf_inventory())
    topology.import_roce_topology(uow, fabric_name=ROCE_FABRIC, inventory=inventory)
    spec = ServiceCreate(name=SERVICE, nodes=list(ROCE_STORAGE_NODES))
    shared_services.create_service(uow, fabric_name=ROCE_FABRIC, spec=spec)
    held = {}
    for tenant, node in (("acme", "gpu0001"), ("globex", "gpu0005")):
        tenants.create_tenant(uow, spec=TenantCreate(name=tenant, kind="external"))
        body = AllocationCreate(fabric=ROCE_FABRIC, nodes=[node])
        held[tenant] = allocations.allocate(uow, tenant_name=tenant, spec=body).id
    for leaf in targets:
        deploy.put_target(uow, fabric_name=ROCE_FABRIC, name=leaf, spec=SONIC)
    return held["globex"]


def read_back(uow: UnitOfWork, *leaves: str) -> str:
    """Each of `leaves` applied and read back the desired snapshot whole; returns its digest."""
    desired = deploy_sync.sync_status(uow, fabric_name=ROCE_FABRIC).desired
    for leaf in leaves:
        report = ReportCreate(state="applied", digest=desired, observed_digest=desired, phase=2)
        deploy.post_report(uow, fabric_name=ROCE_FABRIC, target_name=leaf, report=report)
    return desired


def release_globex(uow: UnitOfWork, allocation_id: str) -> None:
    allocations.release_allocation(uow, tenant_name="globex", allocation_id=allocation_id)


def node(uow: UnitOfWork, name: str) -> Any:
    return nodes.get_node(uow, fabric_name=ROCE_FABRIC, node_name=name)


# --- sync -----------------------------------------------------------------------------------------


def test_a_leaf_carrying_tenant_ports_without_a_target_keeps_the_fabric_out_of_sync(
    uow: UnitOfWork,
):
    build(uow, "leaf01", "leaf02")
    read_back(uow, "leaf01", "leaf02")

    status = deploy_sync.sync_status(uow, fabric_name=ROCE_FABRIC)

    assert status.behind == [] and all(t.state == "applied" for t in status.targets)
    assert status.untargeted == ["leaf03"]  # globex's gpu0005 has eth1 there
    assert status.in_sync is False
    deploy.put_target(uow, fabric_name=ROCE_FABRIC, name="leaf03", spec=SONIC)
    read_back(uow, "leaf03")
    status = deploy_sync.sync_status(uow, fabric_name=ROCE_FABRIC)
    assert (status.untargeted, status.in_sync) == ([], True)


def test_a_leaf_that_carries_no_owners_ports_needs_no_target(uow: UnitOfWork):
    globex = build(uow, "leaf01", "leaf02")
    release_globex(uow, globex)  # leaf03's only held port goes
    read_back(uow, "leaf01", "leaf02")

    status = deploy_sync.sync_status(uow, fabric_name=ROCE_FABRIC)

    assert (status.untargeted, status.in_sync) == ([], True)


def test_a_roce_fabric_without_targets_lists_every_leaf_that_carries_ports(uow: UnitOfWork):
    build(uow)

    status = deploy_sync.sync_status(uow, fabric_name=ROCE_FABRIC)

    assert status.targets == [] and status.in_sync is False
    assert status.untargeted == list(LEAVES)


def test_an_infiniband_fabric_has_no_untargeted_leaves_with_or_without_targets(
    uow: UnitOfWork, onboarded: Any
):
    # OpenSM targets enforce the whole fabric: without one it is out of sync, as it always was.
    status = deploy_sync.sync_status(uow, fabric_name="ib-east")
    assert (status.untargeted, status.in_sync, status.behind) == ([], False, [])
    deploy.put_target(uow, fabric_name="ib-east", name="sm01", spec=TargetCreate(kind="opensm"))
    desired = status.desired
    report = ReportCreate(state="applied", digest=desired, observed_digest=desired, role="master")
    deploy.post_report(uow, fabric_name="ib-east", target_name="sm01", report=report)
    status = deploy_sync.sync_status(uow, fabric_name="ib-east")
    assert (status.untargeted, status.in_sync) == ([], True)


# --- drains ---------------------------------------------------------------------------------------


def test_a_host_cabled_to_a_leaf_without_a_target_drains_until_forced(uow: UnitOfWork):
    globex = build(uow, "leaf01", "leaf02")
    read_back(uow, "leaf01", "leaf02")
    release_globex(uow, globex)

    read_back(uow, "leaf01", "leaf02")  # every registered target read the removal back

    drained = node(uow, "gpu0005")
    assert drained.state == "draining"
    assert drained.drain is not None
    assert (drained.drain.untargeted, drained.drain.waiting_for) == (["leaf03"], [])
    assert "leaf03" in drained.drain.reason and "force-drain" in drained.drain.reason
    reason = ForceDrain(reason="leaf03 is managed by hand; gpu0005 checked")
    drains.force_drain(uow, fabric_name=ROCE_FABRIC, node_name="gpu0005", spec=reason)
    freed = node(uow, "gpu0005")
    assert (freed.state, freed.drain) == ("free", None)


def test_a_host_drains_once_its_leafs_new_target_read_the_removal_back(uow: UnitOfWork):
    globex = build(uow, "leaf01", "leaf02")
    read_back(uow, "leaf01", "leaf02")
    release_globex(uow, globex)
    read_back(uow, "leaf01", "leaf02")

    deploy.put_target(uow, fabric_name=ROCE_FABRIC, name="leaf03", spec=SONIC)
    waiting = node(uow, "gpu0005").drain
    read_back(uow, "leaf03")

    assert waiting is not None
    assert (waiting.untargeted, waiting.waiting_for) == ([], ["leaf03"])
    assert node(uow, "gpu0005").state == "free"


def test_removing_a_leafs_target_keeps_the_drains_of_its_hosts(uow: UnitOfWork):
    globex = build(uow, *LEAVES)
    read_back(uow, *LEAVES)
    release_globex(uow, globex)
    read_back(uow, "leaf01", "leaf02")

    deploy.delete_target(uow, fabric_name=ROCE_FABRIC, name="leaf03")

    # leaf03 may still hold gpu0005's port in globex's VLAN: nothing will ever read it back
    drained = node(uow, "gpu0005")
    assert drained.state == "draining"
    assert drained.drain is not None and drained.drain.untargeted == ["leaf03"]


def test_a_host_on_covered_leaves_drains_on_their_read_backs_alone(uow: UnitOfWork):
    build(uow, "leaf01", "leaf02")
    read_back(uow, "leaf01", "leaf02")
    acme = allocations.list_allocations(uow, tenant_name="acme", limit=10, cursor=None).data[0]
    allocations.release_allocation(uow, tenant_name="acme", allocation_id=acme.id)

    waiting = node(uow, "gpu0001").drain
    read_back(uow, "leaf01", "leaf02")  # leaf03 carries globex, not gpu0001

    assert waiting is not None
    assert (waiting.untargeted, waiting.waiting_for) == ([], ["leaf01", "leaf02"])
    assert node(uow, "gpu0001").state == "free"
