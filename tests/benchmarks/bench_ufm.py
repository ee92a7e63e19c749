"""UFM-compatible API benchmark (make bench): issue 29's facade targets, each MET or NOT MET.

Everything measured goes over HTTP to the service under uvicorn in a child process
(tests/benchmarks/bench_server.py), on SQLite and, when it answers, on PostgreSQL (as
bench_changes: a database of its own, dropped after). The starting state is the change
benchmark's ``ib-100k`` (tests/benchmarks/change_fabrics.py): 12,500 nodes x 8 HCAs = 100,000
ports, 2,000 tenants holding 2 nodes each, a storage service granted to every other; one
allocate / release pair over HTTP records it (`change_parts.settle`). Virtual GUIDs are then
enabled on the fabric (``PATCH /v1/fabrics/ib-100k``). Every facade call authenticates with HTTP
Basic, an orchestrator token bound to the fabric and one tenant as the password. Two parts:

* ``latency``: --writes (200) facade writes by the orchestrators of 40 tenants spread over the
  2,000, one after another, five per tenant, taken in turn: a port of a free node added to the
  tenant's default P_Key (allocates the node), a new P_Key with two virtual GUIDs (creates a
  partition), a port of that node added to it (limited), a third virtual GUID added, the first
  removed (``DELETE …/guids/…`` or ``POST /actions/remove_guids_from_pkey``, in turn). Prints
  p50 / p99 / max, per kind too (target: p99 <= 2 s).
* ``burst``: a deploy target ``sm01`` and its agent (tests/benchmarks/ufm_agent.py: the agent's
  own loop and cycle, with a standby OpenSM stand-in) running with ``--interval`` (1 s) and
  ``--min-interval`` (5 s); once it has applied the current state, --burst (1,000) single-GUID
  adds, one after another, of virtual GUIDs into one new P_Key of one tenant. Prints the burst's
  duration, its write p50 / p99, the snapshots it committed, the signed manifests the agent
  fetched (how long each took, the snapshots they named), its reports by state (the first
  of any other than applied, with its reason), the manifests it applied (downloaded their
  changed files and installed them), the shortest gap between two applies, and when it applied
  the state the burst ended with. Target: at most one manifest applied per --min-interval, from
  the burst's start until that last apply (floor(span / min-interval) + 1): the agent's own
  throttle. It fetches the signed manifest once per --interval, or less often when a fetch
  takes longer; that count is printed beside.

Never asserts on time; exits 1 only if a part failed (an unexpected answer). The machine's load
average is printed at the start and the end: other work on it shows in every figure.

    python -m tests.benchmarks.bench_ufm [--only latency|burst] [--postgres-url URL]
        [--writes 200] [--burst 1000] [--interval 1] [--min-interval 5]
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx2

from tests.benchmarks.bench_changes import DEFAULT_POSTGRES_URL, guarded
from tests.benchmarks.bench_scale import HCAS, tenant_names
from tests.benchmarks.bench_server import running_server, server_environment
from tests.benchmarks.change_client import (
    FAILED,
    MET,
    NOT_MET,
    SKIPPED,
    Api,
    BenchError,
    Scoreboard,
    count,
    figure,
    median,
    percentile,
)
from tests.benchmarks.change_fabrics import (
    IB_LARGE,
    NODES_PER_TENANT,
    fresh_database,
    postgres_reachable,
    prepare_ib,
)
from tests.benchmarks.change_parts import settle
from tests.benchmarks.timing import measure

PARTS = ("latency", "burst")
FABRIC = IB_LARGE.name
TARGET = "sm01"
SM_FILES = ("opensm.conf", "partitions.conf", "qos-policy.conf")
LATENCY_LIMIT_SECONDS = 2.0  # p99 of a facade write (issue 29); a client's deadline is 10 s
WRITES, BURST = 200, 1_000
KINDS_PER_TENANT = 5  # the writes each tenant of the latency part makes
INTERVAL, MIN_INTERVAL = 1.0, 5.0  # the agent's --interval and --min-interval
VIRTUAL_RANGE = (0x0200_0000_0000_0000, 0x0200_0000_FFFF_FFFF)
LATENCY_GUIDS = VIRTUAL_RANGE[0]  # + 16 x tenant + n
BURST_GUIDS = VIRTUAL_RANGE[0] + 0x1_0000_0000 - 0x1000_0000  # well apart from those
LATENCY_PKEYS, BURST_PKEY = 0x2000, 0x3000  # new P_Keys: free in the pool (0x0100-0x7ffe)
AGENT_SETTLE_SECONDS = 300.0  # for the agent to apply the state before / after the burst
MAX_RETRIES = 100  # 429s of one write the benchmark waits out (Retry-After) before failing


def guid_text(guid: int) -> str:
    """A GUID as UFM's clients send it: 16 bare lowercase hex digits."""
    return f"{guid:016x}"


