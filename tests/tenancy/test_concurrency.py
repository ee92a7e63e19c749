"""Allocation is race-free across OS processes sharing one database (PostgreSQL, SQLite file).

Two processes ('spawn') onboard 12 tenants each and allocate, for every tenant, one node by count
and one node by name that the other process's twin tenant names too, on a fabric with 48 nodes and
only 18 P_Keys: both processes contend for keys, for the same candidate nodes and for the same
named nodes at once. Whatever the interleaving, the database must hold each key and each node
once, every allocation with its tenant's key, and nothing of a failed attempt.
"""

from __future__ import annotations

import json
import multiprocessing
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from tenancy.gate import verification
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import fabrics, topology
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import fabric_spec, generated_topology, rows

from . import allocation_worker

FABRIC = "ib-race"
HOSTS = [f"cn{number:03d}" for number in range(1, 49)]
PKEY_FIRST, PKEY_LAST = 0x0100, 0x0111  # 18 keys for 24 tenants
WORKERS = 2
TENANTS_PER_WORKER = 12
# Tenant i of each worker names the same node; from the top, so counts (lowest first) never do.
CONTESTED = [f"cn{48 - i:03d}" for i in range(TENANTS_PER_WORKER)]


@pytest.fixture
def shared_engine(shared_url: str) -> Iterator[Engine]:
    engine = make_engine(shared_url)
    prepare_database(engine)
    uow = UnitOfWork(engine, Settings(database_url=shared_url))
    range_ = {"first": f"{PKEY_FIRST:#06x}", "last": f"{PKEY_LAST:#06x}"}
    fabrics.create_fabric(uow, spec=fabric_spec(FABRIC, **range_))
    topology.import_topology(uow, fabric_name=FABRIC, text=generated_topology(HOSTS))
    try:
        yield engine
    finally:
        engine.dispose()


def run_workers(url: str, out_dir: Path) -> list[dict[str, Any]]:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(WORKERS)
    paths = [out_dir / f"worker{w}.json" for w in range(WORKERS)]
    processes = [
        context.Process(
            target=allocation_worker.run,
            args=(
                url,
                FABRIC,
                w,
                [f"w{w}-t{i:02d}" for i in range(TENANTS_PER_WORKER)],
                CONTESTED,
                start,
                str(paths[w]),
            ),
        )
        for w in range(WORKERS)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join()
        assert process.exitcode == 0, f"worker pid {process.pid} exited with {process.exitcode}"
    return [outcome for path in paths for outcome in json.loads(path.read_text())]


def test_concurrent_processes_never_share_a_key_or_a_node_and_leave_no_partial_rows(
    shared_url, shared_engine, tmp_path
):
    outcomes = run_workers(shared_url, tmp_path)

    assert len(outcomes) == WORKERS * TENANTS_PER_WORKER * 3
    # Losing a race is a domain refusal (409), never an escaping database error (a 500).
    unexpected = [
        f"{o['tenant']} {o['request']}: {o['error']}" for o in outcomes if o["status"] == "crashed"
    ]
    assert unexpected == [], "\n".join(unexpected)
    assert {o["error"] for o in outcomes if o["status"] == "refused"} <= {
        "ConflictError",
        "PoolExhaustedError",
    }
    allocated = [o for o in outcomes if o["status"] == "ok" and o["request"] != "onboard"]
    assert {o["worker"] for o in allocated} == set(range(WORKERS)), "both processes allocated"

    # No P_Key handed out twice: one active key per tenant holding nodes, all distinct, in range.
    segments = rows(
        shared_engine,
        "SELECT s.value, s.state, t.name FROM segment s JOIN tenant t ON t.id = s.tenant_id",
    )
    holders = {o["tenant"] for o in allocated}
    assert sorted(name for _, _, name in segments) == sorted(holders)
    assert len({value for value, _, _ in segments}) == len(segments)
    assert {state for _, state, _ in segments} == {"active"}
    assert all(PKEY_FIRST <= value <= PKEY_LAST for value, _, _ in segments)
    assert any(o["error"] == "PoolExhaustedError" for o in outcomes), "the pool ran dry"

    # Every successful allocation has its tenant's segment, as reported to the caller.
    key_of = {name: f"{value:#06x}" for value, _, name in segments}
    assert all(o["pkey"] == key_of[o["tenant"]] for o in allocated)

    # No node held twice, and exactly the nodes of the successful allocations are held.
    held = rows(
        shared_engine,
        "SELECT n.name, a.id, t.name FROM node_assignment na JOIN node n ON n.id = na.node_id "
        "JOIN allocation a ON a.id = na.allocation_id JOIN tenant t ON t.id = a.tenant_id",
    )
    reported = [(node, o["allocation_id"], o["tenant"]) for o in allocated for node in o["nodes"]]
    assert max(Counter(node for node, _, _ in reported).values()) == 1
    assert sorted(held) == sorted(reported)

    # Failed attempts left nothing: no allocation row beyond the successful ones.
    allocation_ids = rows(shared_engine, "SELECT id FROM allocation")
    assert sorted(i for (i,) in allocation_ids) == sorted(o["allocation_id"] for o in allocated)

    uow = UnitOfWork(shared_engine, Settings(database_url=shared_url))
    assert verification.verify_fabric(uow, fabric_name=FABRIC).holds
