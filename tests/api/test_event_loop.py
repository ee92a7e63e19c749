"""No handler blocks the event loop, and heavy requests are capped per principal (issue 10,
item 10).

A real uvicorn server (tests/live_server.py) on a SQLite file serves the ordering tests:
TestClient cannot show whether the server's loop is free while a handler works. Every assertion
is about order (what answered before what), never about elapsed time. Where a test holds a
handler at a gate, the gate waits at most GATE_TIMEOUT_SECONDS: a handler that blocked the
loop would hold every other request behind the gate until then, and the test fails on the order
it records.
"""

from __future__ import annotations

import gc
import inspect
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from api.app import create_app
from api.deps import heavy_work
from api.limits import HEAVY_RETRY_AFTER_SECONDS, HeavyWorkLimit
from policies.errors import TooManyRequestsError
from tenancy.schemas import TokenCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.usecases import config_audits, ib_topology, tokens
from tenancy.usecases import topology as topology_use_cases
from tests.benchmarks.bench_scale import ibnetdiscover_text
from tests.builders import (
    DEFAULT_PARTITION_LINE,
    FABRIC,
    PKEY_RANGE,
    TEXT_PLAIN,
    assert_problem,
    created,
    example_topology,
    ok,
)
from tests.keys import key_settings
from tests.live_server import live_server

GATE_TIMEOUT_SECONDS = 10.0
# Async handlers: each awaits its use case in a heavy worker process, and does nothing else.
HEAVY_PROCESS_HANDLERS = frozenset(
    {"post_audit", "post_observation", "issue_proof", "put_topology", "put_policy"}
)
CLIENT_TIMEOUT_SECONDS = 120.0
# ~16k ports: an import that takes about a second here, far longer than a /healthz round trip.
LARGE_FABRIC_NODES, LARGE_FABRIC_HCAS = 2_000, 8
TOPOLOGY = f"/v1/fabrics/{FABRIC}/topology"
AUDITS = f"/v1/fabrics/{FABRIC}/audits?format=partitions"
PARTITIONS_CONF = DEFAULT_PARTITION_LINE + "\n"
# Async callables allowed in a route's dependency tree: each only awaits the body or decides
# in memory, never touching the database or parsing a document.
ASYNC_DEPENDENCIES = frozenset(
    {
        "authorize",
        "require_json_body",
        "raw_body",
        "raw_body_at_most",  # api/limits.py body_at_most: reads the body, nothing else
        "heavy_work",
        "HTTPBearer",
        "get_principal",
        "get_uow",
        "list_params",
    }
)


@dataclass
class Gate:
    """Holds a use case at its start until the test opens it (or GATE_TIMEOUT_SECONDS pass)."""

    arrivals: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    opened: threading.Event = field(default_factory=threading.Event)
    waits: list[bool] = field(default_factory=list)  # per held call: opened by the test?

    def wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def held(*args: Any, **kwargs: Any) -> Any:
            self.arrivals.release()
            self.waits.append(self.opened.wait(GATE_TIMEOUT_SECONDS))
            return real(*args, **kwargs)

        return held

    def wait_arrival(self) -> None:
        assert self.arrivals.acquire(timeout=CLIENT_TIMEOUT_SECONDS), "the request never arrived"


@dataclass
class Served:
    """A live server on a SQLite file with ib-east created; `admin` is the operator's token.

    `pool` runs requests in the background while the test makes others.
    """

    url: str
    app: FastAPI
    admin: dict[str, str]
    pool: ThreadPoolExecutor

    def client(self, headers: dict[str, str] | None = None) -> httpx2.Client:
        return httpx2.Client(
            base_url=self.url, headers=headers or self.admin, timeout=CLIENT_TIMEOUT_SECONDS
        )

    def token(self, role: str) -> dict[str, str]:
        secret = tokens.create_token(self.app.state.uow, spec=TokenCreate(name=role, role=role))
        return {"Authorization": f"Bearer {secret.token}"}

    def in_background(self, call: Callable[[], httpx2.Response]) -> Future[httpx2.Response]:
        return self.pool.submit(call)

    def import_example(self) -> None:
        with self.client() as client:
            ok(client.put(TOPOLOGY, content=example_topology(), headers=TEXT_PLAIN))