def port_guid(node: int, rail: int) -> int:
    """The port GUID of HCA `rail` of node `node` in `bench_scale.ibnetdiscover_text`."""
    return 0x1000000 + (node * HCAS + rail) * 2 + 1


def free_nodes() -> Iterator[int]:
    """Free compute nodes of ib-100k, from the last (the tenants hold the first ones)."""
    held = IB_LARGE.tenants * NODES_PER_TENANT
    yield from range(IB_LARGE.nodes - IB_LARGE.storage_nodes - 1, held - 1, -1)


class Facade:
    """The UFM-compatible API as one orchestrator token calls it (HTTP Basic, keep-alive)."""

    def __init__(self, base_url: str, token: str) -> None:
        secret = base64.b64encode(f"orchestrator:{token}".encode()).decode()
        self.client = httpx2.Client(
            base_url=base_url, timeout=600.0, headers={"Authorization": f"Basic {secret}"}
        )
        self.limited = 0  # 429s waited out

    def close(self) -> None:
        self.client.close()

    def write(self, method: str, path: str, body: dict[str, Any] | None = None) -> float:
        """One write that must answer 200; its time (a 429 is waited out, not timed)."""
        for _ in range(MAX_RETRIES):
            start = time.perf_counter()
            response = self.client.request(method, f"/ufmRest{path}", json=body)
            seconds = time.perf_counter() - start
            if response.status_code != 429:
                break
            self.limited += 1
            time.sleep(float(response.headers.get("retry-after", "1")))
        if response.status_code != 200:
            raise BenchError(
                f"{method} /ufmRest{path} {json.dumps(body)[:200]}: {response.status_code}: "
                f"{response.text[:300]}"
            )
        return seconds

    def read(self, path: str) -> Any:
        response = self.client.get(f"/ufmRest{path}")
        if response.status_code != 200:
            raise BenchError(f"GET /ufmRest{path}: {response.status_code}: {response.text[:300]}")
        return response.json()


def orchestrator(api: Api, tenant: str) -> str:
    """A new orchestrator token bound to ib-100k and `tenant`."""
    body = {"name": "bench-ufm", "role": "orchestrator", "fabric": FABRIC, "tenant": tenant}
    return str(api.expect(201, "POST", "/v1/tokens", json=body)[0]["token"])


def enable_virtual_guids(api: Api) -> None:
    first, last = VIRTUAL_RANGE
    setting = {"enabled": True, "ranges": [f"0x{first:016x}-0x{last:016x}"], "sm": "nvidia"}
    _, seconds = api.expect(200, "PATCH", f"/v1/fabrics/{FABRIC}", json={"virtual_guids": setting})
    figure("enable virtual GUIDs (PATCH fabric)", seconds, "s")


def p99_verdict(board: Scoreboard, target: str, times: list[float]) -> None:
    p99 = percentile(times, 0.99)
    status = MET if p99 <= LATENCY_LIMIT_SECONDS else NOT_MET
    detail = (
        f"p99 {p99:.3f} s, limit {LATENCY_LIMIT_SECONDS:g} s; p50 {median(times):.3f} s, "
        f"max {max(times):.3f} s"
    )
    board.record(target, status, detail)


