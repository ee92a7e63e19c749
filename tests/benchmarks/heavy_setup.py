"""The state bench_heavy_work runs on: two large fabrics, keys, three tokens, the heavy bodies.

The topologies go through the real import use cases; the tenancy is bulk-inserted
(`bench_scale.populate`), as in tests/benchmarks/change_fabrics.py.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2

from tenancy.schemas import FabricCreate, PKeyRange, RoceFabricCreate, RoceInventory, TokenCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import signing_keys, tokens
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.fabrics import create_fabric
from tenancy.usecases.topology import import_roce_topology, import_topology
from tests.benchmarks import bench_roce, heavy_bodies
from tests.benchmarks.bench_console import WARM_TIMEOUT_SECONDS, warm_state
from tests.benchmarks.bench_scale import HCAS, NODES, ibnetdiscover_text, populate, tenant_names
from tests.benchmarks.change_client import Api, allocate_and_release, create_tenant
from tests.benchmarks.change_fabrics import server_settings
from tests.benchmarks.timing import measure

IB, ROCE = "ib-100k", "roce-64"
IB_TENANTS, ROCE_TENANTS, NODES_PER_TENANT = 2_000, 500, 2
TOKENS = {"operator": "operator", "importer": "operator", "auditor": "auditor"}
HTTP_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class Prepared:
    """The server's environment, a token per name of TOKENS, and what the bodies name."""

    environment: dict[str, str]
    tokens: dict[str, str]
    leaf: str
    tenant: str


def prepare(scratch: Path) -> Prepared:
    """Migrate a SQLite database in `scratch`, build both fabrics, make keys and tokens."""
    keys = scratch / "keys"
    keys.mkdir()
    environment = server_settings(f"sqlite:///{scratch / 'heavy.db'}", keys)
    settings = Settings(
        database_url=environment["ISOFABRIC_DATABASE_URL"],
        signing_key_file=environment["ISOFABRIC_SIGNING_KEY_FILE"],
        keyring_file=environment["ISOFABRIC_KEYRING_FILE"],
        opensm_secret_file=environment["ISOFABRIC_OPENSM_SECRET_FILE"],
    )
    engine = make_engine(settings.database_url)
    try:
        prepare_database(engine)
        uow = UnitOfWork(engine, settings)
        _build(uow)
        signing_keys.create(uow)
        secrets = {
            name: tokens.create_token(uow, spec=TokenCreate(name=f"bench-{name}", role=role)).token
            for name, role in TOKENS.items()
        }
    finally:
        engine.dispose()
    (scratch / "ibnetdiscover.txt").write_text(ibnetdiscover_text(NODES, HCAS))
    leaf, tenant = bench_roce.leaf_name(0, 0), tenant_names(IB_TENANTS)[0]
    return Prepared(environment, secrets, leaf, tenant)


def _build(uow: UnitOfWork) -> None:
    ib = FabricCreate(
        name=IB, kind="infiniband", pkey_range=PKeyRange(first="0x0100", last="0x7ffe")
    )
    create_fabric(uow, spec=ib)
    text = ibnetdiscover_text(NODES, HCAS)
    measure(f"setup: import {IB}", lambda: import_topology(uow, fabric_name=IB, text=text))
    populate(uow, fabric_name=IB, tenants=IB_TENANTS, nodes_per_tenant=NODES_PER_TENANT)
    create_fabric(uow, spec=RoceFabricCreate(name=ROCE, kind="roce"))
    inventory = RoceInventory.model_validate(bench_roce.inventory_document())
    measure(
        f"setup: import {ROCE}",
        lambda: import_roce_topology(uow, fabric_name=ROCE, inventory=inventory),
    )
    populate(
        uow,
        fabric_name=ROCE,
        tenants=ROCE_TENANTS,
        nodes_per_tenant=NODES_PER_TENANT,
        storage_nodes=48,
        prefix="r-",
        segments=bench_roce.segment_rows,
    )


def settle(base_url: str, prepared: Prepared) -> None:
    """Record the bulk-inserted states through the product, and wait for their verdicts.

    The tenancy was inserted directly: the service never recorded it (change_parts.settle). An
    allocation and its release per fabric make the commit gate do so; the verdict warmer then
    computes each fabric's verdict once, before the measurements. Otherwise it would verify a
    whole fabric in the server after every heavy POST (the state it finds never matches the
    logged one), which is not the heavy work measured.
    """
    operator = prepared.tokens["operator"]
    with Api(base_url, operator) as api:
        for fabric in (IB, ROCE):
            create_tenant(api, f"bench-{fabric}")
            allocate_and_release(api, f"bench-{fabric}", fabric)
    deadline = time.monotonic() + WARM_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        warmed, pending = warm_state(base_url, operator)
        if warmed >= 2 and not pending:
            return
        time.sleep(1.0)
    raise RuntimeError(f"the verdict warmer did not finish in {WARM_TIMEOUT_SECONDS} s")


def write_bodies(base_url: str, prepared: Prepared, directory: str) -> None:
    """Fetch what the service renders and write each heavy body to a file in `directory`."""
    headers = {"Authorization": f"Bearer {prepared.tokens['operator']}"}
    out = Path(directory)
    with httpx2.Client(base_url=base_url, headers=headers, timeout=HTTP_TIMEOUT_SECONDS) as api:
        partitions = _artifact(api, IB, "partitions.conf")
        config_db = _artifact(api, ROCE, f"{prepared.leaf}/config_db.json")
        frr = _artifact(api, ROCE, f"{prepared.leaf}/frr.conf")
    (out / "partitions.conf").write_text(heavy_bodies.partitions_conf(partitions))
    (out / "config_db.json").write_text(heavy_bodies.config_db_json(config_db))
    (out / "frr.conf").write_text(heavy_bodies.frr_conf(frr))
    guids = [f"0x{0x1000000 + 2 * port + 1:x}" for port in range(NODES * HCAS)]
    (out / "observation.json").write_text(heavy_bodies.observation(guids))
    (out / "proof.json").write_text(json.dumps({"fabric": IB}))


def _artifact(api: httpx2.Client, fabric: str, suffix: str) -> str:
    """The rendered file of `fabric` whose path ends with `suffix`."""
    listing = api.get(f"/v1/fabrics/{fabric}/artifacts")
    listing.raise_for_status()
    paths = [a["path"] for a in listing.json()["files"] if a["path"].endswith(suffix)]
    response = api.get(f"/v1/fabrics/{fabric}/artifacts/{paths[0]}")
    response.raise_for_status()
    return response.text
