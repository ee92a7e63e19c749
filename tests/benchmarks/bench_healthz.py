"""Event-loop benchmark (make bench): /healthz latency while a 100,000-port topology imports.

The service runs under uvicorn in its own process (as `isofabric serve` runs it) on 127.0.0.1,
on a port the kernel picks, with a temporary SQLite database. This process creates an
InfiniBand fabric, then PUTs a 100k-port ibnetdiscover (bench_scale's generator) while another
thread GETs /healthz every 10 ms. Prints the p50/p99/max /healthz latency during the import and
the import's duration (issue 10, item 10: the import must not stall the loop; the target is a
p99 under 100 ms). Never asserts on time.
"""

from __future__ import annotations

import argparse
import logging
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2

from tests.benchmarks.bench_scale import HCAS, NODES, ibnetdiscover_text

POLL_INTERVAL_SECONDS = 0.010
FABRIC = "ib-bench"
TIMEOUT_SECONDS = 600.0


def serve(database_url: str) -> None:
    """Child process: run the app under uvicorn on an ephemeral loopback port; print the port."""
    import uvicorn

    from api.app import create_app
    from tenancy.store.settings import Settings

    # No keys are installed (nothing here signs or renders): keep the readiness warnings quiet.
    logging.getLogger("isofabric.api").setLevel(logging.ERROR)
    app = create_app(Settings(database_url=database_url))
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that name it (else Nagle and the
    # peer's delayed ACK add 40 ms to every keep-alive response).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, proxy_headers=False)
    uvicorn.Server(config).run(sockets=[listener])


def start_server(database_url: str) -> tuple[subprocess.Popen[str], str]:
    """The server process and its base URL, once it answers /healthz."""
    command = [sys.executable, "-m", "tests.benchmarks.bench_healthz", "--serve", database_url]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    base_url = f"http://127.0.0.1:{int(process.stdout.readline())}"
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            httpx2.get(f"{base_url}/healthz", timeout=1.0)
            return process, base_url
        except httpx2.TransportError:
            time.sleep(0.05)
    process.terminate()
    raise RuntimeError("the server did not start")


class Poller(threading.Thread):
    """GETs /healthz every POLL_INTERVAL_SECONDS until stopped; records each latency (s)."""

    def __init__(self, base_url: str) -> None:
        super().__init__(daemon=True)
        self.base_url = base_url
        self.latencies: list[float] = []
        self.failures = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx2.Client(base_url=self.base_url, timeout=TIMEOUT_SECONDS) as client:
            while not self.stop.is_set():
                start = time.perf_counter()
                if client.get("/healthz").status_code != 200:
                    self.failures += 1
                elapsed = time.perf_counter() - start
                self.latencies.append(elapsed)
                self.stop.wait(max(0.0, POLL_INTERVAL_SECONDS - elapsed))


def import_while_polling(base_url: str, text: str) -> tuple[float, Poller]:
    """PUT the topology while a Poller runs; the import's duration and the poller."""
    with httpx2.Client(base_url=base_url, timeout=TIMEOUT_SECONDS) as client:
        created = client.post(
            "/v1/fabrics",
            json={
                "name": FABRIC,
                "kind": "infiniband",
                "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
            },
        )
        assert created.status_code == 201, created.text
        poller = Poller(base_url)
        poller.start()
        start = time.perf_counter()
        response = client.put(
            f"/v1/fabrics/{FABRIC}/topology", content=text, headers={"content-type": "text/plain"}
        )
        duration = time.perf_counter() - start
        poller.stop.set()
        poller.join()
    assert response.status_code == 200, response.text[:500]
    return duration, poller


def percentile(values: list[float], fraction: float) -> float:
    """The `fraction` quantile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(duration: float, poller: Poller, ports: int) -> None:
    """Print the figures in the column layout of the other benchmarks."""
    ms = [latency * 1000 for latency in poller.latencies]
    print(f"{'topology import (HTTP, ' + f'{ports:,} ports)':<38} {duration:8.2f} s")
    print(f"{'/healthz samples during the import':<38} {len(ms):8d}")
    print(f"{'/healthz failures':<38} {poller.failures:8d}")
    print(f"{'/healthz p50':<38} {statistics.median(ms):8.1f} ms")
    print(f"{'/healthz p99':<38} {percentile(ms, 0.99):8.1f} ms")
    print(f"{'/healthz max':<38} {max(ms):8.1f} ms")


def main() -> None:
    """Run the benchmark (or, with --serve, the server process it starts)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", metavar="DATABASE_URL")
    arguments = parser.parse_args()
    if arguments.serve:
        serve(arguments.serve)
        return
    text = ibnetdiscover_text(NODES, HCAS)
    with tempfile.TemporaryDirectory() as directory:
        process, base_url = start_server(f"sqlite:///{Path(directory) / 'bench.db'}")
        try:
            duration, poller = import_while_polling(base_url, text)
        finally:
            process.terminate()
            process.wait(timeout=60)
    report(duration, poller, NODES * HCAS)


if __name__ == "__main__":
    main()