# ------------------------------------------------------------------------------ latency part


@dataclass
class Orchestrator:
    """One tenant's orchestrator in the latency part: its key, node and P_Key."""

    tenant: str
    facade: Facade
    default_pkey: int
    node: int
    pkey: int
    guids: list[int] = field(default_factory=list)

    def steps(self, index: int) -> list[tuple[str, str, str, dict[str, Any] | None]]:
        """(kind, method, path, body) of its writes, in order."""
        own, new = f"0x{self.default_pkey:04x}", f"0x{self.pkey:04x}"
        v = [guid_text(g) for g in self.guids]
        remove: tuple[str, str, str, dict[str, Any] | None] = (
            ("remove virtual GUID", "DELETE", f"/resources/pkeys/{new}/guids/{v[0]}", None)
            if index % 2
            else (
                "remove virtual GUID",
                "POST",
                "/actions/remove_guids_from_pkey",
                {"pkey": new, "guids": [v[0]]},
            )
        )
        return [
            ("allocate (free node's port)", "POST", "/resources/pkeys",
             {"pkey": own, "guids": [guid_text(port_guid(self.node, 0))], "membership": "full"}),
            ("create P_Key (2 virtual GUIDs)", "POST", "/resources/pkeys",
             {"pkey": new, "guids": v[:2], "membership": "full", "ip_over_ib": True,
              "index0": False}),
            ("add port (limited)", "POST", "/resources/pkeys",
             {"pkey": new, "guids": [guid_text(port_guid(self.node, 1))],
              "membership": "limited"}),
            ("add virtual GUID", "POST", "/resources/pkeys",
             {"pkey": new, "guids": [v[2]], "membership": "full"}),
            remove,
        ]  # fmt: skip


