"""RoCE scale benchmark (make bench): 64 leaves, 2,048 nodes x 8 NICs = 16,384 ports, 500 tenants.

Prints the figures issue 3 asks for: verify_roce and the render of every leaf's config_db.json
and frr.conf (targets on the reference machine: verify <= 1 s, render of all leaves <= 3 s), plus
inventory import through the real use case, snapshot load from SQLite and peak RSS. Never asserts
on time.

Fabric (rail-optimised, two tiers, non-blocking):

* 8 rails x 8 leaves = 64 leaves. NIC k of every node is cabled to a rail-k leaf; leaf j of a rail
  serves nodes 256*j .. 256*j+255, so each leaf has 256 host ports.
* A leaf is a 102.4 Tb/s box (128 x 800G cages, 512 x 200G SerDes): cages 0-63 are split 4 x 200G
  into the 256 host ports (Ethernet0 .. Ethernet255, one lane each), cages 64-127 are 64 x 800G
  uplinks (Ethernet256, Ethernet260, ..., four lanes each): 51.2 Tb/s down, 51.2 Tb/s up.
* 64 spines of 64 x 800G (51.2 Tb/s); every leaf has one 800G link to every spine: 4,096 links.

Tenancy: 500 seeded tenants with 4 nodes each (nodes 0-1999) and QoS gold/silver/bronze in turn;
a `storage` service on the remaining 48 nodes, granted to every other tenant (250 grants). VRF
segments are written directly, as `take_vrf_segment` would take them (lowest free value of each
pool of `tenancy.record.vrf_segments._pools`), with bulk inserts.
"""

from __future__ import annotations

import tempfile
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from faker import Faker
from sqlalchemy import Connection, insert, select, update
from sqlmodel import col

from policies.roce.bundle import render_roce_artifacts
from policies.roce.verify import verify_roce
from tenancy import models as m
from tenancy.record.snapshot import load_roce_snapshot
from tenancy.schemas import RoceFabricCreate, RoceInventory
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.fabrics import create_fabric
from tenancy.usecases.topology import import_roce_topology
from tests.benchmarks.timing import measure, print_peak_rss

RAILS, LEAVES_PER_RAIL, NODES = 8, 8, 2_048
HOST_PORTS = NODES // LEAVES_PER_RAIL  # 256 host ports per leaf
UPLINKS = SPINES = 64  # one 800G link from every leaf to every spine
HOST_SPEED, UPLINK_SPEED = 200_000, 800_000  # Mb/s, as SONiC writes it
TENANTS, NODES_PER_TENANT, QOS = 500, 4, ("gold", "silver", "bronze")
# Pool origins of RoceFabricCreate's defaults (vlan 100-3999, l2vni 10000-, l3vni 50000-, rd 1-).
VLAN_FIRST, L2VNI_FIRST, L3VNI_FIRST, RD_FIRST = 100, 10_000, 50_000, 1


def leaf_name(rail: int, index: int) -> str:
    return f"leaf-r{rail}-{index}"


def port(first_lane: int, lanes: int, speed: int) -> dict[str, Any]:
    """A SONiC PORT named after its first lane (``Ethernet<lane>``)."""
    lane_list = ",".join(str(lane) for lane in range(first_lane, first_lane + lanes))
    return {"name": f"Ethernet{first_lane}", "lanes": lane_list, "speed": speed}


