"""Scale benchmark (make bench): 12,500 nodes x 8 HCAs = 100,000 ports, 2,000 tenants.

Prints the figures issue 2 asks for: snapshot load from SQLite, verify_isolation, render of
partitions.conf, peak RSS; plus topology import of the same fabric. Never asserts on time.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

from faker import Faker
from sqlalchemy import insert, select, update
from sqlmodel import col

from policies.infiniband.render import render_partitions_conf
from policies.infiniband.verify import verify_isolation
from tenancy import models as m
from tenancy.bootstrap import prepare_database
from tenancy.db import make_engine
from tenancy.fabrics import create_fabric
from tenancy.schemas import FabricCreate, PKeyRange
from tenancy.settings import Settings
from tenancy.snapshot import load_ib_snapshot
from tenancy.topology import import_topology
from tenancy.uow import UnitOfWork
from tests.benchmarks.timing import measure, print_peak_rss

NODES, HCAS, TENANTS, NODES_PER_TENANT, STORAGE_NODES = 12_500, 8, 2_000, 6, 50
LEAF_PORTS = 32


def ibnetdiscover_text(nodes: int, hcas: int) -> str:
    """A rail-optimised fabric in ibnetdiscover's format: HCA k of every node on rail-k leaves."""
    lines: list[str] = []
    leaves_per_rail = -(-nodes // LEAF_PORTS)
    for rail in range(hcas):
        for leaf in range(leaves_per_rail):
            guid = 0x200000 + rail * leaves_per_rail + leaf
            lines += [
                "",
                f"switchguid=0x{guid:x}({guid:x})",
                f'Switch\t{LEAF_PORTS} "S-{guid:016x}"\t\t# "leaf-r{rail}-{leaf:03d}" '
                "base port 0 lid 1 lmc 0",
            ]
    for node in range(nodes):
        for rail in range(hcas):
            ca = 0x1000000 + (node * hcas + rail) * 2
            leaf, port = divmod(node, LEAF_PORTS)
            sw = 0x200000 + rail * leaves_per_rail + leaf
            lines += [
                "",
                f"caguid=0x{ca:x}",
                f'Ca\t1 "H-{ca:016x}"\t\t# "gpu{node:05d} mlx5_{rail}"',
                f'[1]({ca + 1:x}) \t"S-{sw:016x}"[{port + 1}]\t\t# lid 2 lmc 0 '
                f'"leaf-r{rail}-{leaf:03d}" lid 1 4xNDR',
            ]
    return "\n".join(lines) + "\n"


def populate(uow: UnitOfWork) -> None:
    """2,000 seeded tenants with 6 nodes each; storage on 50 nodes granted to every other tenant."""
    Faker.seed(2026)
    fake = Faker()
    names = sorted({fake.unique.slug()[:40].strip("-") for _ in range(TENANTS)})[:TENANTS]
    with uow.transaction() as tx:
        s, now = tx.session, tx.now
        fabric = s.exec(select(m.Fabric)).scalars().one()  # type: ignore[call-overload]
        node_ids = [
            row[0]
            for row in s.connection().execute(select(col(m.Node.id)).order_by(col(m.Node.name)))
        ]
        gold = s.exec(select(m.QosClass).where(col(m.QosClass.name) == "gold")).scalars().one()  # type: ignore[call-overload]
        conn = s.connection()
        conn.execute(
            insert(m.Tenant),
            [
                {
                    "name": f"t-{n}",
                    "kind": "external",
                    "status": "active",
                    "qos_class_id": gold.id,
                    "created_at": now,
                }
                for n in names
            ],
        )
        tenant_ids = [
            row[0] for row in conn.execute(select(col(m.Tenant.id)).order_by(col(m.Tenant.id)))
        ]
        conn.execute(
            insert(m.Service), [{"fabric_id": fabric.id, "name": "storage", "created_at": now}]
        )
        service_id = conn.execute(select(col(m.Service.id))).scalar_one()
        allocations, assignments = [], []
        for index, tenant_id in enumerate(tenant_ids):
            allocation = str(uuid.uuid4())
            allocations.append(
                {
                    "id": allocation,
                    "tenant_id": tenant_id,
                    "fabric_id": fabric.id,
                    "created_at": now,
                }
            )
            for node_id in node_ids[index * NODES_PER_TENANT : (index + 1) * NODES_PER_TENANT]:
                assignments.append(
                    {"node_id": node_id, "allocation_id": allocation, "service_id": None}
                )
        assignments += [
            {"node_id": n, "allocation_id": None, "service_id": service_id}
            for n in node_ids[-STORAGE_NODES:]
        ]
        conn.execute(insert(m.Allocation), allocations)
        conn.execute(insert(m.NodeAssignment), assignments)
        # Held nodes are `allocated` (tenancy/node_states.py keeps the two in step).
        held_ids = [a["node_id"] for a in assignments]
        conn.execute(update(m.Node).where(col(m.Node.id).in_(held_ids)).values(state="allocated"))
        conn.execute(
            insert(m.Segment),
            [
                {
                    "fabric_id": fabric.id,
                    "kind": "pkey",
                    "value": 0x0100 + i,
                    "state": "active",
                    "tenant_id": t,
                    "service_id": None,
                    "created_at": now,
                }
                for i, t in enumerate(tenant_ids)
            ]
            + [
                {
                    "fabric_id": fabric.id,
                    "kind": "pkey",
                    "value": 0x0100 + len(tenant_ids),
                    "state": "active",
                    "tenant_id": None,
                    "service_id": service_id,
                    "created_at": now,
                }
            ],
        )
        conn.execute(
            insert(m.Grant),
            [
                {
                    "id": str(uuid.uuid4()),
                    "tenant_id": t,
                    "fabric_id": fabric.id,
                    "service_id": service_id,
                    "created_at": now,
                }
                for t in tenant_ids[::2]
            ],
        )


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{Path(scratch) / 'bench.db'}"
        engine = make_engine(url)
        prepare_database(engine)
        uow = UnitOfWork(engine, Settings(database_url=url))
        create_fabric(
            uow,
            spec=FabricCreate(
                name="bench", kind="infiniband", pkey_range=PKeyRange(first="0x0100", last="0x7ffe")
            ),
        )
        text = measure("generate ibnetdiscover text", lambda: ibnetdiscover_text(NODES, HCAS))
        result = measure(
            "import topology (100k ports)",
            lambda: import_topology(uow, fabric_name="bench", text=text),
        )
        print(f"  {result.switches} switches, {result.nodes} nodes, {result.ports} ports")
        measure("populate 2,000 tenants (bulk insert)", lambda: populate(uow))
        with uow.transaction() as tx:
            fabric = tx.session.exec(select(m.Fabric)).scalars().one()  # type: ignore[call-overload]
            snapshot = measure(
                "snapshot load from SQLite", lambda: load_ib_snapshot(tx.session, fabric)
            )
        members = sum(len(p.members) for p in snapshot.partitions)
        print(
            f"  {len(snapshot.ports)} ports, {len(snapshot.partitions)} partitions, "
            f"{members} memberships"
        )
        verdict = measure("verify_isolation", lambda: verify_isolation(snapshot))
        print(f"  holds={verdict.holds}, {len(verdict.reachability)} reachability edges")
        text = measure("render partitions.conf", lambda: render_partitions_conf(snapshot))
        print(f"  {len(text.encode()) / 1e6:.1f} MB, {text.count(chr(10))} lines")
        print_peak_rss()


if __name__ == "__main__":
    main()
