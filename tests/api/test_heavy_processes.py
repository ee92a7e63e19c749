"""Heavy requests run in worker processes, not in the process serving the others.

A thread cannot isolate CPU-bound parsing (the GIL), so api/heavy_processes.py runs the heavy
routes' use cases in a small pool of worker processes. A real uvicorn server (tests/live_server.py)
serves the app with two workers, on a SQLite file and on PostgreSQL (each worker opens the
database itself). A gate in the workers (tests/heavy_gate.py) holds a use case there while the
test makes other requests. Every assertion is about where work ran (process ids) and what
answered before what, never about elapsed time. The workers are spawned once per backend.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.app import create_app
from api.heavy_processes import HeavyProcesses, WorkerTraceback
from api.idempotency import FINGERPRINT_HERE_BYTES
from api.routes import config_audits as audit_routes
from policies.errors import NotFoundError
from tenancy.record import idempotency
from tenancy.schemas import TokenCreate
from tenancy.store.db import make_engine
from tenancy.store.observers import WHOLE, observe_verifications
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import config_audits, policy, proofs, tokens, topology
from tests.builders import (
    DEFAULT_PARTITION_LINE,
    FABRIC,
    PORT_GUIDS,
    REPO,
    TEXT_PLAIN,
    FakeClock,
    assert_problem,
    created,
    example_topology,
    ok,
)
from tests.conftest import BACKENDS, LOOPBACK_CLIENT
from tests.heavy_gate import ProcessGate, failing_job, timed_job
from tests.keys import key_settings
from tests.live_server import live_server

ADMIN = {"Authorization": "Bearer admin-secret"}
AUDITS = f"/v1/fabrics/{FABRIC}/audits?format=partitions"
OBSERVATIONS = f"/v1/fabrics/{FABRIC}/observations"
JSON = {"content-type": "application/json"}
PARTITIONS_CONF = DEFAULT_PARTITION_LINE + "\n"
CLIENT_TIMEOUT_SECONDS = 120.0
# A worker left by a killed server ends within its watchdog's poll (0.5 s): a generous bound.
ORPHAN_TIMEOUT_SECONDS = 20.0
WORKERS = 2


@dataclass
class Served:
    """A live server whose heavy requests run in WORKERS processes; `gate` holds audits there.

    `threads` is the same app's answers with heavy work in threads (as Settings built in code
    have it), on the same database: what every answer must equal.
    """

    url: str
    processes: HeavyProcesses
    uow: UnitOfWork
    gate: ProcessGate
    threads: TestClient
    pool: ThreadPoolExecutor

    def client(self, headers: dict[str, str] | None = None) -> httpx2.Client:
        return httpx2.Client(
            base_url=self.url, headers=headers or ADMIN, timeout=CLIENT_TIMEOUT_SECONDS
        )

    def token(self, role: str) -> dict[str, str]:
        spec = TokenCreate(name=f"{role}-{os.urandom(4).hex()}", role=role)
        return {"Authorization": f"Bearer {tokens.create_token(self.uow, spec=spec).token}"}

    def post(self, auth: dict[str, str], url: str, body: str) -> Future[httpx2.Response]:
        """POST text `body` to `url` with `auth`, in the background."""

        def call() -> httpx2.Response:
            with self.client(auth) as client:
                return client.post(url, content=body, headers=TEXT_PLAIN)

        return self.pool.submit(call)


def _database(request: pytest.FixtureRequest, directory: Path) -> Iterator[str]:
    """The onboarded seed in a database every process can open: a SQLite file or PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{directory / 'heavy.db'}"
        engine = make_engine(url)
        request.getfixturevalue("sqlite_seeds").restore("onboarded", engine)
        engine.dispose()
        yield url
        return
    databases = request.getfixturevalue("postgres_databases")
    url = databases.create("onboarded")
    try:
        yield url
    finally:
        databases.drop(url)


