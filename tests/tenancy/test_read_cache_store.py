"""The read cache replicas share on PostgreSQL: one replica computes a state, the others load its
bytes; only current states are kept, secret-bearing files sealed, and nothing unusable served."""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, update
from sqlmodel import col, select

from tenancy import models as m
from tenancy.gate import cached_reads, verification
from tenancy.record import read_cache_store
from tenancy.schemas import GrantCreate
from tenancy.store import key_store
from tenancy.store.db import make_engine
from tenancy.store.read_cache import Entry, ReadCache, ReadKey
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import shared_services
from tests.builders import ARTIFACT_PATHS, FakeClock
from tests.keys import key_settings

Reads = dict[str, bytes]


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


def another(replica: UnitOfWork) -> UnitOfWork:
    """Another replica on the same database: its own, empty, in-process cache."""
    return dataclasses.replace(replica, reads=ReadCache())


def cached(uow: UnitOfWork) -> Reads:
    reads = {"verification": cached_reads.verification_json(uow, fabric_name="ib-east").content}
    manifest = cached_reads.list_artifacts(uow, fabric_name="ib-east")
    reads["manifest"] = manifest.model_dump_json().encode()
    for path in ARTIFACT_PATHS:
        read = cached_reads.get_artifact(uow, fabric_name="ib-east", path=path)
        reads[path] = read.file.content
    return reads


def reference(uow: UnitOfWork) -> Reads:
    view = verification.verify_fabric(uow, fabric_name="ib-east")
    reads = {"verification": view.model_dump_json(by_alias=True).encode()}
    manifest = verification.list_artifacts(uow, fabric_name="ib-east")
    reads["manifest"] = manifest.model_dump_json().encode()
    for path in ARTIFACT_PATHS:
        reads[path] = verification.get_artifact(uow, fabric_name="ib-east", path=path)[0].content
    return reads


def stored(uow: UnitOfWork) -> list[m.CachedRead]:
    with uow.transaction(read_only=True) as tx:
        return list(tx.session.exec(select(m.CachedRead).order_by(col(m.CachedRead.name))))


def refuse_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(session: Any, fabric: Any) -> Any:
        raise AssertionError("the replica loaded the snapshot")

    monkeypatch.setattr(cached_reads, "load_snapshot", refuse)


def grant_globex(uow: UnitOfWork) -> None:
    spec = GrantCreate(fabric="ib-east", service="storage")
    shared_services.grant_service(uow, tenant_name="globex", spec=spec)


def test_a_replica_serves_what_another_computed_without_loading_the_snapshot(replica, monkeypatch):
    first = cached(replica)
    refuse_loading(monkeypatch)

    assert cached(another(replica)) == first == reference(replica)


def test_the_files_with_the_opensm_keys_are_sealed_and_the_verdict_is_not(replica):
    cached(replica)
    rows = {row.name: row for row in stored(replica)}
    opensm_conf = cached_reads.get_artifact(
        replica, fabric_name="ib-east", path="opensm/opensm.conf"
    )
    m_key_line = next(
        line for line in opensm_conf.file.content.splitlines() if line.startswith(b"m_key ")
    )

    assert sorted(rows) == sorted([*ARTIFACT_PATHS, "verification.json"])
    assert all(rows[path].sealed for path in ARTIFACT_PATHS)
    assert m_key_line not in rows["opensm/opensm.conf"].content
    with pytest.raises(zlib.error):
        zlib.decompress(rows["opensm/opensm.conf"].content)
    assert not rows["verification.json"].sealed
    assert zlib.decompress(rows["verification.json"].content).startswith(b'{"holds":true')


def test_after_a_change_only_the_new_state_is_kept_and_every_replica_serves_it(replica):
    other = another(replica)
    before = cached(replica)
    cached(other)

    grant_globex(replica)

    after = cached(replica)
    assert cached(other) == after == reference(replica)
    assert after["verification"] != before["verification"]
    digests = {row.digest for row in stored(replica)}
    assert digests == {verification.verify_fabric(replica, fabric_name="ib-east").snapshot_digest}


def test_a_replica_with_a_rotated_secret_never_serves_the_files_of_the_old_one(replica):
    before = cached(replica)
    secret = replica.settings.opensm_secret_path
    assert isinstance(secret, Path)
    secret.unlink()
    key_store.write_private_file(secret, key_store.new_opensm_secret())

    after = cached(another(replica))

    assert after == reference(replica)
    assert after["opensm/opensm.conf"] != before["opensm/opensm.conf"]


def test_a_stored_file_that_does_not_hash_to_its_sha256_is_computed_again(replica, monkeypatch):
    first = cached(replica)
    with replica.transaction() as tx:
        verdict = col(m.CachedRead.name) == "verification.json"
        tampered = zlib.compress(b'{"holds":true}')
        tx.session.exec(update(m.CachedRead).where(verdict).values(content=tampered))

    assert cached(another(replica)) == first


def test_a_state_that_is_no_longer_current_is_not_stored(replica):
    cached(replica)
    old = stored(replica)[0]
    grant_globex(replica)
    key = ReadKey(old.fabric_id, old.digest, "f" * 64)
    entry = Entry(old.digest, ())

    read_cache_store.store(replica, key, entry, None)

    with replica.transaction(read_only=True) as tx:
        inputs = col(m.CachedRead.inputs) == "f" * 64
        assert (
            tx.session.exec(select(func.count()).select_from(m.CachedRead).where(inputs)).one() == 0
        )


def test_the_shared_store_is_postgresqls_only(uow, onboarded):
    cached(uow)

    rows = stored(uow)

    if uow.engine.dialect.name == "postgresql":
        assert {row.name for row in rows} == {*ARTIFACT_PATHS, "verification.json"}
    else:
        assert rows == []  # one process on SQLite: the in-process cache is the whole cache