def inventory_document() -> dict[str, Any]:
    """The fabric as the JSON inventory document `PUT .../topology` takes (see module docstring)."""
    uplinks = [HOST_PORTS + 4 * u for u in range(UPLINKS)]
    leaf_ports = [port(p, 1, HOST_SPEED) for p in range(HOST_PORTS)]
    leaf_ports += [port(p, 4, UPLINK_SPEED) for p in uplinks]
    spine_ports = [port(4 * n, 4, UPLINK_SPEED) for n in range(RAILS * LEAVES_PER_RAIL)]
    switches: list[dict[str, Any]] = []
    links: list[dict[str, str]] = []
    for rail in range(RAILS):
        for index in range(LEAVES_PER_RAIL):
            n = rail * LEAVES_PER_RAIL + index
            switches.append(
                {
                    "name": leaf_name(rail, index),
                    "role": "leaf",
                    "asn": 4_200_000_000 + n,
                    "loopback": f"10.0.0.{n + 1}",
                    "vtep": f"10.0.1.{n + 1}",
                    "ports": leaf_ports,
                }
            )
            links += [
                {"a": f"{leaf_name(rail, index)}:Ethernet{p}", "b": f"spine{s:02d}:Ethernet{4 * n}"}
                for s, p in enumerate(uplinks)
            ]
    switches += [
        {
            "name": f"spine{s:02d}",
            "role": "spine",
            "asn": 4_100_000_000,
            "loopback": f"10.0.2.{s + 1}",
            "ports": spine_ports,
        }
        for s in range(SPINES)
    ]
    nodes = [
        {
            "name": f"gpu{node:04d}",
            "nics": [
                {
                    "name": f"mlx5_{rail}",
                    "switch": leaf_name(rail, node // HOST_PORTS),
                    "port": f"Ethernet{node % HOST_PORTS}",
                }
                for rail in range(RAILS)
            ],
        }
        for node in range(NODES)
    ]
    return {"switches": switches, "links": links, "nodes": nodes}


def segment_rows(
    fabric_id: int, index: int, now: Any, tenant_id: int | None, service_id: int | None
) -> list[dict[str, Any]]:
    """The six rows `take_vrf_segment` takes for the `index`-th owner (kind, purpose, value)."""
    values = (
        ("vni", "l3vni", L3VNI_FIRST + index),
        ("vlan", "vlan", VLAN_FIRST + 2 * index),
        ("vlan", "l3vni_vlan", VLAN_FIRST + 2 * index + 1),
        ("vni", "l2vni", L2VNI_FIRST + index),
        ("subnet", "subnet", index),
        ("rd", "rd", RD_FIRST + index),
    )
    return [
        {
            "fabric_id": fabric_id,
            "kind": kind,
            "purpose": purpose,
            "value": value,
            "state": "active",
            "tenant_id": tenant_id,
            "service_id": service_id,
            "created_at": now,
        }
        for kind, purpose, value in values
    ]


def populate(uow: UnitOfWork) -> None:
    """500 seeded tenants with 4 nodes and a VRF segment each; storage granted to every other."""
    Faker.seed(2026)
    fake = Faker()
    names = sorted({fake.unique.slug()[:40].strip("-") for _ in range(TENANTS)})[:TENANTS]
    with uow.transaction() as tx:
        conn, now = tx.session.connection(), tx.now
        fabric = tx.session.exec(select(m.Fabric)).scalars().one()  # type: ignore[call-overload]
        node_ids = [
            row[0] for row in conn.execute(select(col(m.Node.id)).order_by(col(m.Node.name)))
        ]
        tenant_ids = insert_tenants(conn, names, now)
        conn.execute(
            insert(m.Service), [{"fabric_id": fabric.id, "name": "storage", "created_at": now}]
        )
        service_id = conn.execute(select(col(m.Service.id))).scalar_one()
        insert_holdings(conn, m.pk(fabric), node_ids, tenant_ids, service_id, now)
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


def insert_tenants(conn: Connection, names: list[str], now: datetime) -> list[Any]:
    """External tenants named ``t-<name>``, QoS classes in turn; their ids in order."""
    qos_ids = dict(conn.execute(select(col(m.QosClass.name), col(m.QosClass.id))).all())
    rows = [
        {
            "name": f"t-{n}",
            "kind": "external",
            "status": "active",
            "qos_class_id": qos_ids[QOS[i % len(QOS)]],
            "created_at": now,
        }
        for i, n in enumerate(names)
    ]
    conn.execute(insert(m.Tenant), rows)
    return list(conn.execute(select(col(m.Tenant.id)).order_by(col(m.Tenant.id))).scalars())


def insert_holdings(
    conn: Connection,
    fabric_id: int,
    node_ids: list[Any],
    tenant_ids: list[Any],
    service_id: Any,
    now: datetime,
) -> None:
    """Each tenant's allocation of its nodes and segment; the rest of the nodes are storage."""
    allocations, assignments, segments = [], [], []
    for index, tenant_id in enumerate(tenant_ids):
        allocation = str(uuid.uuid4())
        allocations.append(
            {"id": allocation, "tenant_id": tenant_id, "fabric_id": fabric_id, "created_at": now}
        )
        held = node_ids[index * NODES_PER_TENANT : (index + 1) * NODES_PER_TENANT]
        assignments += [
            {"node_id": n, "allocation_id": allocation, "service_id": None} for n in held
        ]
        segments += segment_rows(fabric_id, index, now, tenant_id, None)
    assignments += [
        {"node_id": n, "allocation_id": None, "service_id": service_id}
        for n in node_ids[TENANTS * NODES_PER_TENANT :]
    ]
    segments += segment_rows(fabric_id, len(tenant_ids), now, None, service_id)
    conn.execute(insert(m.Allocation), allocations)
    conn.execute(insert(m.NodeAssignment), assignments)
    # Held nodes are `allocated` (tenancy/record/node_states.py keeps the two in step).
    held_ids = [a["node_id"] for a in assignments]
    conn.execute(update(m.Node).where(col(m.Node.id).in_(held_ids)).values(state="allocated"))
    conn.execute(insert(m.Segment), segments)


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{Path(scratch) / 'bench.db'}"
        engine = make_engine(url)
        prepare_database(engine)
        uow = UnitOfWork(engine, Settings(database_url=url))
        create_fabric(uow, spec=RoceFabricCreate(name="bench", kind="roce"))
        inventory = measure(
            "build + validate inventory document",
            lambda: RoceInventory.model_validate(inventory_document()),
        )
        result = measure(
            "import inventory (16k NICs)",
            lambda: import_roce_topology(uow, fabric_name="bench", inventory=inventory),
        )
        print(
            f"  {result.switches} switches, {len(inventory.links)} links, {result.nodes} nodes, "
            f"{result.ports} NICs"
        )
        measure("populate 500 tenants (bulk insert)", lambda: populate(uow))
        with uow.transaction() as tx:
            fabric = tx.session.exec(select(m.Fabric)).scalars().one()  # type: ignore[call-overload]
            snapshot = measure(
                "snapshot load from SQLite", lambda: load_roce_snapshot(tx.session, fabric)
            )
        print(
            f"  {len(snapshot.switches)} switches, {len(snapshot.nics)} NICs, "
            f"{len(snapshot.segments)} segments, {len(snapshot.grants)} grants"
        )
        verdict = measure("verify_roce (target <= 1 s)", lambda: verify_roce(snapshot))
        print(f"  holds={verdict.holds}, {len(verdict.reachability)} reachability edges")
        files = measure(
            "render all leaves (target <= 3 s)", lambda: render_roce_artifacts(snapshot)
        )
        size = sum(len(f.content) for f in files)
        print(f"  {len(files)} files, {size / 1e6:.1f} MB")
        print_peak_rss()


if __name__ == "__main__":
    main()