def orchestrators(api: Api, base_url: str, count_: int) -> list[Orchestrator]:
    """`count_` tenants spread over the 2,000, each with its token, a free node and a P_Key."""
    names = tenant_names(IB_LARGE.tenants, IB_LARGE.prefix)
    stride = max(1, len(names) // count_)
    nodes = free_nodes()
    found: list[Orchestrator] = []
    for k in range(count_):
        index = k * stride
        facade = Facade(base_url, orchestrator(api, names[index]))
        default = 0x0100 + index  # bench_scale.pkey_rows: the index-th owner's P_Key
        if not facade.read(f"/resources/pkeys/0x{default:04x}"):
            raise BenchError(f"{names[index]} does not see its P_Key 0x{default:04x}")
        guids = [LATENCY_GUIDS + 16 * k + n for n in range(3)]
        found.append(
            Orchestrator(names[index], facade, default, next(nodes), LATENCY_PKEYS + k, guids)
        )
    return found


def latency(api: Api, board: Scoreboard, label: str, writes: int) -> None:
    """The latency part: `writes` facade writes of 5 kinds by the orchestrators of 40 tenants."""
    callers = orchestrators(api, api.base_url, max(1, writes // KINDS_PER_TENANT))
    times: dict[str, list[float]] = {}
    try:
        for step in range(KINDS_PER_TENANT):
            for index, caller in enumerate(callers):
                kind, method, path, body = caller.steps(index)[step]
                times.setdefault(kind, []).append(caller.facade.write(method, path, body))
    finally:
        for caller in callers:
            caller.facade.close()
    every = [t for kind in times.values() for t in kind]
    print(f"  {len(every)} writes by {len(callers)} tenants' orchestrators, one at a time")
    for kind, seconds in times.items():
        print(
            f"  {kind:<34} p50 {median(seconds):6.3f} s  max {max(seconds):6.3f} s  "
            f"(n={len(seconds)})"
        )
    figure(f"facade write p50 ({label})", median(every), "s")
    figure(f"facade write p99 ({label})", percentile(every, 0.99), "s")
    figure("facade write max", max(every), "s")
    limited = sum(c.facade.limited for c in callers)
    if limited:
        count("  429 answers waited out", limited)
    holds = api.expect(200, "GET", f"/v1/fabrics/{FABRIC}/verification")[0]["holds"]
    print(f"  verification after the writes: holds={holds}")
    if not holds:
        raise BenchError("the fabric does not verify after the facade's writes")
    p99_verdict(
        board,
        f"facade write p99 on {FABRIC} <= {LATENCY_LIMIT_SECONDS:g} s ({label}, n={len(every)})",
        every,
    )


# -------------------------------------------------------------------------------- burst part


@dataclass
class AgentEvents:
    """What the agent child said, as it says it (a reader thread fills `events`)."""

    process: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(parsed)

    def between(self, name: str, start: float, end: float) -> list[dict[str, Any]]:
        with self.lock:
            return [
                e for e in self.events
                if e["event"] == name and start <= e.get("start", e["t"]) <= end
            ]  # fmt: skip

    def applied(self) -> list[dict[str, Any]]:
        """Reports of an apply (a standby's ``applied`` or ``restart_required``)."""
        with self.lock:
            return [
                e for e in self.events
                if e["event"] == "report" and e["state"] in ("applied", "restart_required")
            ]  # fmt: skip


@contextmanager
def running_agent(
    api: Api, token: str, keyring: Path, scratch: Path, options: argparse.Namespace
) -> Iterator[AgentEvents]:
    """tests/benchmarks/ufm_agent.py in a child process, its events read as they come."""
    conf_dir = scratch / "agent-conf"
    conf_dir.mkdir(exist_ok=True)
    # The SM host as it was set up: OpenSM started from the service's files (as bench_agent's),
    # so the options it runs with are the rendered ones and an apply reports `applied`.
    for name in SM_FILES:
        text = api.client.get(f"/v1/fabrics/{FABRIC}/artifacts/opensm/{name}")
        if text.status_code != 200:
            raise BenchError(f"GET artifacts/opensm/{name}: {text.status_code}")
        (conf_dir / name).write_bytes(text.content)
    command = [
        sys.executable, "-m", "tests.benchmarks.ufm_agent", "--server", api.base_url,
        "--fabric", FABRIC, "--target", TARGET, "--conf-dir", str(conf_dir),
        "--public-key", str(keyring), "--interval", str(options.interval),
        "--min-interval", str(options.min_interval),
    ]  # fmt: skip
    environment = server_environment({"ISOFABRIC_TOKEN": token})
    log = (scratch / "agent.log").open("w")
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=log, text=True, env=environment
    )
    agent = AgentEvents(process)
    assert process.stdout is not None
    reader = threading.Thread(target=agent.read, args=(process.stdout,), daemon=True)
    reader.start()
    try:
        yield agent
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=10)
        log.close()


def desired(api: Api) -> str:
    return str(api.expect(200, "GET", f"/v1/fabrics/{FABRIC}/sync")[0]["desired"])


def wait_applied(api: Api, agent: AgentEvents, what: str) -> float:
    """Wait until the agent has applied the fabric's current state; when it did (monotonic)."""
    deadline = time.monotonic() + AGENT_SETTLE_SECONDS
    wanted = desired(api)
    while time.monotonic() < deadline:
        if agent.process.poll() is not None:
            raise BenchError(f"the agent exited ({agent.process.returncode}) {what}")
        done = [e for e in agent.applied() if e["digest"] == wanted]
        if done:
            return float(done[0]["t"])
        time.sleep(0.2)
    raise BenchError(f"the agent did not apply {wanted} within {AGENT_SETTLE_SECONDS:g} s {what}")


def snapshots(api: Api) -> int:
    body = api.expect(200, "GET", f"/v1/fabrics/{FABRIC}/snapshots", params={"limit": 1})[0]
    return int(body["count"])


def burst(
    api: Api, board: Scoreboard, label: str, scratch: Path, options: argparse.Namespace
) -> None:
    """The burst part: --burst single-GUID adds while an agent polls and applies."""
    api.expect(201, "PUT", f"/v1/fabrics/{FABRIC}/targets/{TARGET}", json={"kind": "opensm"})
    body = {"name": "bench-agent", "role": "agent", "fabric": FABRIC, "target": TARGET}
    agent_token = str(api.expect(201, "POST", "/v1/tokens", json=body)[0]["token"])
    tenant = tenant_names(IB_LARGE.tenants, IB_LARGE.prefix)[-1]
    facade = Facade(api.base_url, orchestrator(api, tenant))
    pkey = f"0x{BURST_PKEY:04x}"
    keyring = Path(scratch / "keys" / "keyring.jsonl")
    try:
        facade.write("POST", "/resources/pkeys/add", {"pkey": pkey, "index0": False})
        with running_agent(api, agent_token, keyring, scratch, options) as agent:
            measure("agent: first apply", lambda: wait_applied(api, agent, "before the burst"))
            time.sleep(options.min_interval)  # the burst starts with the throttle open
            before = snapshots(api)
            times, start, end = _burst_writes(facade, pkey, options.burst)
            made = snapshots(api) - before
            caught_up = wait_applied(api, agent, "after the burst")
            _burst_report(board, label, agent, options, (times, start, end, caught_up), made)
            if facade.limited:
                count("  429 answers waited out", facade.limited)
        members = facade.read(f"/resources/pkeys/{pkey}?guids_data=true").get("guids", [])
        print(f"  {pkey} holds {len(members)} GUIDs after the burst")
        if len(members) != options.burst:
            raise BenchError(f"{pkey} holds {len(members)} GUIDs, not {options.burst}")
    finally:
        facade.close()


def _burst_writes(facade: Facade, pkey: str, writes: int) -> tuple[list[float], float, float]:
    times: list[float] = []
    start = time.monotonic()
    for n in range(writes):
        body = {"pkey": pkey, "guids": [guid_text(BURST_GUIDS + n)], "membership": "full"}
        times.append(facade.write("POST", "/resources/pkeys", body))
    return times, start, time.monotonic()


def _burst_report(
    board: Scoreboard,
    label: str,
    agent: AgentEvents,
    options: argparse.Namespace,
    timing: tuple[list[float], float, float, float],
    made: int,
) -> None:
    """Print the burst's figures; the target counts from its start to the last state applied."""
    times, start, end, caught_up = timing
    episode = caught_up - start
    fetches = agent.between("fetch", start, caught_up)
    downloads = agent.between("download", start, caught_up)
    # An apply downloads the files that changed: partitions.conf at each of these states.
    applied = sorted({d["digest"]: d["start"] for d in reversed(downloads)}.values())
    gaps = [b - a for a, b in itertools.pairwise(applied)]
    allowed = math.floor(episode / options.min_interval) + 1
    fetch_seconds = [f["t"] - f["start"] for f in fetches]
    print(
        f"  {len(times):,} single-GUID adds into one P_Key, one at a time; agent --interval "
        f"{options.interval:g} --min-interval {options.min_interval:g}"
    )
    figure(f"burst duration ({label})", end - start, "s")
    figure("  burst write p50", median(times), "s")
    figure("  burst write p99", percentile(times, 0.99), "s")
    figure("  burst write max", max(times), "s")
    count("  snapshots the burst committed", made)
    figure("  burst start to last state applied", episode, "s")
    count("  signed manifests fetched (polls)", len(fetches))
    count("    snapshots they named", len({f["digest"] for f in fetches}))
    if fetch_seconds:
        figure("    signed manifest p50", median(fetch_seconds), "s")
        figure("    signed manifest max", max(fetch_seconds), "s")
    failed = agent.between("fetch-failed", start, caught_up)
    if failed:
        count("    fetches failed", len(failed))
        print(f"    first failure: {failed[0]['error']}")
    reports = agent.between("report", start, caught_up)
    states = Counter(r["state"] for r in reports)
    print("  agent reports: " + ", ".join(f"{n} {state}" for state, n in sorted(states.items())))
    for state in sorted(set(states) - {"applied", "restart_required"}):
        first = next(r for r in reports if r["state"] == state)
        print(f"    first {state}: {first['detail']}")
    count("  manifests applied (files fetched)", len(applied))
    count("  at most, one per --min-interval", allowed)
    if gaps:
        figure("  shortest gap between two applies", min(gaps), "s")
    print("  applies, s after the burst's start: " + ", ".join(f"{t - start:.1f}" for t in applied))
    status = MET if len(applied) <= allowed else NOT_MET
    board.record(
        f"burst of {len(times):,} adds: at most one manifest applied per --min-interval "
        f"{options.min_interval:g} s ({label})",
        status,
        f"{len(applied)} applied in {episode:.1f} s (at most {allowed}); {len(fetches)} signed "
        f"manifests fetched (--interval {options.interval:g} s); burst write p99 "
        f"{percentile(times, 0.99):.3f} s",
    )


# ---------------------------------------------------------------------------------------- run


def arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=PARTS, help="run this part")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("ISOFABRIC_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL),
        help="PostgreSQL server to create the run's database on ('' for SQLite only)",
    )
    parser.add_argument("--writes", type=int, default=WRITES, help="latency part's writes")
    parser.add_argument("--burst", type=int, default=BURST, help="burst part's adds")
    parser.add_argument("--interval", type=float, default=INTERVAL, help="agent's --interval")
    parser.add_argument(
        "--min-interval", type=float, default=MIN_INTERVAL, help="agent's --min-interval"
    )
    return parser.parse_args(argv)


