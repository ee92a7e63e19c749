"""Start-up: `isofabric --help`, one REST command, `isofabric-agent --help`, and `make run`.

Targets (on an idle 2-core machine): `isofabric --help` at most 0.5 s, a REST command at most
0.8 s, `make run` on a fresh clone (its own venv, installed from the package registry through
pip's cache) answering its first request within 20 s. Each figure is the median of fresh
processes (no warm interpreter), printed with MET / NOT MET; then the slowest imports of `import
cli` (``python -X importtime``), the place to look when a target slips. Prints figures, asserts
nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from api.app import create_app
from tenancy.store.settings import Settings
from tests.live_server import free_port, live_server

RUNS = 7
BIN = Path(sys.executable).parent
TARGETS = {
    "isofabric --help": 0.5,
    "isofabric tenants list (REST)": 0.8,
    "make run, fresh clone: first answer": 20.0,
}
REPO = Path(__file__).resolve().parents[2]
FIRST_ANSWER_TIMEOUT = 180.0


def median_seconds(argv: list[str]) -> float:
    """The median wall-clock time of `argv` over `RUNS` fresh processes."""
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, timeout=60)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(label: str, seconds: float) -> None:
    target = TARGETS.get(label)
    verdict = (
        "" if target is None else f"  (≤ {target} s: {'MET' if seconds <= target else 'NOT MET'})"
    )
    print(f"{label:<38} {seconds:8.2f} s{verdict}")


def slowest_imports(count: int = 8) -> None:
    """The cumulative import times of `import cli`, slowest first."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import cli"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    rows = []
    for line in done.stderr.splitlines()[1:]:
        _, cumulative, name = (part.strip() for part in line.split("|"))
        rows.append((int(cumulative), name))
    print("slowest imports of `import cli` (cumulative):")
    for microseconds, name in sorted(rows, reverse=True)[:count]:
        print(f"    {name:<34} {microseconds / 1e6:8.3f} s")


def first_answer_of_make_run(tmp: Path) -> float:
    """Seconds from `make run` in a fresh clone of HEAD until `GET /v1/fabrics` answers 200."""
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    port = free_port()
    start = time.perf_counter()
    make = subprocess.Popen(
        ["make", "run", f"PORT={port}"], cwd=clone, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        return start_to_answer(f"http://127.0.0.1:{port}/v1/fabrics", start)
    finally:
        os.killpg(make.pid, signal.SIGTERM)  # make and the server it started, by process group
        make.wait(timeout=30)


def start_to_answer(url: str, start: float) -> float:
    while time.perf_counter() - start < FIRST_ANSWER_TIMEOUT:
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
            if answer.status == 200:
                return time.perf_counter() - start
        time.sleep(0.1)
    return float("inf")


def main() -> None:
    report("isofabric --help", median_seconds([str(BIN / "isofabric"), "--help"]))
    report("isofabric-agent --help", median_seconds([str(BIN / "isofabric-agent"), "--help"]))
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        with live_server(create_app(Settings(database_url=url))) as server:
            rest = [str(BIN / "isofabric"), "tenants", "list", "--url", server]
            report("isofabric tenants list (REST)", median_seconds(rest))
    slowest_imports()
    with tempfile.TemporaryDirectory() as tmp:
        report("make run, fresh clone: first answer", first_answer_of_make_run(Path(tmp)))


if __name__ == "__main__":
    main()
