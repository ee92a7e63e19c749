"""The verdict warmer (api/verdict_warmer.py): after a change, the fabric's whole verdict is in
the read cache without anyone reading it; bursts coalesce; a failure is logged and survived.

It never runs on in-memory SQLite (one connection shared by all threads), so these tests use a
database file. Waits are bounded polls of the cache's state, never timings.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from api.app import create_app
from api.verdict_warmer import VerdictWarmer
from tenancy import models as m
from tenancy.gate import cached_reads
from tenancy.record import snapshot_log
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings, load_settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import LOCAL_URL, api_onboard, created, ok
from tests.conftest import LOOPBACK_CLIENT
from tests.keys import key_settings, register_key

FABRIC = "ib-east"
WAIT_SECONDS = 60.0


def until(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` until it holds; fail after `WAIT_SECONDS` (a bound, not a timing)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {WAIT_SECONDS} s: {what}")
        time.sleep(0.02)


def current_digest(uow: UnitOfWork) -> str:
    with uow.transaction(read_only=True) as tx:
        query = select(snapshot_log.newest_digest()).where(m.Fabric.name == FABRIC)
        digest = tx.session.exec(query).one()
    assert digest is not None
    return str(digest)


def cached_digest(uow: UnitOfWork) -> str | None:
    """The digest of the verdict cached for the fabric's current state, None if none is."""
    with uow.transaction(read_only=True) as tx:
        fabric, digest = tx.session.exec(
            select(m.Fabric, snapshot_log.newest_digest()).where(m.Fabric.name == FABRIC)
        ).one()
        document = cached_reads.cached_verdict(uow, tx, fabric, digest)
    return digest if document is not None else None


def warm(uow: UnitOfWork) -> bool:
    return cached_digest(uow) == current_digest(uow)


@pytest.fixture
def app_settings(tmp_path: Path) -> Settings:
    url = f"sqlite:///{tmp_path / 'warm.db'}"
    engine = make_engine(url)
    prepare_database(engine)
    register_key(engine)
    engine.dispose()
    settings = Settings(database_url=url, verdict_warm=True, pkey_quarantine_seconds=0)
    return key_settings(settings, copy_to=tmp_path / "keys")


@pytest.fixture
def served(app_settings: Settings) -> Iterator[tuple[TestClient, UnitOfWork, VerdictWarmer]]:
    """An onboarded service with its warmer, every state warm to begin with."""
    app = create_app(app_settings)
    with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as client:
        api_onboard(client)
        uow, warmer = app.state.uow, app.state.verdict_warmer
        until(lambda: warm(uow) and not warmer.pending, "the onboarded state warmed")
        yield client, uow, warmer


def grant(client: TestClient, tenant: str) -> str:
    """A change of ib-east: storage granted to `tenant`; the grant's id."""
    body = {"fabric": FABRIC, "service": "storage"}
    return str(created(client.post(f"/v1/tenants/{tenant}/grants", json=body))["id"])


def revoke(client: TestClient, tenant: str, grant_id: str) -> None:
    """A change of ib-east: the grant revoked."""
    assert client.delete(f"/v1/tenants/{tenant}/grants/{grant_id}").status_code == 204


def test_a_change_through_the_api_leaves_its_verdict_cached_without_any_read(served):
    client, uow, _warmer = served
    before = current_digest(uow)

    grant(client, "globex")

    assert current_digest(uow) != before
    until(lambda: warm(uow), "the new state's verdict cached")
    # The cached verdict is the one a read serves, for the state the change committed.
    body = ok(client.get(f"/v1/fabrics/{FABRIC}/verification"))
    assert (body["snapshot_digest"], body["holds"]) == (current_digest(uow), True)


def test_a_burst_of_changes_computes_a_bounded_number_of_verdicts_and_the_last_is_cached(served):
    client, uow, warmer = served
    started, release = threading.Event(), threading.Event()
    computed: list[str] = []

    def held(unit: UnitOfWork, fabric: str) -> None:
        computed.append(current_digest(unit))
        started.set()
        release.wait(WAIT_SECONDS)  # the burst lands while the first computation runs
        cached_reads.verification_json(unit, fabric_name=fabric)

    warmer.compute = held
    globex = grant(client, "globex")
    assert started.wait(WAIT_SECONDS)
    # Four more states (none seen before) while the first computation runs.
    research = grant(client, "research")
    revoke(client, "globex", globex)
    revoke(client, "research", research)
    grant(client, "research")
    release.set()
    until(lambda: warm(uow) and not warmer.pending, "the last state's verdict cached")

    # Five changes, one computation: it reads the fabric once released, so it computed the
    # newest state, and the sweep the burst's pokes asked for found that cached.
    assert len(computed) == 1
    assert computed[0] != current_digest(uow)  # the state when it began was an older one


def test_a_failing_computation_is_logged_and_the_warmer_goes_on(served, caplog):
    client, uow, warmer = served
    failures = {"left": 1}

    def flaky(unit: UnitOfWork, fabric: str) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("the database went away")
        cached_reads.verification_json(unit, fabric_name=fabric)

    warmer.compute = flaky
    with caplog.at_level(logging.ERROR, logger="api.verdict_warmer"):
        grant(client, "globex")
        until(lambda: warmer.failed == 1 and not warmer.pending, "the failure seen")
    assert not warm(uow)
    assert "warming the verdict of fabric ib-east failed" in caplog.text

    grant(client, "research")  # the next change is warmed as usual

    until(lambda: warm(uow), "the next state's verdict cached")


def test_no_automatic_garbage_collection_runs_while_a_verdict_is_computed(served):
    # A full collection over a whole fabric's objects stops every thread, the loop included.
    client, uow, warmer = served
    collecting: list[bool] = []

    def observed(unit: UnitOfWork, fabric: str) -> None:
        collecting.append(gc.isenabled())
        cached_reads.verification_json(unit, fabric_name=fabric)

    warmer.compute = observed
    grant(client, "globex")
    until(lambda: warm(uow) and not warmer.pending, "the state's verdict cached")

    assert collecting and not any(collecting)
    assert gc.isenabled()


def test_the_setting_turns_it_off(app_settings, monkeypatch):
    monkeypatch.setenv("ISOFABRIC_VERDICT_WARM", "off")
    assert load_settings().verdict_warm is False
    monkeypatch.setenv("ISOFABRIC_VERDICT_WARM", "1")
    assert load_settings().verdict_warm is True
    app = create_app(dataclasses.replace(app_settings, verdict_warm=False))
    with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as client:
        api_onboard(client)
        assert not hasattr(app.state, "verdict_warmer")
        assert "verdict-warmer" not in {thread.name for thread in threading.enumerate()}


def test_it_starts_and_stops_with_the_app(app_settings):
    app = create_app(app_settings)
    with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL):
        thread = app.state.verdict_warmer._thread
        assert thread is not None and thread.is_alive()

    # The lifespan's shutdown stopped the worker and joined it.
    assert not thread.is_alive()