def run(backend: str, wanted: set[str], options: argparse.Namespace, board: Scoreboard) -> None:
    """Both parts on one backend: one database, one server."""
    print(f"\n== UFM-compatible API, {backend}: {', '.join(p for p in PARTS if p in wanted)}")
    with (
        tempfile.TemporaryDirectory() as directory,
        fresh_database(backend, Path(directory), options.postgres_url, "ufm") as url,
    ):
        scratch = Path(directory)
        deployment = measure(
            f"setup: whole state ({backend})", lambda: prepare_ib(url, scratch / "keys", backend)
        )
        with (
            running_server(deployment.environment) as base_url,
            Api(base_url, deployment.token) as api,
        ):
            settle(api, (IB_LARGE,), backend)
            enable_virtual_guids(api)
            if "latency" in wanted:
                guarded(
                    board,
                    f"latency ({backend})",
                    lambda: latency(api, board, backend, options.writes),
                )
            if "burst" in wanted:
                guarded(
                    board,
                    f"burst ({backend})",
                    lambda: burst(api, board, backend, scratch, options),
                )


def main(argv: list[str] | None = None) -> None:
    """Run the chosen parts on each backend; print each target's outcome and a summary."""
    options = arguments(argv)
    wanted = set(options.only or PARTS)
    board = Scoreboard(title="the issue 29 targets (UFM-compatible API)")
    print(f"host CPUs: {os.cpu_count()}; load average at start: {os.getloadavg()}")
    problem = postgres_reachable(options.postgres_url) if options.postgres_url else "no URL"
    backends = ["sqlite"] if problem else ["sqlite", "postgresql"]
    if problem:
        print(f"PostgreSQL: not used ({problem})")
        board.record("UFM-compatible API (postgresql)", SKIPPED, f"not available: {problem}")
    for backend in backends:
        guarded(
            board,
            f"UFM-compatible API ({backend})",
            lambda: run(backend, wanted, options, board),  # noqa: B023
        )
    print(f"\nload average at the end: {os.getloadavg()}")
    board.print_summary()
    if any(o.status == FAILED for o in board.outcomes):
        sys.exit(1)


if __name__ == "__main__":
    main()
