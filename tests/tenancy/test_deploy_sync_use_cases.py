"""The sync status's rollout on RoCE without HTTP (tenancy/usecases/deploy_sync.py): phase reports,
whether a leaf must remove access when its snapshot's files are gone, and the cache of that
answer per snapshot pair and leaf."""

from __future__ import annotations

from typing import Any

import pytest

from policies.errors import ConflictError, NotFoundError
from tenancy.schemas import (
    AllocationCreate,
    GrantCreate,
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
    fabrics,
    shared_services,
    snapshot_history,
    tenants,
    topology,
)
from tests.api.test_roce_deploy import LEAVES, three_leaf_inventory
from tests.builders import ROCE_FABRIC, ROCE_FABRIC_SPEC, ROCE_STORAGE_NODES, SERVICE

SONIC = TargetCreate(kind="sonic")


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty answer cache: equal snapshots in another test's database have equal digests."""
    monkeypatch.setattr(deploy_sync, "_REMOVALS", deploy_sync._RemovalCache(16))


def build(uow: UnitOfWork) -> str:
    """Three leaves (leaf03 only globex's), acme granted storage, every leaf registered;
    returns acme's grant id."""
    fabrics.create_fabric(uow, spec=RoceFabricCreate.model_validate(ROCE_FABRIC_SPEC))
    inventory = RoceInventory.model_validate(three_leaf_inventory())
    topology.import_roce_topology(uow, fabric_name=ROCE_FABRIC, inventory=inventory)
    spec = ServiceCreate(name=SERVICE, nodes=list(ROCE_STORAGE_NODES))
    shared_services.create_service(uow, fabric_name=ROCE_FABRIC, spec=spec)
    for tenant, nodes in (("acme", ["gpu0001"]), ("globex", ["gpu0005"])):
        tenants.create_tenant(uow, spec=TenantCreate(name=tenant, kind="external"))
        body = AllocationCreate(fabric=ROCE_FABRIC, nodes=nodes)
        allocations.allocate(uow, tenant_name=tenant, spec=body)
    grant = GrantCreate(fabric=ROCE_FABRIC, service=SERVICE)
    grant_id = shared_services.grant_service(uow, tenant_name="acme", spec=grant).id
    for leaf in LEAVES:
        deploy.put_target(uow, fabric_name=ROCE_FABRIC, name=leaf, spec=SONIC)
    return grant_id


def apply_everywhere(uow: UnitOfWork, digest: str) -> None:
    for leaf in LEAVES:
        report = ReportCreate(state="applied", digest=digest, observed_digest=digest, phase=2)
        deploy.post_report(uow, fabric_name=ROCE_FABRIC, target_name=leaf, report=report)


def affected(uow: UnitOfWork) -> dict[str, bool]:
    status = deploy_sync.sync_status(uow, fabric_name=ROCE_FABRIC)
    return {t.name: t.affected for t in status.targets}


def test_a_sonic_target_on_an_infiniband_fabric_is_refused(uow: UnitOfWork, onboarded: Any):
    with pytest.raises(ConflictError, match="roce"):
        deploy.put_target(uow, fabric_name="ib-east", name="leaf01", spec=SONIC)


def test_a_leaf_whose_deployed_files_are_gone_is_taken_as_affected(uow: UnitOfWork):
    grant_id = build(uow)
    start = deploy_sync.sync_status(uow, fabric_name=ROCE_FABRIC).desired
    apply_everywhere(uow, start)  # reported, but no agent fetched the manifest: nothing kept
    shared_services.revoke_grant(uow, tenant_name="acme", grant_id=grant_id)

    # leaf03 removes nothing, but without its files nobody can tell: it must report phase 1
    assert affected(uow) == dict.fromkeys(LEAVES, True)


def test_whether_a_leaf_removes_access_is_computed_once_per_snapshot_pair(
    uow: UnitOfWork, monkeypatch: pytest.MonkeyPatch
):
    grant_id = build(uow)
    start = snapshot_history.signed_manifest(uow, fabric_name=ROCE_FABRIC)  # keeps the files
    assert start.payload
    apply_everywhere(uow, deploy_sync.sync_status(uow, fabric_name=ROCE_FABRIC).desired)
    shared_services.revoke_grant(uow, tenant_name="acme", grant_id=grant_id)
    reads: list[str] = []
    read_files = snapshot_history.snapshot_files

    def counted(uow: UnitOfWork, *, fabric_name: str, digest: str, paths: list[str]) -> Any:
        reads.extend(paths)
        return read_files(uow, fabric_name=fabric_name, digest=digest, paths=paths)

    monkeypatch.setattr(snapshot_history, "snapshot_files", counted)

    first = affected(uow)
    read_first = len(reads)
    second = affected(uow)

    assert first == second == {"leaf01": True, "leaf02": True, "leaf03": False}
    assert read_first == 3 * 2 * len(LEAVES)  # three files of two snapshots per leaf
    assert len(reads) == read_first


def test_a_leaf_the_desired_snapshot_has_no_files_for_does_not_hold_phase_1(
    uow: UnitOfWork, monkeypatch: pytest.MonkeyPatch
):
    build(uow)
    snapshot_history.signed_manifest(uow, fabric_name=ROCE_FABRIC)
    start = deploy_sync.sync_status(uow, fabric_name=ROCE_FABRIC).desired
    apply_everywhere(uow, start)
    tenants.offboard_tenant(uow, name="globex")  # leaf01 and leaf03 held globex's ports
    read_files = snapshot_history.snapshot_files

    def leaf03_gone(uow: UnitOfWork, *, fabric_name: str, digest: str, paths: list[str]) -> Any:
        # What a leaf removed from the rendered topology looks like: the desired snapshot has
        # no files for it (the manifest lists none, so its agent could never report phase 1).
        if digest != start and any("/leaf03/" in path for path in paths):
            raise NotFoundError("no such artifact", resource="artifact")
        return read_files(uow, fabric_name=fabric_name, digest=digest, paths=paths)

    monkeypatch.setattr(snapshot_history, "snapshot_files", leaf03_gone)

    status = deploy_sync.sync_status(uow, fabric_name=ROCE_FABRIC)

    assert {t.name: t.affected for t in status.targets} == {
        "leaf01": True,
        "leaf02": False,
        "leaf03": False,
    }
    assert status.phase == 1 and "leaf03" in status.behind
