"""Two transactions racing for the same name or node, with the interleaving pinned down.

`race` runs the first use case until it is about to COMMIT, then starts the second and lets the
first commit only once the second is blocked on the first's row locks (PostgreSQL: visible in
pg_stat_activity) or has started (SQLite: BEGIN IMMEDIATE makes it wait for the first). The second
has then passed its "does it already exist?" check without seeing the first's row. The loser must
get the same domain error (a 409) as it would sequentially, and leave nothing behind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine, event, text

from policies.errors import ConflictError
from tenancy.schemas import AllocationCreate, GrantCreate, ServiceCreate, TenantCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, fabrics, shared_services, tenants
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import FakeClock, dump_database, fabric_spec, rows, uow_onboard

UseCase = Callable[[UnitOfWork], Any]
PATIENCE_SECONDS = 30  # an upper bound for a stuck race, never part of an assertion


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None


@pytest.fixture
def shared(shared_url: str) -> Iterator[tuple[str, Engine]]:
    engine = make_engine(shared_url)
    prepare_database(engine)
    uow_onboard(UnitOfWork(engine, Settings(database_url=shared_url), FakeClock()))
    for name in ("initech", "hooli"):
        tenants.create_tenant(
            UnitOfWork(engine, Settings(database_url=shared_url)),
            spec=TenantCreate(name=name, kind="external"),
        )
    try:
        yield shared_url, engine
    finally:
        engine.dispose()


def _blocked_on_a_lock(monitor: Engine) -> bool:
    query = text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    with monitor.connect() as connection:
        return bool(connection.execute(query).scalar())


def race(url: str, first: UseCase, second: UseCase) -> tuple[Outcome, Outcome]:
    engines = [make_engine(url) for _ in range(3)]
    first_engine, second_engine, monitor = engines
    at_commit, second_started, second_done = threading.Event(), threading.Event(), threading.Event()
    outcomes = (Outcome(), Outcome())

    def hold_commit(_connection: Any) -> None:
        if at_commit.is_set():
            return
        at_commit.set()
        if first_engine.dialect.name == "sqlite":
            second_started.wait(PATIENCE_SECONDS)  # it queues behind our write lock at BEGIN
            return
        for _ in range(PATIENCE_SECONDS * 100):
            if second_done.wait(0.01) or _blocked_on_a_lock(monitor):
                return

    event.listen(first_engine, "commit", hold_commit)

    def run(use_case: UseCase, engine: Engine, outcome: Outcome, started: threading.Event) -> None:
        started.set()
        try:
            outcome.value = use_case(UnitOfWork(engine, Settings(database_url=url)))
        except BaseException as error:  # handed to the test
            outcome.error = error

    threads = [
        threading.Thread(target=run, args=(first, first_engine, outcomes[0], threading.Event())),
        threading.Thread(target=run, args=(second, second_engine, outcomes[1], second_started)),
    ]
    try:
        threads[0].start()
        assert at_commit.wait(PATIENCE_SECONDS), "the first use case never reached COMMIT"
        threads[1].start()
        threads[1].join(PATIENCE_SECONDS * 2)
        second_done.set()
        threads[0].join(PATIENCE_SECONDS * 2)
    finally:
        second_done.set()
        for thread in threads:
            thread.join()
        for engine in engines:
            engine.dispose()
    return outcomes


def allocate_gpu0007(tenant: str) -> UseCase:
    spec = AllocationCreate(fabric="ib-east", nodes=["gpu0007"])
    return lambda uow: allocations.allocate(uow, tenant_name=tenant, spec=spec)


def onboard(kind: str) -> UseCase:
    return lambda uow: tenants.create_tenant(uow, spec=TenantCreate(name="umbrella", kind=kind))


def scratch_on(node: str) -> UseCase:
    spec = ServiceCreate(name="scratch", nodes=[node])
    return lambda uow: shared_services.create_service(uow, fabric_name="ib-east", spec=spec)


def grant_storage(uow: UnitOfWork) -> Any:
    return shared_services.grant_service(
        uow, tenant_name="research", spec=GrantCreate(fabric="ib-east", service="storage")
    )


def fabric_named_ib_west(last: str) -> UseCase:
    return lambda uow: fabrics.create_fabric(uow, spec=fabric_spec("ib-west", last=last))


RACES = [
    pytest.param(
        allocate_gpu0007("initech"),
        allocate_gpu0007("hooli"),
        {
            "SELECT t.name FROM node_assignment na JOIN node n ON n.id = na.node_id "
            "JOIN allocation a ON a.id = na.allocation_id JOIN tenant t ON t.id = a.tenant_id "
            "WHERE n.name = 'gpu0007'": [("initech",)],
            "SELECT count(*) FROM segment s JOIN tenant t ON t.id = s.tenant_id "
            "WHERE t.name = 'hooli'": [(0,)],
            "SELECT count(*) FROM allocation a JOIN tenant t ON t.id = a.tenant_id "
            "WHERE t.name = 'hooli'": [(0,)],
        },
        id="same-node-named",
    ),
    pytest.param(
        onboard("external"),
        onboard("internal"),
        {"SELECT kind FROM tenant WHERE name = 'umbrella'": [("external",)]},
        id="same-tenant-name",
    ),
    pytest.param(
        scratch_on("gpu0007"),
        scratch_on("gpu0008"),
        {
            "SELECT count(*) FROM service WHERE name = 'scratch'": [(1,)],
            "SELECT count(*) FROM segment WHERE service_id IS NOT NULL": [(2,)],
            "SELECT n.name FROM node_assignment na JOIN node n ON n.id = na.node_id "
            "WHERE na.service_id IS NOT NULL ORDER BY n.name": [
                ("gpu0007",),
                ("stor01",),
                ("stor02",),
            ],
        },
        id="same-service-name",
    ),
    pytest.param(
        grant_storage,
        grant_storage,
        {
            'SELECT count(*) FROM "grant" g JOIN tenant t ON t.id = g.tenant_id '
            "WHERE t.name = 'research'": [(1,)]
        },
        id="same-grant",
    ),
    pytest.param(
        fabric_named_ib_west("0x0fff"),
        fabric_named_ib_west("0x1fff"),
        {
            "SELECT pkey_last FROM fabric WHERE name = 'ib-west'": [(0x0FFF,)],
            "SELECT count(*) FROM fabric WHERE kind = 'infiniband'": [(2,)],
        },
        id="same-fabric-name",
    ),
]


@pytest.mark.parametrize(("first", "second", "state"), RACES)
def test_the_loser_of_a_race_gets_a_conflict_and_leaves_nothing_behind(
    shared, first, second, state
):
    url, engine = shared

    winner, loser = race(url, first, second)

    assert winner.error is None, repr(winner.error)
    assert isinstance(loser.error, ConflictError), repr(loser.error)
    assert {query: rows(engine, query) for query in state} == state
    after_race = dump_database(engine)
    with pytest.raises(ConflictError):  # the same request again, sequentially: the same answer
        second(UnitOfWork(engine, Settings(database_url=url)))
    assert dump_database(engine) == after_race
