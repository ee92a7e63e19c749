"""RoCE sync status benchmark (make bench): the phased rollout's cost at scale (issue 16).

The fabric is bench_roce's: 64 leaves, 16,384 NICs, 500 tenants. Every leaf is a registered
SONiC target that applied the first snapshot (its files retained by a signed manifest); then one
tenant is offboarded and an agent fetches the new manifest (the render, shared with `sync`).
`GET …/sync` must then tell, per leaf, whether the leaf removes access (VLAN members or
route-target imports the new snapshot lacks): cold, it reads both snapshots' files of every leaf
and compares them; warm, the answers come from the in-process cache. Prints the times and the
affected leaves. Never asserts on time.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tenancy.schemas import ReportCreate, RoceFabricCreate, RoceInventory, TargetCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import deploy, deploy_sync, snapshot_history, tenants
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.fabrics import create_fabric
from tenancy.usecases.topology import import_roce_topology
from tests.benchmarks.bench_roce import inventory_document, populate
from tests.benchmarks.timing import measure, print_peak_rss
from tests.keys import key_settings, register_key

FABRIC = "bench"


def deployed_fabric(uow: UnitOfWork) -> list[str]:
    """The bench fabric with every leaf a target that applied its snapshot; the leaf names."""
    create_fabric(uow, spec=RoceFabricCreate(name=FABRIC, kind="roce"))
    document = inventory_document()
    inventory = RoceInventory.model_validate(document)
    import_roce_topology(uow, fabric_name=FABRIC, inventory=inventory)
    populate(uow)
    # populate bulk-inserts rows: importing the same inventory again records the populated state
    # (a topology import rebuilds the fabric's digest from the whole snapshot)
    import_roce_topology(uow, fabric_name=FABRIC, inventory=inventory)
    leaves = [s["name"] for s in document["switches"] if s["role"] == "leaf"]
    for leaf in leaves:
        deploy.put_target(uow, fabric_name=FABRIC, name=leaf, spec=TargetCreate(kind="sonic"))
    measure(
        "signed manifest (retains every file)",
        lambda: snapshot_history.signed_manifest(uow, fabric_name=FABRIC),
    )
    digest = deploy_sync.sync_status(uow, fabric_name=FABRIC).desired
    for leaf in leaves:
        report = ReportCreate(state="applied", digest=digest, observed_digest=digest, phase=2)
        deploy.post_report(uow, fabric_name=FABRIC, target_name=leaf, report=report)
    return leaves


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{Path(scratch) / 'bench.db'}"
        engine = make_engine(url)
        prepare_database(engine)
        register_key(engine)
        settings = key_settings(Settings(database_url=url), copy_to=Path(scratch) / "keys")
        uow = UnitOfWork(engine, settings)
        leaves = measure("build, populate, deploy every leaf", lambda: deployed_fabric(uow))
        tenant = tenants.list_tenants(uow, limit=1, cursor=None).data[0].name
        measure(f"offboard {tenant}", lambda: tenants.offboard_tenant(uow, name=tenant))
        measure(  # what the first agent to poll does: renders the new state, once
            "signed manifest of the new snapshot",
            lambda: snapshot_history.signed_manifest(uow, fabric_name=FABRIC),
        )
        cold = measure(
            f"sync, cold ({len(leaves)} leaves)",
            lambda: deploy_sync.sync_status(uow, fabric_name=FABRIC),
        )
        measure("sync, warm", lambda: deploy_sync.sync_status(uow, fabric_name=FABRIC))
        affected = [t.name for t in cold.targets if t.affected]
        print(f"  phase {cold.phase}; {len(affected)} affected leaves: {', '.join(affected)}")
        print_peak_rss()
        engine.dispose()


if __name__ == "__main__":
    main()
