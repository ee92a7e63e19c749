"""Topology import benchmark (make bench): a 100,000-port ibnetdiscover file over HTTP.

Issue 12, item 5: a re-import of an unchanged file within 2x the in-process
`parse_ibnetdiscover` time, a first import within 3x. The service runs under uvicorn in its own
process with a temporary SQLite database (as tests/benchmarks/bench_healthz.py runs it). Three
times: parse the file in this process, import it into a fresh fabric, import it again
unchanged. Prints the medians, their ratios to the parse and whether each target is met; each
run's parse sits next to its imports, so that a machine busy at one moment skews both alike.
Never asserts on time: the machine is shared, so the figures are noisy.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import httpx2

from policies.infiniband.parse_ibnetdiscover import parse_ibnetdiscover
from tests.benchmarks.bench_healthz import TIMEOUT_SECONDS, start_server
from tests.benchmarks.bench_scale import HCAS, NODES, ibnetdiscover_text

RUNS = 3
FIRST_IMPORT_TARGET, REIMPORT_TARGET = 3.0, 2.0


def parse_seconds(text: str) -> float:
    """Wall-clock time of one `parse_ibnetdiscover(text)` in this process."""
    start = time.perf_counter()
    parse_ibnetdiscover(text)
    return time.perf_counter() - start


def put_seconds(client: httpx2.Client, fabric: str, text: str) -> float:
    """Time one PUT of `text` as the fabric's topology; it must succeed."""
    start = time.perf_counter()
    response = client.put(
        f"/v1/fabrics/{fabric}/topology", content=text, headers={"content-type": "text/plain"}
    )
    elapsed = time.perf_counter() - start
    assert response.status_code == 200, response.text[:500]
    return elapsed


def run_once(client: httpx2.Client, fabric: str, text: str) -> tuple[float, float, float]:
    """Parse `text`, create `fabric`, import `text` into it and again: the three durations."""
    parse = parse_seconds(text)
    created = client.post(
        "/v1/fabrics",
        json={
            "name": fabric,
            "kind": "infiniband",
            "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
        },
    )
    assert created.status_code == 201, created.text
    return parse, put_seconds(client, fabric, text), put_seconds(client, fabric, text)


def report(label: str, seconds: float, parse: float, target: float | None = None) -> None:
    """One figure in the benchmarks' column layout, with its ratio to the parse."""
    line = f"{label:<38} {seconds:8.2f} s"
    if target is not None:
        verdict = "MET" if seconds / parse <= target else "NOT MET"
        line += f"  {seconds / parse:4.1f}x parse (target <= {target:.0f}x: {verdict})"
    print(line)


def runs_over_http(text: str) -> list[tuple[float, float, float]]:
    """(parse, first import, unchanged re-import) into RUNS fresh fabrics of one server."""
    with tempfile.TemporaryDirectory() as directory:
        process, base_url = start_server(f"sqlite:///{Path(directory) / 'bench.db'}")
        try:
            with httpx2.Client(base_url=base_url, timeout=TIMEOUT_SECONDS) as client:
                return [run_once(client, f"ib-import-{n}", text) for n in range(RUNS)]
        finally:
            process.terminate()
            process.wait(timeout=60)


def main() -> None:
    """Run the benchmark."""
    text = ibnetdiscover_text(NODES, HCAS)
    print(f"ibnetdiscover: {NODES * HCAS:,} CA ports, {len(text) / 1e6:.1f} MB")
    runs = runs_over_http(text)
    parse, first, again = (statistics.median(run[i] for run in runs) for i in range(3))
    report(f"parse_ibnetdiscover (median of {RUNS})", parse, parse)
    report("first import (HTTP, median)", first, parse, FIRST_IMPORT_TARGET)
    report("unchanged re-import (HTTP, median)", again, parse, REIMPORT_TARGET)
    for number, (one, two, three) in enumerate(runs, start=1):
        print(f"  run {number}: parse {one:.2f} s, first {two:.2f} s, re-import {three:.2f} s")


if __name__ == "__main__":
    main()
