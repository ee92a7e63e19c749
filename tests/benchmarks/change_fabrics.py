"""The starting states of the change benchmark (issue 12), built directly in a fresh database.

Each database gets a large fabric and a small one to compare it with, the signing key, keyring
and OpenSM secret (`isofabric keys create`) and one operator API token (`isofabric token
create`). Topologies go through the real import use cases; tenants, allocations, segments and
grants are bulk-inserted (`bench_scale.populate`), so the product never recorded that state: the
benchmark's first change over HTTP does (see `change_parts.settle`). The large and the small
fabric share the database and the server process: within a run, only the fabric's size differs.

* InfiniBand ``ib-100k``: 12,500 nodes x 8 HCAs = 100,000 ports; 2,000 tenants holding 2 nodes
  each (4,000 nodes); a ``storage`` service on the last 50 nodes, granted to every other tenant.
  ``ib-1k``: 125 nodes x 8 HCAs = 1,000 ports, the same shape at 1/100 (20 tenants, 1 storage
  node).
* RoCE ``roce-64``: bench_roce's fabric (64 leaves, 2,048 nodes x 8 NICs = 16,384 NICs) with
  500 tenants holding 2 nodes each and storage on the last 48 nodes. ``roce-1``: one such leaf
  (256 host ports) and no spines: 32 nodes x 8 NICs, 8 tenants holding 2 nodes, 1 storage node.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from sqlalchemy import make_url

from tenancy.schemas import (
    FabricCreate,
    PKeyRange,
    RoceFabricCreate,
    RoceInventory,
    TokenCreate,
)
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import signing_keys, tokens
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.fabrics import create_fabric
from tenancy.usecases.topology import import_roce_topology, import_topology
from tests.benchmarks import bench_roce
from tests.benchmarks.bench_scale import HCAS, ibnetdiscover_text, populate
from tests.benchmarks.timing import measure

NODES_PER_TENANT = 2
DATABASE_PREFIX = "isofabric_bench_"


@dataclass(frozen=True, slots=True)
class FabricShape:
    """A fabric of the benchmark: its size and the tenancy bulk-inserted on it."""

    name: str
    nodes: int
    tenants: int
    storage_nodes: int
    prefix: str  # of its tenants' names, unique per database

    @property
    def tenancy(self) -> str:
        """E.g. ``2,000 tenants x 2 nodes``."""
        return f"{self.tenants:,} tenants x {NODES_PER_TENANT} nodes"


IB_LARGE = FabricShape("ib-100k", nodes=12_500, tenants=2_000, storage_nodes=50, prefix="t-")
IB_SMALL = FabricShape("ib-1k", nodes=125, tenants=20, storage_nodes=1, prefix="s-")
ROCE_LARGE = FabricShape(
    "roce-64", nodes=bench_roce.NODES, tenants=500, storage_nodes=48, prefix="r-"
)
ROCE_SMALL = FabricShape("roce-1", nodes=32, tenants=8, storage_nodes=1, prefix="q-")


@dataclass(frozen=True, slots=True)
class Deployment:
    """A prepared database: what the server process needs, and the operator token to send."""

    environment: dict[str, str]
    token: str


def postgres_admin_url(url: str) -> str:
    """`url` as libpq takes it (no SQLAlchemy driver suffix such as ``+psycopg``)."""
    scheme, sep, rest = url.partition("://")
    return scheme.split("+", 1)[0] + sep + rest


def postgres_reachable(admin_url: str) -> str | None:
    """None if PostgreSQL answers at `admin_url`, else why not (one line)."""
    try:
        with psycopg.connect(postgres_admin_url(admin_url), connect_timeout=5):
            return None
    except psycopg.Error as error:
        return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


@contextmanager
def fresh_database(backend: str, scratch: Path, admin_url: str, tag: str) -> Iterator[str]:
    """A new, empty database for this run (SQLite file, or a PostgreSQL database dropped after).

    PostgreSQL databases are named ``isofabric_bench_<pid>_<tag>``: the run never touches
    another database (the test suite's ``test`` included).
    """
    if backend == "sqlite":
        yield f"sqlite:///{scratch / f'{tag}.db'}"
        return
    name = f"{DATABASE_PREFIX}{os.getpid()}_{tag}"
    _admin(admin_url, "CREATE DATABASE {}", name)
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        _admin(admin_url, "DROP DATABASE IF EXISTS {} WITH (FORCE)", name)


def _admin(admin_url: str, statement: str, name: str) -> None:
    assert name.startswith(DATABASE_PREFIX)  # never another database
    with psycopg.connect(postgres_admin_url(admin_url), autocommit=True) as connection:
        connection.execute(sql.SQL(statement).format(sql.Identifier(name)))


def server_settings(url: str, keys: Path) -> dict[str, str]:
    """The ``ISOFABRIC_*`` variables of the server: its database, key files, no quarantine."""
    return {
        "ISOFABRIC_DATABASE_URL": url,
        # The benchmark releases and reclaims P_Keys (and VNIs) all the time (issue 12).
        "ISOFABRIC_PKEY_QUARANTINE_SECONDS": "0",
        "ISOFABRIC_SIGNING_KEY_FILE": str(keys / "signing.key"),
        "ISOFABRIC_KEYRING_FILE": str(keys / "keyring.jsonl"),
        "ISOFABRIC_OPENSM_SECRET_FILE": str(keys / "opensm.secret"),
    }


def _settings(environment: dict[str, str]) -> Settings:
    return Settings(
        database_url=environment["ISOFABRIC_DATABASE_URL"],
        pkey_quarantine_seconds=0,
        signing_key_file=environment["ISOFABRIC_SIGNING_KEY_FILE"],
        keyring_file=environment["ISOFABRIC_KEYRING_FILE"],
        opensm_secret_file=environment["ISOFABRIC_OPENSM_SECRET_FILE"],
    )


def prepare_ib(url: str, keys: Path, label: str) -> Deployment:
    """Migrate the database at `url`, build ``ib-100k`` and ``ib-1k``, make keys and a token."""
    return _prepare(url, keys, label, _build_ib)


def prepare_roce(url: str, keys: Path, label: str) -> Deployment:
    """Migrate the database at `url`, build ``roce-64`` and ``roce-1``, make keys and a token."""
    return _prepare(url, keys, label, _build_roce)


def _prepare(
    url: str, keys: Path, label: str, build: Callable[[UnitOfWork, str], None]
) -> Deployment:
    keys.mkdir(parents=True, exist_ok=True)
    environment = server_settings(url, keys)
    engine = make_engine(url)
    try:
        prepare_database(engine)
        uow = UnitOfWork(engine, _settings(environment))
        build(uow, label)
        signing_keys.create(uow)
        spec = TokenCreate(name="bench-operator", role="operator")
        token = tokens.create_token(uow, spec=spec).token
    finally:
        engine.dispose()
    return Deployment(environment, token)


def _build_ib(uow: UnitOfWork, label: str) -> None:
    for shape in (IB_LARGE, IB_SMALL):
        spec = FabricCreate(
            name=shape.name,
            kind="infiniband",
            pkey_range=PKeyRange(first="0x0100", last="0x7ffe"),
        )
        create_fabric(uow, spec=spec)
        text = ibnetdiscover_text(shape.nodes, HCAS)
        measure(
            f"setup: import {shape.name} ({label})",
            lambda: import_topology(uow, fabric_name=shape.name, text=text),  # noqa: B023
        )
        _populate(uow, shape, label)


def _build_roce(uow: UnitOfWork, label: str) -> None:
    documents = {ROCE_LARGE.name: bench_roce.inventory_document(), ROCE_SMALL.name: one_leaf()}
    for shape in (ROCE_LARGE, ROCE_SMALL):
        create_fabric(uow, spec=RoceFabricCreate(name=shape.name, kind="roce"))
        inventory = RoceInventory.model_validate(documents[shape.name])
        measure(
            f"setup: import {shape.name} ({label})",
            lambda: import_roce_topology(uow, fabric_name=shape.name, inventory=inventory),  # noqa: B023
        )
        _populate(uow, shape, label, segments=bench_roce.segment_rows)


def _populate(uow: UnitOfWork, shape: FabricShape, label: str, **options: Any) -> None:
    measure(
        f"setup: tenancy of {shape.name} ({label})",
        lambda: populate(
            uow,
            fabric_name=shape.name,
            tenants=shape.tenants,
            nodes_per_tenant=NODES_PER_TENANT,
            storage_nodes=shape.storage_nodes,
            prefix=shape.prefix,
            **options,
        ),
    )
    print(f"  {shape.tenancy}, storage on {shape.storage_nodes} nodes granted to every other")


def one_leaf() -> dict[str, Any]:
    """One leaf of bench_roce's fabric (256 host ports, no uplinks), 32 nodes x 8 NICs on it."""
    ports = [bench_roce.port(p, 1, bench_roce.HOST_SPEED) for p in range(bench_roce.HOST_PORTS)]
    leaf = {
        "name": "leaf0",
        "role": "leaf",
        "asn": 4_200_000_000,
        "loopback": "10.0.0.1",
        "vtep": "10.0.1.1",
        "ports": ports,
    }
    nics = bench_roce.RAILS
    nodes = [
        {
            "name": f"gpu{node:04d}",
            "nics": [
                {"name": f"mlx5_{n}", "switch": "leaf0", "port": f"Ethernet{node * nics + n}"}
                for n in range(nics)
            ],
        }
        for node in range(ROCE_SMALL.nodes)
    ]
    return {"switches": [leaf], "links": [], "nodes": nodes}
