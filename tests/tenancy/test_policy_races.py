"""Concurrent policy changes never reuse a version number (issue 13).

A change writes version newest + 1; with fabrics each change holds every fabric's lock, without
any the primary key is the backstop: a change that lost the race is a ConflictError (409, retry
it) and writes nothing. Either way every stored version is unique and numbered without a gap,
and each caller that was answered a version got a different one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from policies.errors import ConflictError
from tenancy.schemas.policy import PolicyDocument
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import fabrics, policy, topology
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import fabric_spec, generated_topology, rows

WRITERS = 4


@pytest.fixture
def shared_engine(shared_url: str) -> Iterator[Engine]:
    engine = make_engine(shared_url)
    prepare_database(engine)
    try:
        yield engine
    finally:
        engine.dispose()


def put_at_once(uow: UnitOfWork) -> list[int | str]:
    """WRITERS threads each PUT a different quota, released together; their outcomes."""
    start = threading.Barrier(WRITERS)
    outcomes: list[int | str] = []

    def put(quota: int) -> None:
        document = PolicyDocument.model_validate({"kinds": {"internal": {"max_nodes": quota}}})
        start.wait()
        try:
            outcomes.append(policy.put_policy(uow, document=document).version)
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=put, args=(100 + n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


@pytest.mark.parametrize("with_fabric", [False, True], ids=["no-fabric", "fabric"])
def test_concurrent_policy_changes_never_share_a_version(shared_engine, shared_url, with_fabric):
    uow = UnitOfWork(shared_engine, Settings(database_url=shared_url))
    if with_fabric:
        fabrics.create_fabric(uow, spec=fabric_spec("ib-a"))
        topology.import_topology(uow, fabric_name="ib-a", text=generated_topology(["cn01"]))

    outcomes = put_at_once(uow)

    answered = sorted(v for v in outcomes if isinstance(v, int))
    stored = [v for (v,) in rows(shared_engine, "SELECT version FROM policy_version ORDER BY 1")]
    assert len(outcomes) == WRITERS and answered
    assert answered == stored == list(range(1, len(stored) + 1))
