"""A read-only transaction sees one committed state, whatever commits while it reads.

A snapshot is loaded in several queries (tenancy/record/snapshot/) and then signed; on
PostgreSQL's default READ COMMITTED each query would see the writes committed since the last,
so a manifest could be signed for a state that was never committed. Read-only transactions run
at REPEATABLE READ there (tenancy/store/db.py). SQLite needs no setting: a deferred transaction
reads one snapshot from its first read on (on a file database; the suite's in-memory one is a
single shared connection, hence a test on PostgreSQL's own database, as test_auth_read_only.py
does).
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func
from sqlmodel import select

from tenancy import models as m
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork


def _tenants(uow: UnitOfWork) -> int:
    with uow.transaction(read_only=True) as tx:
        return tx.session.exec(select(func.count()).select_from(m.Tenant)).one()


def _add_tenant(uow: UnitOfWork, qos_id: int) -> None:
    with uow.transaction() as writing:
        writing.session.add(m.Tenant(name="late", kind="external", qos_class_id=qos_id))


@pytest.mark.postgres
def test_a_read_only_transaction_does_not_see_a_write_committed_while_it_reads(postgres_url):
    engine = make_engine(postgres_url)
    try:
        _check_one_state(UnitOfWork(engine, Settings(database_url=postgres_url)))
    finally:
        engine.dispose()


def _check_one_state(uow: UnitOfWork) -> None:
    with uow.transaction(read_only=True) as tx:
        qos = tx.session.exec(select(m.QosClass)).first()
        assert qos is not None  # the migrations seed the classes
        qos_id = m.pk(qos)
    before = _tenants(uow)
    with uow.transaction(read_only=True) as reading:
        count = select(func.count()).select_from(m.Tenant)
        first = reading.session.exec(count).one()
        writer = threading.Thread(target=_add_tenant, args=(uow, qos_id))  # its own connection
        writer.start()
        writer.join()
        second = reading.session.exec(count).one()

    assert first == second == before
    assert _tenants(uow) == before + 1