@pytest.fixture(scope="module", params=BACKENDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("heavy")
    for url in _database(request, directory):
        settings = Settings(database_url=url, admin_token="admin-secret", heavy_processes=WORKERS)
        settings = key_settings(settings, copy_to=directory / "keys")
        engine = make_engine(url)
        try:
            yield from _serve(settings, engine, ProcessGate(directory / "gate"))
        finally:
            engine.dispose()


def _serve(settings: Settings, engine: Engine, gate: ProcessGate) -> Iterator[Served]:
    app = create_app(settings, engine=engine)
    processes: HeavyProcesses = app.state.heavy_processes
    processes.prepare = gate.prepare("tenancy.usecases.config_audits", "audit_config")
    threads_app = create_app(dataclasses.replace(settings, heavy_processes=0), engine=engine)
    with (
        live_server(app) as base_url,
        TestClient(threads_app, client=LOOPBACK_CLIENT) as threads,
        ThreadPoolExecutor(4) as pool,
    ):
        yield Served(base_url, processes, app.state.uow, gate, threads, pool)


def _worker_pids(processes: HeavyProcesses) -> set[int | None]:
    """The process ids of the workers the pool runs now."""
    pool = processes._pool
    return set() if pool is None else {p.pid for p in pool._processes.values()}


# --- where the work runs ----------------------------------------------------------------------


def test_config_audits_parse_in_worker_processes_while_other_requests_answer(served):
    auditor, operator = served.token("auditor"), served.token("operator")
    served.gate.hold()
    # The auditor's two heavy slots, each audit held in a worker (in its use case, before the
    # parse): were it in a thread of the server, it would hold the server's GIL.
    audits = [served.post(auditor, AUDITS, PARTITIONS_CONF) for _ in range(2)]
    held_in = served.gate.arrivals(2)

    with served.client() as admin, served.client(operator) as reader:
        health = admin.get("/healthz")
        tenants = reader.get("/v1/tenants")
        over_the_cap = served.post(auditor, AUDITS, PARTITIONS_CONF).result()
    answered_while_held = not any(audit.done() for audit in audits)
    served.gate.open()

    assert os.getpid() not in held_in
    assert set(held_in) == _worker_pids(served.processes)  # one audit in each worker
    assert answered_while_held
    assert ok(health) == {"status": "ok"} and ok(tenants)["count"] == 3
    assert_problem(over_the_cap, 429, "too-many-requests")  # the cap per principal still holds
    expected = served.threads.post(AUDITS, content=PARTITIONS_CONF, headers={**TEXT_PLAIN, **ADMIN})
    operators = served.post(operator, AUDITS, PARTITIONS_CONF).result()  # in either worker now
    for response in (*(audit.result() for audit in audits), operators):
        assert response.status_code == 200
        assert response.content == expected.content  # byte for byte, as in a thread


def not_here(*args: Any, **kwargs: Any) -> Any:
    """In place of heavy work in the serving process: it must run in a worker."""
    raise AssertionError("heavy work ran in the serving process")


def test_an_observation_is_parsed_and_validated_in_a_worker_process(served, monkeypatch):
    document = {
        "kind": "infiniband",
        "ports": [{"guid": PORT_GUIDS["gpu0001"][0], "lid": 3, "pkeys": ["0xffff"]}],
    }
    expected = served.threads.post(OBSERVATIONS, json=document, headers=ADMIN)
    monkeypatch.setattr(audit_routes, "validated", not_here)
    monkeypatch.setattr(config_audits, "observe", not_here)
    route = next(
        r
        for r in served.threads.app.routes
        if isinstance(r, APIRoute) and r.path.endswith("/observations")
    )

    with served.client(served.token("auditor")) as auditor:
        response = auditor.post(OBSERVATIONS, json=document)

    assert route.body_field is None  # FastAPI does not parse it on the event loop
    assert response.status_code == 200
    assert response.content == expected.content


def test_a_proof_is_issued_in_a_worker_as_its_caller_and_its_idempotency_key_replays(
    served, monkeypatch
):
    monkeypatch.setattr(proofs, "issue", not_here)
    auditor = served.token("auditor")
    keyed = {**auditor, "Idempotency-Key": f"proof-{os.urandom(4).hex()}", "X-Request-ID": "r-1"}
    url, body = "/v1/tenants/acme/isolation-proofs", {"fabric": FABRIC}

    with served.client(keyed) as client:
        first = client.post(url, json=body)
        retry = client.post(url, json=body)
    with served.client() as admin:
        entries = ok(admin.get("/v1/audit/entries", params={"limit": 500}))["data"]

    assert first.status_code == 201 and retry.status_code == 201
    assert retry.content == first.content and retry.headers["idempotent-replayed"] == "true"
    issued = [e for e in entries if e["action"] == "proof.issue" and e["request_id"] == "r-1"]
    assert [(e["role"], e["target"]) for e in issued] == [
        ("auditor", f"tenants/acme/isolation-proofs/{first.json()['id']}")
    ]


def test_a_topology_import_runs_in_a_worker(served, monkeypatch):
    monkeypatch.setattr(topology, "import_document", not_here)
    fabric = f"ib-{os.urandom(3).hex()}"
    spec = {
        "name": fabric,
        "kind": "infiniband",
        "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
    }

    with served.client() as admin:
        created(admin.post("/v1/fabrics", json=spec))
        imported = admin.put(
            f"/v1/fabrics/{fabric}/topology", content=example_topology(), headers=TEXT_PLAIN
        )

    assert ok(imported)["nodes"]


def test_a_policy_change_is_verified_in_a_worker_and_refused_as_in_a_thread(served, monkeypatch):
    # Dedicated leaves for external tenants: acme, research and globex share leaf01.
    document = {"kinds": {"external": {"isolation": "dedicated_leaf"}}}
    expected = served.threads.put("/v1/policy", json=document, headers=ADMIN)
    monkeypatch.setattr(policy, "put_policy", not_here)

    with served.client() as admin:
        refused = admin.put("/v1/policy", json=document)

    assert_problem(refused, 409, "isolation-violation")["counterexamples"]
    assert refused.content == expected.content  # the counterexamples crossed, byte for byte


def test_a_jobs_verification_timings_and_errors_reach_the_serving_process(served):
    heard: list[tuple[str, str]] = []

    def observer(fabric: str, check: str, seconds: float) -> None:
        heard.append((fabric, check))

    observe_verifications(served.uow.engine, observer)  # as /metrics does

    pid = asyncio.run(served.processes.run(served.uow, timed_job, "ib-timed"))
    with pytest.raises(NotFoundError) as failed:
        asyncio.run(served.processes.run(served.uow, failing_job, "no such fabric"))

    assert pid in _worker_pids(served.processes)
    assert heard == [("ib-timed", WHOLE)]
    assert (failed.value.detail, failed.value.extensions) == (
        "no such fabric",
        {"resource": "fabric"},
    )
    assert isinstance(failed.value.__cause__, WorkerTraceback)
    assert "failing_job" in str(failed.value.__cause__)  # where it failed, in the worker


def test_a_large_keyed_body_is_fingerprinted_in_a_worker_and_its_retry_replays(served, monkeypatch):
    # Canonicalizing a 32 MiB JSON body takes seconds: never on the event loop.
    monkeypatch.setattr(idempotency, "_canonical", not_here)
    port = {"guid": PORT_GUIDS["gpu0001"][0], "lid": 3, "pkeys": ["0xffff"]}
    document = {"kind": "infiniband", "ports": [port] * 400}  # listed again: merged
    body = json.dumps(document).encode()
    keyed = {**served.token("auditor"), "Idempotency-Key": f"obs-{os.urandom(4).hex()}"}

    with served.client(keyed) as client:
        first = client.post(OBSERVATIONS, content=body, headers=JSON)
        retry = client.post(OBSERVATIONS, content=body.replace(b", ", b","), headers=JSON)

    assert len(body) > FINGERPRINT_HERE_BYTES
    assert first.status_code == 200
    assert retry.headers["idempotent-replayed"] == "true"  # the same JSON, spaced otherwise
    assert retry.content == first.content


# --- the same answers as in a thread ----------------------------------------------------------

GUID = PORT_GUIDS["gpu0001"][0]
SAME_ANSWERS = {
    "audit": (AUDITS, TEXT_PLAIN, "Default=0x7fff, ipoib : ALL=full ;\n"),
    "audit, not UTF-8": (AUDITS, TEXT_PLAIN, b"\xff\xfe"),
    "audit, unknown format": (AUDITS.replace("partitions", "frr") + "&leaf=x", TEXT_PLAIN, "x"),
    "audit, unknown fabric": (AUDITS.replace(FABRIC, "nope"), TEXT_PLAIN, "x"),
    "observation": (OBSERVATIONS, JSON, '{"kind": "infiniband", "ports": []}'),
    "observation, empty": (OBSERVATIONS, JSON, ""),
    "observation, text": (OBSERVATIONS, TEXT_PLAIN, "{}"),
    "observation, malformed": (OBSERVATIONS, JSON, '{"kind": "infiniband", "ports": [}'),
    "observation, not UTF-8": (OBSERVATIONS, JSON, b'{"kind": "\xff"}'),
    "observation, too deep": (OBSERVATIONS, JSON, "[" * 100_000 + "]" * 100_000),
    "observation, repeated": (OBSERVATIONS, JSON, '{"kind": "infiniband", "kind": "x"}'),
    "observation, no kind": (OBSERVATIONS, JSON, '{"ports": []}'),
    "observation, invalid": (
        OBSERVATIONS,
        JSON,
        '{"kind": "infiniband", "ports": [{"guid": "zz", "lid": -1, "pkeys": ["x"]}, '
        f'{{"guid": "{GUID}", "lid": 1, "pkeys": [], "error": "e"}}]}}',
    ),
    "observation, RoCE on InfiniBand": (OBSERVATIONS, JSON, '{"kind": "roce", "leaf": "leaf01"}'),
}


@pytest.mark.parametrize("case", list(SAME_ANSWERS))
def test_a_worker_process_answers_byte_for_byte_as_a_thread(served, case):
    url, headers, body = SAME_ANSWERS[case]
    expected = served.threads.post(url, content=body, headers={**headers, **ADMIN})

    with served.client(served.token("auditor")) as auditor:
        response = auditor.post(url, content=body, headers=headers)

    assert (response.status_code, response.content) == (expected.status_code, expected.content)
    assert response.headers["content-type"] == expected.headers["content-type"]


# --- a worker that dies -----------------------------------------------------------------------


def test_a_killed_worker_fails_its_request_and_the_next_one_gets_new_workers(served):
    auditor = served.token("auditor")
    served.gate.hold()
    audit = served.post(auditor, AUDITS, PARTITIONS_CONF)
    [pid] = served.gate.arrivals(1)

    os.kill(pid, 9)  # a worker this test's server started
    failed = audit.result()
    served.gate.open()
    retried = served.post(auditor, AUDITS, PARTITIONS_CONF).result()

    assert_problem(failed, 500, "internal-error")
    assert ok(retried)["fabric"] == FABRIC
    assert pid not in _worker_pids(served.processes)


SERVING = """
import asyncio, sys, time
from api.heavy_processes import HeavyProcesses
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tests.heavy_gate import pid_job

settings = Settings(database_url=sys.argv[1], heavy_processes=1)
uow = UnitOfWork(make_engine(settings.database_url), settings)
processes = HeavyProcesses(uow)  # kept: a pool that is collected stops its workers
print(asyncio.run(processes.run(uow, pid_job)), flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaps does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_workers_end_when_the_serving_process_is_killed(tmp_path):
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    command = [sys.executable, "-c", SERVING, url]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO) as serving:
        assert serving.stdout is not None
        worker = int(serving.stdout.readline())
        serving.kill()  # SIGKILL: no lifespan, no shutdown of the pool
    deadline = time.monotonic() + ORPHAN_TIMEOUT_SECONDS
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.05)

    assert not _running(worker)


# --- when heavy work stays in threads ---------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "processes", "clock", "size"),
    [
        ("sqlite:///{dir}/a.db", 2, None, 2),
        ("postgresql://u@h/db", 1, None, 1),
        ("sqlite:///{dir}/a.db", 0, None, 0),  # Settings built in code: tests
        ("sqlite://", 2, None, 0),  # in memory: a worker would not see it
        ("sqlite:///file:x?mode=memory&cache=shared&uri=true", 2, None, 0),
        ("sqlite:///{dir}/a.db", 2, FakeClock(), 0),  # workers read the system clock
    ],
)
def test_heavy_work_runs_in_processes_only_where_they_see_the_same_database_and_time(
    tmp_path, url, processes, clock, size
):
    settings = Settings(database_url=url.format(dir=tmp_path), heavy_processes=processes)
    uow = UnitOfWork(make_engine("sqlite://"), settings, *([clock] if clock else []))

    assert HeavyProcesses(uow).size == size
    assert Settings().heavy_processes == 0
