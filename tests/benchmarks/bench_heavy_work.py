"""Heavy-work isolation benchmark (make bench): other callers' latency while a role works hardest.

The service runs under uvicorn in its own process (tests/benchmarks/bench_server.py, as
`isofabric serve` runs it) on a temporary SQLite database holding bench_scale's 100,000-port
InfiniBand fabric (2,000 tenants) and bench_roce's 64-leaf RoCE fabric (500 tenants). In each
scenario one principal keeps its two heavy-request slots (ISOFABRIC_HEAVY_CONCURRENCY 2) busy
with the heaviest work its role may do, from processes of their own, while this process GETs
/healthz every 10 ms (no token) and an operator's GET /v1/tenants every 50 ms:

* an auditor: two 32 MiB config audits at once, for each format (partitions.conf, a leaf's
  config_db.json, a leaf's frr.conf); two 32 MiB observations; two isolation proofs;
* an operator: two re-imports of the 100k-port topology (`PUT .../topology`), then two first
  imports of it, each into a new fabric.

The bulk-inserted state is first recorded through the product and its verdicts warmed
(heavy_setup.settle). `--heavy-processes 0` runs the heavy requests in the service's threads
instead of its worker processes (api/heavy_processes.py), for comparison.

Prints per scenario the heavy requests' median duration, and the p50/p99 of both callers
against the targets (/healthz p99 under 100 ms, every other caller's p99 under 250 ms), each
MET or NOT MET. Never asserts on time: the machine is shared, so the figures are noisy.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from tests.benchmarks import heavy_bodies
from tests.benchmarks.bench_server import running_server
from tests.benchmarks.change_client import MET, NOT_MET, percentile
from tests.benchmarks.heavy_setup import IB, ROCE, Prepared, prepare, settle, write_bodies

HEALTHZ_TARGET_MS, OTHERS_TARGET_MS = 100.0, 250.0
HEALTHZ_INTERVAL, TENANTS_INTERVAL = 0.010, 0.050
ROUNDS = 2  # heavy requests per slot and scenario
TIMEOUT_SECONDS = 900.0
# In a path: a new InfiniBand fabric, created (untimed) before each request.
NEW_FABRIC = "{new}"


@dataclass(frozen=True, slots=True)
class Scenario:
    """One principal's heavy work: `method` `path` with the body in file `body` (or none)."""

    label: str
    role: str
    method: str
    path: str
    body: str | None
    content_type: str = "text/plain"


def scenarios(prepared: Prepared) -> list[Scenario]:
    """The auditor's heaviest work per heavy route, then the operator's imports."""
    leaf, tenant = prepared.leaf, prepared.tenant
    audits = "/v1/fabrics/{}/audits?format={}{}"
    return [
        Scenario("auditor: 2 x partitions.conf audit", "auditor", "POST",
                 audits.format(IB, "partitions", ""), "partitions.conf"),
        Scenario("auditor: 2 x config_db.json audit", "auditor", "POST",
                 audits.format(ROCE, "config_db", f"&leaf={leaf}"), "config_db.json"),
        Scenario("auditor: 2 x frr.conf audit", "auditor", "POST",
                 audits.format(ROCE, "frr", f"&leaf={leaf}"), "frr.conf"),
        Scenario("auditor: 2 x observation", "auditor", "POST",
                 f"/v1/fabrics/{IB}/observations", "observation.json", "application/json"),
        Scenario("auditor: 2 x isolation proof", "auditor", "POST",
                 f"/v1/tenants/{tenant}/isolation-proofs", "proof.json", "application/json"),
        Scenario("operator: 2 x topology re-import", "importer", "PUT",
                 f"/v1/fabrics/{IB}/topology", "ibnetdiscover.txt"),
        Scenario("operator: 2 x first topology import", "importer", "PUT",
                 f"/v1/fabrics/{NEW_FABRIC}/topology", "ibnetdiscover.txt"),
    ]  # fmt: skip


def send(base_url: str, token: str, scenario: Scenario, directory: str) -> list[float]:
    """A sending process: ROUNDS heavy requests one after the other; their durations (s)."""
    body = (Path(directory) / scenario.body).read_bytes() if scenario.body else None
    headers = {"Authorization": f"Bearer {token}", "content-type": scenario.content_type}
    durations = []
    with httpx2.Client(base_url=base_url, timeout=TIMEOUT_SECONDS) as client:
        for round_ in range(ROUNDS):
            path = scenario.path
            if NEW_FABRIC in path:
                path = path.replace(
                    NEW_FABRIC, new_fabric(client, token, f"{os.getpid()}-{round_}")
                )
            start = time.perf_counter()
            response = client.request(scenario.method, path, content=body, headers=headers)
            durations.append(time.perf_counter() - start)
            if response.status_code not in (200, 201):
                raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")
    return durations


