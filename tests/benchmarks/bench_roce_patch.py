"""CONFIG_DB patch benchmark (make bench): every leaf's patch for an onboarding and an offboarding.

The fabric is bench_roce's: 64 leaves with 256 host ports each, 2,048 nodes x 8 NICs = 16,384
NICs, 500 tenants and a storage service, loaded from SQLite once. Offboarding removes one tenant
(its segment and its nodes' holder) from that snapshot; onboarding is the same tenant joining the
fabric without it. Per leaf, what an agent or `GET …/patches/{leaf}` computes: render the target
config_db, its ownership, and `leaf_patch` from the running document (rendered beforehand, as
an agent reads it from the switch). Prints the total and the per-leaf median and maximum, the
operations counted, and checks that no leaf's patch is disruptive. Never asserts on time.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from sqlalchemy import select

from policies.model import Owner
from policies.roce.model import RoceSnapshot
from policies.roce.ownership import leaf_ownership
from policies.roce.patch import LeafPatch, leaf_patch
from policies.roce.render_sonic import ConfigDb, render_config_db
from tenancy import models as m
from tenancy.record.snapshot import load_roce_snapshot
from tenancy.schemas import RoceFabricCreate, RoceInventory
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.fabrics import create_fabric
from tenancy.usecases.topology import import_roce_topology
from tests.benchmarks.bench_roce import inventory_document, populate
from tests.benchmarks.timing import measure, print_peak_rss


def bench_snapshot() -> RoceSnapshot:
    """bench_roce's 64-leaf, 16k-NIC fabric with 500 tenants, as the service loads it."""
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{Path(scratch) / 'bench.db'}"
        engine = make_engine(url)
        prepare_database(engine)
        uow = UnitOfWork(engine, Settings(database_url=url))
        create_fabric(uow, spec=RoceFabricCreate(name="bench", kind="roce"))
        inventory = RoceInventory.model_validate(inventory_document())
        import_roce_topology(uow, fabric_name="bench", inventory=inventory)
        populate(uow)
        with uow.transaction(read_only=True) as tx:
            fabric = tx.session.exec(select(m.Fabric)).scalars().one()  # type: ignore[call-overload]
            snapshot = load_roce_snapshot(tx.session, fabric)
        engine.dispose()
        return snapshot


def without(snapshot: RoceSnapshot, owner: Owner) -> RoceSnapshot:
    """The snapshot after `owner` is offboarded: no segment, its nodes free, no grants."""
    return replace(
        snapshot,
        segments=tuple(s for s in snapshot.segments if s.owner != owner),
        nodes=tuple(
            replace(n, owners=tuple(o for o in n.owners if o != owner)) for n in snapshot.nodes
        ),
        grants=tuple(g for g in snapshot.grants if Owner.tenant(g.tenant) != owner),
    )


def running_documents(snapshot: RoceSnapshot) -> dict[str, ConfigDb]:
    """Every leaf's config_db as its switch holds it before the change."""
    return {leaf.name: render_config_db(snapshot, leaf.name) for leaf in snapshot.leaves()}


def patch_every_leaf(label: str, running: dict[str, ConfigDb], target: RoceSnapshot) -> None:
    """Render + ownership + leaf_patch per leaf, timed; print total, median, max and counts."""
    seconds: list[float] = []
    patches: list[LeafPatch] = []
    for leaf, document in running.items():
        start = time.perf_counter()
        wanted = render_config_db(target, leaf)
        patches.append(leaf_patch(document, wanted, leaf_ownership(target, leaf)))
        seconds.append(time.perf_counter() - start)
    owned = sum(len(p.owned) for p in patches)
    disruptive = sum(len(p.disruptive) for p in patches)
    changed = sum(1 for p in patches if p.owned)
    print(f"{label + ': every leaf':<38} {sum(seconds):8.2f} s")
    print(f"{'  per leaf, median':<38} {statistics.median(seconds) * 1000:8.1f} ms")
    print(f"{'  per leaf, max':<38} {max(seconds) * 1000:8.1f} ms")
    print(
        f"  {len(patches)} leaves, {changed} with owned ops: {owned} owned, {disruptive} disruptive"
    )
    if disruptive:
        print("  UNEXPECTED: a routine change is disruptive (tenancy/record/snapshot/roce.py)")


def main() -> None:
    snapshot = measure("build, import, populate, load (16k NICs)", bench_snapshot)
    tenant = next(s.owner for s in snapshot.segments if s.owner.kind.value == "tenant")
    print(f"  {len(snapshot.leaves())} leaves, {len(snapshot.nics)} NICs, tenant {tenant.name}")
    offboarded = without(snapshot, tenant)
    before = measure("render the running documents first", lambda: running_documents(snapshot))
    patch_every_leaf("offboard one tenant", before, offboarded)
    after = running_documents(offboarded)
    patch_every_leaf("onboard one tenant", after, snapshot)
    print_peak_rss()


if __name__ == "__main__":
    main()