def serve(tmp_path: Path, **overrides: Any) -> Iterator[Served]:
    url = f"sqlite:///{tmp_path / 'loop.db'}"
    engine = make_engine(url)
    settings = key_settings(Settings(database_url=url, admin_token="admin-secret", **overrides))
    app = create_app(settings, engine=engine)
    try:
        with live_server(app) as base_url, ThreadPoolExecutor(4) as pool:
            served = Served(base_url, app, {"Authorization": "Bearer admin-secret"}, pool)
            with served.client() as client:
                created(
                    client.post(
                        "/v1/fabrics",
                        json={"name": FABRIC, "kind": "infiniband", "pkey_range": PKEY_RANGE},
                    )
                )
            yield served
    finally:
        engine.dispose()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path)


@pytest.fixture
def served_one_slot(tmp_path: Path) -> Iterator[Served]:
    """The same, with at most one heavy request in flight per principal."""
    yield from serve(tmp_path, heavy_concurrency=1)


def put_topology(served: Served, text: str) -> Callable[[], httpx2.Response]:
    def call() -> httpx2.Response:
        with served.client() as client:
            return client.put(TOPOLOGY, content=text, headers=TEXT_PLAIN)

    return call


def post_audit(
    served: Served, headers: dict[str, str], body: str | bytes, url: str = AUDITS
) -> Callable[[], httpx2.Response]:
    def call() -> httpx2.Response:
        with served.client(headers) as client:
            return client.post(url, content=body, headers=TEXT_PLAIN)

    return call


# --- the event loop stays free --------------------------------------------------------------


def test_healthz_and_reads_answer_while_an_import_holds_the_write_lock(served, monkeypatch):
    auditor = served.token("auditor")  # its requests are authenticated by a database lookup
    gate = Gate()
    # Inside the import's write transaction (BEGIN IMMEDIATE on SQLite), after the parse.
    monkeypatch.setattr(topology_use_cases, "reconcile", gate.wrap(ib_topology.reconcile))
    importing = served.in_background(put_topology(served, example_topology()))
    gate.wait_arrival()

    with served.client(auditor) as client:
        health = client.get("/healthz")
        fabrics = client.get("/v1/fabrics")
        fabric = client.get(f"/v1/fabrics/{FABRIC}")
    gate.opened.set()

    assert ok(importing.result())["nodes"]
    assert ok(health) == {"status": "ok"}
    assert ok(fabrics)["count"] == 1
    assert ok(fabric)["name"] == FABRIC
    # The import waited for the test: the three requests were answered while it held the lock.
    assert gate.waits == [True]


def test_healthz_answers_before_a_large_import_finishes(served, monkeypatch):
    reconciling, finished = threading.Event(), threading.Event()
    reconcile, import_topology = ib_topology.reconcile, topology_use_cases.import_topology

    def observed(*args: Any, **kwargs: Any) -> Any:
        reconciling.set()
        return reconcile(*args, **kwargs)

    def whole(*args: Any, **kwargs: Any) -> Any:
        # The import ends after the reconcile, the commit gate and the result's models; the
        # reconcile alone (16k ports in a few bulk inserts) may end before the request does.
        try:
            return import_topology(*args, **kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(topology_use_cases, "reconcile", observed)
    monkeypatch.setattr(topology_use_cases, "import_topology", whole)
    text = ibnetdiscover_text(LARGE_FABRIC_NODES, LARGE_FABRIC_HCAS)
    importing = served.in_background(put_topology(served, text))
    assert reconciling.wait(CLIENT_TIMEOUT_SECONDS)

    with served.client() as client:
        health = client.get("/healthz")
    import_had_finished = finished.is_set()

    assert ok(health) == {"status": "ok"}
    assert not import_had_finished
    assert ok(importing.result())["nodes"]


def test_a_config_audit_runs_off_the_loop(served, monkeypatch):
    gate = Gate()
    monkeypatch.setattr(config_audits, "audit_config", gate.wrap(config_audits.audit_config))
    served.import_example()
    auditor = served.token("auditor")
    auditing = served.in_background(post_audit(served, auditor, PARTITIONS_CONF))
    gate.wait_arrival()

    with served.client() as client:
        health = client.get("/healthz")
    gate.opened.set()

    assert ok(health) == {"status": "ok"}
    assert "holds" in ok(auditing.result())
    assert gate.waits == [True]


def _async_dependencies(dependant: Dependant) -> Iterator[str]:
    for sub in dependant.dependencies:
        call = sub.call
        target = call if inspect.isfunction(call) else type(call).__call__
        if inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target):
            yield call.__name__ if inspect.isfunction(call) else type(call).__name__
        yield from _async_dependencies(sub)


