"""Scale benchmark (make bench): 12,500 nodes x 8 HCAs = 100,000 ports, 2,000 tenants.

Prints the figures issue 2 asks for: snapshot load from SQLite, verify_isolation, render of
partitions.conf, peak RSS; plus topology import of the same fabric. Never asserts on time.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from faker import Faker
from sqlalchemy import Connection, Select, delete, insert, select, update
from sqlmodel import col

from policies.infiniband.render import render_partitions_conf
from policies.infiniband.verify import verify_isolation
from tenancy import models as m
from tenancy.record.snapshot import load_ib_snapshot
from tenancy.schemas import FabricCreate, PKeyRange
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.fabrics import create_fabric
from tenancy.usecases.topology import import_topology
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


SegmentRows = Callable[[int, int, datetime, int | None, int | None], list[dict[str, Any]]]


def pkey_rows(
    fabric_id: int, index: int, now: datetime, tenant_id: int | None, service_id: int | None
) -> list[dict[str, Any]]:
    """The partition row `take_pkey` claims for the `index`-th owner: the lowest free P_Key."""
    return [
        {
            "fabric_id": fabric_id,
            "kind": "pkey",
            "value": 0x0100 + index,
            "state": "active",
            "tenant_id": tenant_id,
            "service_id": service_id,
            "created_at": now,
        }
    ]


def tenant_names(count: int, prefix: str = "t-") -> list[str]:
    """`count` seeded, sorted tenant names (the same ones every run)."""
    Faker.seed(2026)
    fake = Faker()
    names = sorted({fake.unique.slug()[:40].strip("-") for _ in range(count)})[:count]
    return [f"{prefix}{n}" for n in names]


def populate(
    uow: UnitOfWork,
    *,
    fabric_name: str = "bench",
    tenants: int = TENANTS,
    nodes_per_tenant: int = NODES_PER_TENANT,
    storage_nodes: int = STORAGE_NODES,
    prefix: str = "t-",
    segments: SegmentRows = pkey_rows,
) -> None:
    """Seeded tenants with a segment and `nodes_per_tenant` nodes each; storage for every other.

    The tenants hold the fabric's first nodes in name order; a `storage` service holds the last
    `storage_nodes` nodes and is granted to every other tenant. Bulk inserts of what the use
    cases write: allocations, node assignments (held nodes are `allocated`), segments
    (`segments`, P_Keys by default) and grants; no audit entries, no usage intervals.
    """
    with uow.transaction() as tx:
        conn, now = tx.session.connection(), tx.now
        fabric_id = _ids(conn, select(col(m.Fabric.id)).where(col(m.Fabric.name) == fabric_name))[0]
        node_ids = _ids(
            conn,
            select(col(m.Node.id))
            .where(col(m.Node.fabric_id) == fabric_id)
            .order_by(col(m.Node.name)),
        )
        tenant_ids = _insert_tenants(conn, tenant_names(tenants, prefix), now)
        conn.execute(insert(m.Service).values(fabric_id=fabric_id, name="storage", created_at=now))
        service_id = _ids(
            conn, select(col(m.Service.id)).where(col(m.Service.fabric_id) == fabric_id)
        )[0]
        held = [node_ids[i * nodes_per_tenant : (i + 1) * nodes_per_tenant] for i in range(tenants)]
        _hold_nodes(conn, fabric_id, tenant_ids, held, now)
        _hold_for_service(conn, service_id, node_ids[len(node_ids) - storage_nodes :])
        rows = [r for i, t in enumerate(tenant_ids) for r in segments(fabric_id, i, now, t, None)]
        rows += segments(fabric_id, len(tenant_ids), now, None, service_id)
        conn.execute(insert(m.Segment), rows)
        _grant(conn, fabric_id, service_id, tenant_ids[::2], now)
        # These rows bypass the commit gate: forget the fabric's incremental digest state, so
        # that the next change verifies the whole fabric and rebuilds it (tenancy/change_check).
        conn.execute(delete(m.DigestGroup).where(col(m.DigestGroup.fabric_id) == fabric_id))
        conn.execute(delete(m.FabricDigest).where(col(m.FabricDigest.fabric_id) == fabric_id))


def _ids(conn: Connection, query: Select[Any]) -> list[int]:
    """The first column of `query`'s rows as ints (primary keys, never null)."""
    return [int(row[0]) for row in conn.execute(query)]


def _insert_tenants(conn: Connection, names: list[str], now: datetime) -> list[int]:
    """Insert the tenants (QoS class gold); their ids in the order of `names`."""
    gold = conn.execute(
        select(col(m.QosClass.id)).where(col(m.QosClass.name) == "gold")
    ).scalar_one()
    conn.execute(
        insert(m.Tenant),
        [
            {
                "name": n,
                "kind": "external",
                "status": "active",
                "qos_class_id": gold,
                "created_at": now,
            }
            for n in names
        ],
    )
    query = select(col(m.Tenant.id)).where(col(m.Tenant.name).in_(names))
    return _ids(conn, query.order_by(col(m.Tenant.id)))  # insertion order: `names` order


def _hold_nodes(
    conn: Connection,
    fabric_id: int,
    tenant_ids: list[int],
    held: list[list[int]],
    now: datetime,
) -> None:
    """One allocation per tenant holding its nodes; held nodes are `allocated`."""
    allocations = [str(uuid.uuid4()) for _ in tenant_ids]
    conn.execute(
        insert(m.Allocation),
        [
            {"id": a, "tenant_id": t, "fabric_id": fabric_id, "created_at": now}
            for a, t in zip(allocations, tenant_ids, strict=True)
        ],
    )
    conn.execute(
        insert(m.NodeAssignment),
        [
            {"node_id": n, "allocation_id": a, "service_id": None}
            for a, nodes in zip(allocations, held, strict=True)
            for n in nodes
        ],
    )
    _mark_allocated(conn, [n for nodes in held for n in nodes])


def _hold_for_service(conn: Connection, service_id: int, node_ids: list[int]) -> None:
    conn.execute(
        insert(m.NodeAssignment),
        [{"node_id": n, "allocation_id": None, "service_id": service_id} for n in node_ids],
    )
    _mark_allocated(conn, node_ids)


def _mark_allocated(conn: Connection, node_ids: list[int]) -> None:
    # Held nodes are `allocated` (tenancy/record/node_states.py keeps the two in step).
    conn.execute(update(m.Node).where(col(m.Node.id).in_(node_ids)).values(state="allocated"))


def _grant(
    conn: Connection, fabric_id: int, service_id: int, tenant_ids: list[int], now: datetime
) -> None:
    conn.execute(
        insert(m.Grant),
        [
            {
                "id": str(uuid.uuid4()),
                "tenant_id": t,
                "fabric_id": fabric_id,
                "service_id": service_id,
                "created_at": now,
            }
            for t in tenant_ids
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
