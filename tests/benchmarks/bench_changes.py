"""Change benchmark (make bench): every target of issue 12, each printed as MET or NOT MET.

Everything measured goes over HTTP to the service running under uvicorn in a child process
(tests/benchmarks/bench_server.py), with a real operator API token on every request and no
P_Key quarantine. The starting states are built directly in a fresh database first
(tests/benchmarks/change_fabrics.py): on SQLite and, when it answers, on PostgreSQL (a database
``isofabric_bench_<pid>_<tag>`` created for the run and dropped after it). Parts (--only):

* ``allocation``: allocate-1 (then release) p50 on the 100k-port fabric (12,500 nodes x 8 HCAs,
  2,000 tenants holding 4,000 nodes, storage granted to half of them) within 1.5x the p50 on a
  1k-port fabric of the same shape; SQLite and PostgreSQL.
* ``reads``: GET verification and GET partitions.conf of the unchanged 100k-port fabric within
  2x a route of the same app returning a pre-built bytes object of the same size (medians of
  up to 20 requests each, alternating); SQLite and PostgreSQL.
* ``sustained``: 8 concurrent clients doing allocate-1 / release pairs on the 100k-port fabric
  for --seconds (60): at least 50 mutations/s, p50 and p99, 0 errors, 0 duplicate identifiers;
  PostgreSQL only.
* ``changeset``: one change set (POST /v1/changesets) onboarding 1,000 tenants with 8 nodes
  each on the 100k-port fabric, under 10 s end to end; SQLite and PostgreSQL. A service without
  the route (404/405) prints ``change sets: NOT AVAILABLE``.
* ``roce``: allocate-1 p50 on a RoCE fabric of 64 leaves (16,384 NICs, 500 tenants) within
  1.5x the p50 on a 1-leaf fabric; SQLite.

Never asserts on time; exits 1 only if a part failed (an unexpected answer). The machine's load
average is printed at the start and the end: other work on it shows in every figure.

    python -m tests.benchmarks.bench_changes [--only NAME] [--postgres-url URL] [--seconds N]
        [--samples N]   # allocation pairs (default 11) and reads (default 20) per figure
        [--verdict-warm on|off]   # the server's verdict warmer (default on, as served)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.benchmarks import change_parts as parts
from tests.benchmarks.bench_server import running_server
from tests.benchmarks.change_client import FAILED, SKIPPED, Api, Scoreboard
from tests.benchmarks.change_fabrics import (
    IB_LARGE,
    IB_SMALL,
    ROCE_LARGE,
    ROCE_SMALL,
    Deployment,
    fresh_database,
    postgres_reachable,
    prepare_ib,
    prepare_roce,
)
from tests.benchmarks.change_sustained import sustained
from tests.benchmarks.timing import measure

PARTS = ("allocation", "reads", "sustained", "changeset", "roce")
# Run in this order: the reads see the state as built; the change set comes last, as it takes
# 8,000 of the 8,450 free nodes of the 100k-port fabric.
IB_PARTS = ("reads", "allocation", "sustained", "changeset")
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
ALLOCATION_SAMPLES, READ_SAMPLES = 11, 20


def arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description="Issue 12's change benchmark.")
    parser.add_argument("--only", action="append", choices=PARTS, help="run this part (repeatable)")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("ISOFABRIC_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL),
        help="PostgreSQL server to create the run's databases on ('' for SQLite only)",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="sustained part's duration")
    parser.add_argument("--samples", type=int, help="allocation pairs / reads per figure")
    parser.add_argument(
        "--verdict-warm",
        choices=("on", "off"),
        default="on",
        help="the server's verdict warmer (ISOFABRIC_VERDICT_WARM; the service's default: on)",
    )
    return parser.parse_args(argv)


def backends(postgres_url: str, board: Scoreboard, wanted: set[str]) -> list[str]:
    """SQLite, and PostgreSQL if it answers (its targets are SKIPPED otherwise)."""
    problem = postgres_reachable(postgres_url) if postgres_url else "no --postgres-url"
    if problem is None:
        return ["sqlite", "postgresql"]
    print(f"PostgreSQL: not used ({problem})")
    for part in sorted(wanted & {"allocation", "reads", "sustained", "changeset"}):
        board.record(f"{part} (postgresql)", SKIPPED, f"PostgreSQL not available: {problem}")
    return ["sqlite"]


def guarded(board: Scoreboard, target: str, action: Callable[[], None]) -> None:
    """Run one part; an unexpected answer fails that part only, and the run goes on."""
    try:
        action()
    except Exception as error:  # the benchmark reports and continues with the next part
        board.record(target, FAILED, f"{type(error).__name__}: {error}")


def ib_run(backend: str, wanted: set[str], options: argparse.Namespace, board: Scoreboard) -> None:
    """The InfiniBand parts on one backend: one database, one server, parts in IB_PARTS order."""
    chosen = [p for p in IB_PARTS if p in wanted and (p != "sustained" or backend != "sqlite")]
    if not chosen:
        return
    print(f"\n== InfiniBand, {backend}: {', '.join(chosen)}")
    with deployed(prepare_ib, backend, "ib", options) as api:
        parts.settle(api, (IB_LARGE, IB_SMALL), backend)
        for part in chosen:
            guarded(board, f"{part} ({backend})", ib_part(part, api, board, backend, options))


def ib_part(
    part: str, api: Api, board: Scoreboard, label: str, options: argparse.Namespace
) -> Callable[[], None]:
    """The call that runs one InfiniBand part."""
    fabric = IB_LARGE.name
    actions: dict[str, Callable[[], None]] = {
        "reads": lambda: parts.reads(api, board, label, fabric, options.samples or READ_SAMPLES),
        "allocation": lambda: parts.allocation(
            api, board, label, (IB_LARGE, IB_SMALL), options.samples or ALLOCATION_SAMPLES
        ),
        "sustained": lambda: sustained(api, board, label, fabric, options.seconds),
        "changeset": lambda: parts.changeset(api, board, label, fabric),
    }
    return actions[part]


def roce_run(options: argparse.Namespace, board: Scoreboard) -> None:
    """The RoCE part: 64 leaves against 1 leaf, on SQLite."""
    print("\n== RoCE, sqlite: allocation")
    with deployed(prepare_roce, "sqlite", "roce", options) as api:
        parts.settle(api, (ROCE_LARGE, ROCE_SMALL), "sqlite")
        samples = options.samples or ALLOCATION_SAMPLES
        parts.allocation(api, board, "sqlite", (ROCE_LARGE, ROCE_SMALL), samples)


@contextmanager
def deployed(
    prepare: Callable[[str, Path, str], Deployment],
    backend: str,
    tag: str,
    options: argparse.Namespace,
) -> Iterator[Api]:
    """A fresh database on `backend` in the state `prepare` builds, served; an operator client."""
    with (
        tempfile.TemporaryDirectory() as scratch,
        fresh_database(backend, Path(scratch), options.postgres_url, tag) as url,
    ):
        keys = Path(scratch) / "keys"
        deployment = measure(f"setup: whole state ({backend})", lambda: prepare(url, keys, backend))
        environment = {**deployment.environment, "ISOFABRIC_VERDICT_WARM": options.verdict_warm}
        with (
            running_server(environment) as base_url,
            Api(base_url, deployment.token) as api,
        ):
            yield api


def main(argv: list[str] | None = None) -> None:
    """Run the chosen parts; print each target's outcome and a summary."""
    options = arguments(argv)
    wanted = set(options.only or PARTS)
    board = Scoreboard()
    print(f"host CPUs: {os.cpu_count()}; load average at start: {os.getloadavg()}")
    if wanted - {"roce"}:
        for backend in backends(options.postgres_url, board, wanted):
            # Called at once, inside this iteration: the lambda's `backend` is this one.
            guarded(
                board,
                f"InfiniBand parts ({backend})",
                lambda: ib_run(backend, wanted, options, board),  # noqa: B023
            )
    if "roce" in wanted:
        guarded(board, "roce allocation (sqlite)", lambda: roce_run(options, board))
    print(f"\nload average at the end: {os.getloadavg()}")
    board.print_summary()
    if board.failed():
        sys.exit(1)


if __name__ == "__main__":
    main()