def _api_routes(app: FastAPI) -> Iterator[APIRoute]:
    for route in app.router.routes:
        included = getattr(route, "original_router", None)
        for leaf in included.routes if included is not None else [route]:
            if isinstance(leaf, APIRoute):
                yield leaf


def test_no_v1_handler_or_dependency_runs_blocking_work_on_the_loop(client):
    """A regression guard: plain functions run in worker threads; async ones on the loop.

    An async handler only awaits its use case in the heavy worker processes
    (api/heavy_processes.py): it takes them, through its heavy-request slot.
    """
    routes = [r for r in _api_routes(client.app) if r.path.startswith("/v1")]
    handlers = {r.endpoint.__name__: r for r in routes if inspect.iscoroutinefunction(r.endpoint)}

    assert routes
    assert set(handlers) == HEAVY_PROCESS_HANDLERS
    for route in handlers.values():
        assert heavy_work in {d.call for d in route.dependant.dependencies}, route.path
    for route in routes:
        assert set(_async_dependencies(route.dependant)) <= ASYNC_DEPENDENCIES, route.path


# --- heavy requests per principal ------------------------------------------------------------


def test_a_principal_over_its_heavy_request_limit_gets_429(served_one_slot, monkeypatch):
    served = served_one_slot
    gate = Gate()
    monkeypatch.setattr(config_audits, "audit_config", gate.wrap(config_audits.audit_config))
    served.import_example()
    auditor, body = served.token("auditor"), PARTITIONS_CONF
    first = served.in_background(post_audit(served, auditor, body))
    gate.wait_arrival()

    refused = post_audit(served, auditor, body)()
    other_principal = served.in_background(post_audit(served, served.admin, body))
    gate.wait_arrival()  # the operator's audit got its own slot
    gate.opened.set()

    problem = assert_problem(refused, 429, "too-many-requests")
    assert problem["limit"] == 1
    assert refused.headers["retry-after"] == str(HEAVY_RETRY_AFTER_SECONDS)
    assert ok(first.result()) and ok(other_principal.result())
    assert ok(post_audit(served, auditor, body)())  # the slot was given back


def test_a_failed_heavy_request_gives_its_slot_back(served_one_slot):
    served = served_one_slot
    served.import_example()
    auditor = served.token("auditor")
    bad_format = AUDITS.replace("partitions", "bogus")

    assert_problem(post_audit(served, auditor, b"\xff\xfe")(), 422, "invalid-document")
    assert_problem(post_audit(served, auditor, PARTITIONS_CONF, bad_format)(), 422)
    assert ok(post_audit(served, auditor, PARTITIONS_CONF)())


def test_the_heavy_work_limit_counts_slots_per_principal():
    limit = HeavyWorkLimit(2)

    with limit.slot("a"), limit.slot("a"), limit.slot("b"):
        with pytest.raises(TooManyRequestsError) as refused, limit.slot("a"):
            pass
        assert refused.value.retry_after == HEAVY_RETRY_AFTER_SECONDS
    with pytest.raises(RuntimeError), limit.slot("a"), limit.slot("a"):
        raise RuntimeError("the handler failed")
    with limit.slot("a"), limit.slot("a"):
        pass  # both slots were given back


def test_no_automatic_garbage_collection_runs_while_heavy_work_is_in_flight():
    # A full collection over a large import's objects holds the GIL for 100-250 ms.
    limit, other_app = HeavyWorkLimit(2), HeavyWorkLimit(2)
    assert gc.isenabled()

    with limit.slot("a"):
        with other_app.slot("b"):
            assert not gc.isenabled()
        assert not gc.isenabled()  # "a" is still in flight
    assert gc.isenabled()
    gc.disable()  # something else turned it off: it stays off
    try:
        with limit.slot("a"):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_caller_who_may_not_use_a_heavy_route_is_refused_before_any_slot(client):
    client.app.state.heavy_work = HeavyWorkLimit(0)  # every slot is taken
    billing = tokens.create_token(client.app.state.uow, spec=TokenCreate(name="b", role="billing"))
    headers = {"Authorization": f"Bearer {billing.token}", **TEXT_PLAIN}

    response = client.post(AUDITS, content=PARTITIONS_CONF, headers=headers)

    assert_problem(response, 403, "forbidden")
