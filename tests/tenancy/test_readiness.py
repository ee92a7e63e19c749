"""What /readyz checks (tenancy/usecases/readiness.py): the database's schema revision and the
keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from policies.errors import NotReadyError
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import readiness
from tenancy.usecases.bootstrap import head_revision, prepare_database
from tests.keys import key_settings, register_key


@pytest.fixture
def uow(tmp_path: Path) -> Iterator[UnitOfWork]:
    url = f"sqlite:///{tmp_path / 'ready.db'}"
    engine = make_engine(url)
    prepare_database(engine)
    register_key(engine)
    yield UnitOfWork(engine, key_settings(Settings(database_url=url)))
    engine.dispose()


def stamp(uow: UnitOfWork, revision: str) -> None:
    with uow.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})


def test_a_migrated_database_with_its_keys_is_ready(uow):
    view = readiness.check(uow)

    assert (view.status, view.schema_revision) == ("ready", head_revision())


def test_a_database_behind_the_head_is_not_ready(uow):
    stamp(uow, "0017")

    with pytest.raises(NotReadyError) as refused:
        readiness.check(uow)

    [reason] = refused.value.extensions["not_ready"]
    assert reason.startswith("migrations not at head: the database is at revision 0017")
    assert f"newest is {head_revision()}" in reason


def test_a_database_ahead_of_this_version_is_not_ready_and_says_so(uow):
    stamp(uow, "9999")

    with pytest.raises(NotReadyError, match="9999, newer than this version knows"):
        readiness.check(uow)


def test_a_database_error_given_by_the_server_is_reported_without_asking_again(uow):
    with pytest.raises(NotReadyError) as refused:
        readiness.check(uow, database_error="connection refused")

    assert refused.value.extensions["not_ready"] == [
        "database unreachable (the server's log says why)"
    ]
    assert "connection refused" not in str(refused.value)  # /readyz needs no token
