"""Change sets never deadlock on PostgreSQL (tenancy/usecases/changesets.py, `lock_ahead`).

Two change sets allocate on two fabrics in opposite orders while one plain allocation per fabric
runs beside them, all released at once by a barrier, for several rounds. Taken operation by
operation, the first operation's audit entry held the audit log's lock while the second waited
for a fabric the other change set held: PostgreSQL broke the cycle by failing one of them
(`deadlock detected`). Every request must succeed. PostgreSQL only: SQLite serialises writers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from policies.errors import DatabaseUnavailableError
from tenancy.schemas import AllocationCreate, TenantCreate
from tenancy.schemas.changesets import ChangeSetCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, changesets, fabrics, tenants, topology
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import fabric_spec, generated_topology

FABRICS = ("ib-a", "ib-b")
ROUNDS = 6
# Per round: two change sets of two allocations and two plain allocations, one node each.
TENANTS = [f"t{number:02d}" for number in range(ROUNDS * 6)]


@pytest.fixture
def uow(postgres_url: str) -> Iterator[UnitOfWork]:
    engine: Engine = make_engine(postgres_url)
    prepare_database(engine)
    work = UnitOfWork(engine, Settings(database_url=postgres_url))
    for fabric in FABRICS:
        fabrics.create_fabric(work, spec=fabric_spec(fabric))
        hosts = [f"{fabric}-n{number:03d}" for number in range(ROUNDS * 4)]
        topology.import_topology(work, fabric_name=fabric, text=generated_topology(hosts))
    for name in TENANTS:
        tenants.create_tenant(work, spec=TenantCreate(name=name, kind="external", qos_class="gold"))
    try:
        yield work
    finally:
        engine.dispose()


def test_change_sets_in_opposite_orders_beside_single_changes_never_deadlock(uow: UnitOfWork):
    failures: list[str] = []
    names = iter(TENANTS)
    for _round in range(ROUNDS):
        a, b, c, d, e, f = (next(names) for _ in range(6))
        requests: list[Callable[[], None]] = [
            partial(change_set, uow, [(a, "ib-a"), (b, "ib-b")]),
            partial(change_set, uow, [(c, "ib-b"), (d, "ib-a")]),
            partial(allocate, uow, e, "ib-a"),
            partial(allocate, uow, f, "ib-b"),
        ]
        failures += run_together(requests)

    assert failures == []


def change_set(uow: UnitOfWork, allocations_: list[tuple[str, str]]) -> None:
    operations = [
        {"op": "allocate", "tenant": tenant, "fabric": fabric, "count": 1}
        for tenant, fabric in allocations_
    ]
    changesets.apply_changeset(uow, spec=ChangeSetCreate.model_validate({"operations": operations}))


def allocate(uow: UnitOfWork, tenant: str, fabric: str) -> None:
    allocations.allocate(uow, tenant_name=tenant, spec=AllocationCreate(fabric=fabric, count=1))


def run_together(requests: list[Callable[[], None]]) -> list[str]:
    """Run each request in a thread of its own, all released at once; the failures' texts."""
    start, failures = threading.Barrier(len(requests)), []

    def run(request: Callable[[], None]) -> None:
        start.wait()
        try:
            request()
        except Exception as error:
            failures.append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=run, args=(request,)) for request in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return failures


class DriverError(Exception):
    """What psycopg raises: its text names processes, lock keys, hosts and ports."""

    def __init__(self, text: str, sqlstate: str | None) -> None:
        super().__init__(text)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("sqlstate", "text", "said"),
    [
        (
            "40P01",
            "deadlock detected DETAIL: Process 4242 waits for ExclusiveLock on advisory lock "
            "[16384,18758,3,2]; blocked by process 4343.",
            "rolled this request back to resolve a conflict with a concurrent one",
        ),
        (
            None,
            'connection to server at "10.1.2.3", port 5432 failed: Connection refused',
            "the database is unavailable; retry later",
        ),
    ],
)
def test_the_client_gets_a_stable_sentence_and_the_log_the_drivers_text(
    caplog: pytest.LogCaptureFixture, sqlstate: str | None, text: str, said: str
):
    engine = make_engine("sqlite://")
    uow = UnitOfWork(engine, Settings(database_url="sqlite://"), request_id="req-7")

    with pytest.raises(DatabaseUnavailableError) as raised, uow.transaction():
        raise OperationalError(
            "SELECT pg_advisory_xact_lock(18758, 3)", {}, DriverError(text, sqlstate)
        )

    assert said in str(raised.value)
    for leaked in ("4242", "16384", "10.1.2.3", "5432", "advisory", "SELECT"):
        assert leaked not in str(raised.value)
    assert any("req-7" in r.getMessage() and text in r.getMessage() for r in caplog.records)
