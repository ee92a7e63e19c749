"""A node quota counts across fabrics, so it holds against concurrent changes on two fabrics.

Each fabric's lock serialises changes on that fabric only: two allocations of one tenant on two
fabrics would each count the other's nodes as not yet held and both pass. The quota lock
(tenancy/store/locks.py `lock_tenant_quota`) makes the second count after the first committed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from policies.errors import IsolationViolationError
from tenancy.schemas import AllocationCreate, TenantCreate
from tenancy.schemas.policy import PolicyDocument
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, fabrics, policy, tenants, topology
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import fabric_spec, generated_topology, rows

FABRICS = ("ib-a", "ib-b")
ROUNDS = 4  # one tenant per round, each with a quota of one node


@pytest.fixture
def shared_engine(shared_url: str) -> Iterator[Engine]:
    engine = make_engine(shared_url)
    prepare_database(engine)
    uow = UnitOfWork(engine, Settings(database_url=shared_url))
    for name in FABRICS:
        fabrics.create_fabric(uow, spec=fabric_spec(name))
        hosts = [f"cn{number:02d}" for number in range(1, 2 * ROUNDS + 1)]
        topology.import_topology(uow, fabric_name=name, text=generated_topology(hosts))
    document = PolicyDocument.model_validate({"kinds": {"external": {"max_nodes": 1}}})
    policy.put_policy(uow, document=document)
    try:
        yield engine
    finally:
        engine.dispose()


def allocate_on_both_at_once(uow: UnitOfWork, tenant: str) -> list[str]:
    """Two threads allocate one node of `tenant` each, one per fabric, released together."""
    start, outcomes = threading.Barrier(len(FABRICS)), []

    def allocate(fabric: str) -> None:
        start.wait()
        try:
            spec = AllocationCreate(fabric=fabric, count=1)
            allocations.allocate(uow, tenant_name=tenant, spec=spec)
            outcomes.append("allocated")
        except IsolationViolationError as error:
            outcomes.append(error.extensions["counterexamples"][0]["rule"])

    threads = [threading.Thread(target=allocate, args=(fabric,)) for fabric in FABRICS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return sorted(outcomes)


def test_concurrent_allocations_on_two_fabrics_never_exceed_a_quota(shared_engine, shared_url):
    uow = UnitOfWork(shared_engine, Settings(database_url=shared_url))
    for round_ in range(ROUNDS):
        tenant = f"t{round_}"
        tenants.create_tenant(uow, spec=TenantCreate(name=tenant, kind="external"))

        assert allocate_on_both_at_once(uow, tenant) == ["allocated", "policy-quota"]

    held = rows(
        shared_engine,
        "SELECT t.name, count(*) FROM node_assignment n JOIN allocation a "
        "ON a.id = n.allocation_id JOIN tenant t ON t.id = a.tenant_id GROUP BY t.name",
    )
    assert sorted(held) == [(f"t{round_}", 1) for round_ in range(ROUNDS)]