def new_fabric(client: httpx2.Client, token: str, tag: str) -> str:
    """Create an InfiniBand fabric ``ib-new-<tag>``; its name."""
    name = f"ib-new-{tag}"
    spec = {"name": name, "kind": "infiniband", "pkey_range": {"first": "0x0100", "last": "0x7ffe"}}
    created = client.post("/v1/fabrics", json=spec, headers={"Authorization": f"Bearer {token}"})
    if created.status_code != 201:
        raise RuntimeError(f"POST /v1/fabrics: {created.status_code} {created.text[:300]}")
    return name


@dataclass(eq=False)  # a thread must stay hashable
class Poller(threading.Thread):
    """GETs `path` every `interval` seconds until stopped; records each latency (ms)."""

    base_url: str
    path: str
    interval: float
    headers: dict[str, str]
    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        super().__init__(daemon=True)

    def run(self) -> None:
        with httpx2.Client(base_url=self.base_url, timeout=TIMEOUT_SECONDS) as client:
            while not self.stop.is_set():
                start = time.perf_counter()
                if client.get(self.path, headers=self.headers).status_code != 200:
                    self.failures += 1
                elapsed = time.perf_counter() - start
                self.latencies.append(elapsed * 1000)
                self.stop.wait(max(0.0, self.interval - elapsed))


def while_polling(base_url: str, operator: str, work: Callable[[], list[float]]) -> list[Poller]:
    """Run `work` while /healthz and an operator's GET /v1/tenants are polled; the pollers."""
    pollers = [
        Poller(base_url, "/healthz", HEALTHZ_INTERVAL, {}),
        Poller(base_url, "/v1/tenants", TENANTS_INTERVAL, {"Authorization": f"Bearer {operator}"}),
    ]
    for poller in pollers:
        poller.start()
    try:
        work()
    finally:
        for poller in pollers:
            poller.stop.set()
            poller.join()
    return pollers


def run(base_url: str, prepared: Prepared, scenario: Scenario, directory: str) -> None:
    """Both slots of the scenario's principal busy from two processes; print the figures."""
    token = prepared.tokens[scenario.role]
    durations: list[float] = []

    def work() -> list[float]:
        # Spawned, not forked: this process runs the pollers' threads, whose locks a fork
        # would copy held.
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as senders:
            futures = [senders.submit(send, base_url, token, scenario, directory) for _ in range(2)]
            for future in futures:
                durations.extend(future.result())
        return durations

    healthz, tenants = while_polling(base_url, prepared.tokens["operator"], work)
    report(scenario.label, durations, healthz, tenants)


def idle_for(seconds: float) -> list[float]:
    """No heavy work for `seconds`: the baseline."""
    time.sleep(seconds)
    return []


def report(label: str, durations: list[float], healthz: Poller, tenants: Poller) -> None:
    """One scenario's lines, in the column layout of the other benchmarks."""
    print(label)
    if durations:
        print(f"{'  heavy requests, median':<38} {statistics.median(durations):8.2f} s")
    for name, poller, target in (
        ("/healthz", healthz, HEALTHZ_TARGET_MS),
        ("operator GET /v1/tenants", tenants, OTHERS_TARGET_MS),
    ):
        ms = poller.latencies
        p99 = percentile(ms, 0.99)
        verdict = MET if p99 < target and not poller.failures else NOT_MET
        print(
            f"{'  ' + name + ' p50 / p99':<38} {statistics.median(ms):8.1f} / {p99:7.1f} ms"
            f"  {verdict} (p99 < {target:.0f} ms; {len(ms)} samples, {poller.failures} failed)"
        )
    sys.stdout.flush()


def main() -> None:
    """Build the fabrics, start the service, run every scenario; print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--heavy-processes",
        metavar="N",
        help="the service's ISOFABRIC_HEAVY_PROCESSES (default: its default; 0: in threads)",
    )
    processes = parser.parse_args().heavy_processes
    with tempfile.TemporaryDirectory() as scratch:
        prepared = prepare(Path(scratch))
        environment = prepared.environment
        if processes is not None:
            environment = {**environment, "ISOFABRIC_HEAVY_PROCESSES": processes}
        with running_server(environment) as base_url:
            settle(base_url, prepared)
            write_bodies(base_url, prepared, scratch)
            sizes = ", ".join(
                f"{p.name} {p.stat().st_size / 2**20:.1f} MiB"
                for p in sorted(Path(scratch).glob("*.*"))
                if p.suffix in (".conf", ".json", ".txt")
            )
            print(f"bodies: {sizes} (target {heavy_bodies.TARGET_BYTES / 2**20:.0f} MiB)")
            idle = while_polling(base_url, prepared.tokens["operator"], lambda: idle_for(5.0))
            report("idle (no heavy work)", [], *idle)
            for scenario in scenarios(prepared):
                run(base_url, prepared, scenario, scratch)


if __name__ == "__main__":
    main()
