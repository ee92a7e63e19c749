"""The verdict a page shows now (tenancy/gate/shown_verdict.py): the current state's when cached,
else the newest cached earlier state's (from memory, or on PostgreSQL the replicas' shared
store), named by its own digest and never as current; computed only when none is cached."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from policies.errors import NotFoundError
from tenancy.gate import cached_reads, shown_verdict
from tenancy.schemas import GrantCreate, VerificationView
from tenancy.store.db import make_engine
from tenancy.store.read_cache import ReadCache
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import shared_services
from tests.builders import FakeClock
from tests.keys import key_settings

FABRIC = "ib-east"


@pytest.fixture
def replica(postgres_databases: Any, tmp_path: Path) -> Iterator[UnitOfWork]:
    """One API replica on an onboarded PostgreSQL database of the test's own."""
    url = postgres_databases.create("onboarded")
    engine = make_engine(url)
    settings = key_settings(Settings(database_url=url), copy_to=tmp_path / "keys")
    try:
        yield UnitOfWork(engine, settings, FakeClock())
    finally:
        engine.dispose()
        postgres_databases.drop(url)


def change(uow: UnitOfWork) -> None:
    spec = GrantCreate(fabric=FABRIC, service="storage")
    shared_services.grant_service(uow, tenant_name="globex", spec=spec)


def refuse_verifying(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> Any:
        raise AssertionError("the verdict was computed")

    monkeypatch.setattr(cached_reads, "load_snapshot", refuse)


def digest_of(shown: shown_verdict.ShownVerdict) -> str:
    return VerificationView.model_validate_json(shown.document.content).snapshot_digest


def test_the_first_read_computes_the_current_verdict(replica: UnitOfWork):
    shown = shown_verdict.verdict_to_show(replica, fabric_name=FABRIC)

    assert shown.current and shown.earlier_digest is None
    assert digest_of(shown) == shown.current_digest
    assert shown_verdict.verdict_is_current(replica, fabric_name=FABRIC) == (True, digest_of(shown))


def test_after_a_change_the_earlier_verdict_is_shown_from_memory_and_the_store(
    replica: UnitOfWork, monkeypatch: pytest.MonkeyPatch
):
    before = cached_reads.verification_json(replica, fabric_name=FABRIC).content
    change(replica)
    refuse_verifying(monkeypatch)
    other = dataclasses.replace(replica, reads=ReadCache())  # another replica: the store only

    for uow in (replica, other):
        shown = shown_verdict.verdict_to_show(uow, fabric_name=FABRIC)
        assert not shown.current
        assert shown.document.content == before
        assert shown.earlier_digest == digest_of(shown) != shown.current_digest
        assert shown.verified_at is not None
        assert shown_verdict.verdict_is_current(uow, fabric_name=FABRIC) == (
            False,
            shown.current_digest,
        )

    monkeypatch.undo()
    cached_reads.verification_json(replica, fabric_name=FABRIC)  # the warmer's work
    now = shown_verdict.verdict_to_show(other, fabric_name=FABRIC)  # loaded from the store
    assert now.current and digest_of(now) == now.current_digest


def test_an_unknown_fabric_is_not_found(replica: UnitOfWork):
    with pytest.raises(NotFoundError):
        shown_verdict.verdict_to_show(replica, fabric_name="nope")
    with pytest.raises(NotFoundError):
        shown_verdict.verdict_is_current(replica, fabric_name="nope")
