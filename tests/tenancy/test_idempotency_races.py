"""Two requests with the same Idempotency-Key at once: the reservation commits with the change, so
exactly one of them changes anything (issue 10, item 19).

The interleaving is `race`'s (tests/tenancy/test_races.py): the second request starts while the
first is about to commit, so it has passed the api layer's look-up without seeing the first's
reservation. It must then wait for the first on the reservation's unique constraint and fail with
409 idempotency-in-progress, leaving nothing behind; a retry after that gets the replay.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import Engine

from policies.errors import IdempotencyInProgressError
from tenancy.record import idempotency
from tenancy.record.idempotency import KeyedRequest
from tenancy.schemas import AllocationCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import FakeClock, rows, uow_onboard
from tests.tenancy.test_races import UseCase, race

PATH = "/v1/tenants/acme/allocations"


@pytest.fixture
def shared(shared_url: str) -> Iterator[tuple[str, Engine]]:
    engine = make_engine(shared_url)
    prepare_database(engine)
    uow_onboard(UnitOfWork(engine, Settings(database_url=shared_url), FakeClock()))
    try:
        yield shared_url, engine
    finally:
        engine.dispose()


def keyed(key: str = "k") -> KeyedRequest:
    return KeyedRequest("token:t-1", "POST", PATH, key, "f" * 64)


def allocate_one(key: str = "k") -> UseCase:
    spec = AllocationCreate(fabric="ib-east", count=1)

    def use_case(uow: UnitOfWork) -> Any:
        return allocations.allocate(
            replace(uow, first_write=keyed(key)), tenant_name="acme", spec=spec
        )

    return use_case


ACME_ALLOCATIONS = (
    "SELECT count(*) FROM allocation a JOIN tenant t ON t.id = a.tenant_id "
    "WHERE t.name = 'acme' AND a.released_at IS NULL"
)


def test_of_two_requests_racing_with_one_key_only_the_first_changes_anything(shared):
    url, engine = shared
    acme_before = rows(engine, ACME_ALLOCATIONS)

    winner, loser = race(url, allocate_one(), allocate_one())

    assert winner.error is None, repr(winner.error)
    assert isinstance(loser.error, IdempotencyInProgressError), repr(loser.error)
    assert rows(engine, ACME_ALLOCATIONS) == [(acme_before[0][0] + 1,)]
    assert rows(engine, "SELECT key, status FROM idempotency_record") == [("k", None)]


def test_two_requests_racing_with_different_keys_both_change(shared):
    url, engine = shared
    acme_before = rows(engine, ACME_ALLOCATIONS)

    first, second = race(url, allocate_one("k-1"), allocate_one("k-2"))

    assert (first.error, second.error) == (None, None)
    assert rows(engine, ACME_ALLOCATIONS) == [(acme_before[0][0] + 2,)]


def test_the_loser_of_the_race_gets_the_replay_once_the_winner_is_recorded(shared):
    url, engine = shared
    uow = UnitOfWork(engine, Settings(database_url=url), FakeClock())
    winner, _ = race(url, allocate_one(), allocate_one())
    won = keyed()
    won.committed = True
    body = winner.value.model_dump_json().encode()
    idempotency.complete(uow, won, idempotency.Outcome(201, body, {}))

    replay = idempotency.find(uow, keyed())

    assert replay is not None and (replay.status, replay.body) == (201, body)
