"""Deploy-agent benchmark (make bench): ``isofabric agent opensm --once`` on a 1,024-HCA fabric.

The whole loop of issue 11, timed: ibsim runs `tests.benchmarks.ibsim_fabric.BENCH_TREE` (1,027
CA ports, 76 switches); a real service (uvicorn in a thread, SQLite in a temporary directory,
keys made by ``isofabric keys create``) imports what ``ibnetdiscover`` reports as an InfiniBand
fabric, registers the SM host ``sm01`` as an ``opensm`` target and mints an ``agent`` token.

OpenSM starts from the service's files as they are *before any tenant is onboarded* (the SM host
set up when the fabric was registered: its opensm.conf, keys and QoS options, partitions.conf
with the default partition only). Then 16 tenants of 8 nodes each are onboarded, the first 8
granted the storage service, and the real agent runs as a subprocess with ``--once``:

1. the first deploy of that tenancy (every tenant port changed: read back the changed ports and
   a sample);
2. a no-op cycle (nothing changed: the agent only fetches and checks the signed manifest);
3. one allocation released (one node, 8 HCA ports, changes; the node drains until the agent's
   read-back shows the old key gone);
4. that node allocated to another tenant, with ``--full``: every CA port read back.

For each: the agent process's wall-clock time, the per-step durations the agent reported
(``GET /v1/fabrics/{fabric}/deployments``), the ports it read and the read-back time per port;
at the end ``GET …/sync``. OpenSM is started here (the conformance harness) and its pid file is
written here, as an operator's unit would. Asserts correctness only (applied, in sync, the
drain finished), never time. ibsim serves at most 10 clients in all (OpenSM is one), so the
agent's ``--concurrency`` stays at or below 4.

Without the lab tools (ibsim, OpenSM, infiniband-diags, libumad2sim) it prints why and exits 0,
unless ``ISOFABRIC_REQUIRE_CONFORMANCE=1``.

    python -m tests.benchmarks.bench_agent [--concurrency 4] [--sample 16] [--save-dir DIR]
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from tests.benchmarks.ibsim_fabric import (
    BENCH_TREE,
    GRANTED_TENANTS,
    STORAGE_SERVICE,
    lab_tools,
    start_opensm,
    tenant_hosts,
)
from tests.benchmarks.timing import measure
from tests.conformance.harness import IbTools, OpenSM, SimFabric
from tests.fabricgen import render
from tests.keys import keys_create
from tests.live_server import live_server

FABRIC = "ib-bench"
TARGET = "sm01"
TOOL_TIMEOUT = 600.0
AGENT_TIMEOUT = 1800.0
HTTP_TIMEOUT = 600.0
SWEEP_TIMEOUT = 600.0  # the agent's --sweep-timeout: a heavy sweep of 76 switches under ibsim
MAX_CONCURRENCY = 4
QOS_CLASSES = ("gold", "bronze")
STEPS = ("fetch", "download", "install", "sweep", "readback", "total")
ARTIFACTS = (OpenSM.OPTIONS, OpenSM.PARTITIONS, OpenSM.QOS_POLICY)


def figure(label: str, value: float, unit: str) -> None:
    """One line in the layout of `tests.benchmarks.timing`."""
    print(f"{label:<38} {value:8.2f} {unit}")


# ----------------------------------------------------------------------------------- service


class Api:
    """JSON calls to the service that fail loudly on an unexpected status."""

    def __init__(self, client: httpx2.Client) -> None:
        self.client = client

    def call(self, method: str, url: str, **kwargs: Any) -> Any:
        response = self.client.request(method, url, **kwargs)
        if not response.is_success:
            raise SystemExit(f"{method} {url} -> {response.status_code}: {response.text[:2000]}")
        if response.status_code == 204 or not response.content:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    def pages(self, url: str) -> Iterator[dict[str, Any]]:
        """Every item of a list envelope, following ``next`` (a URL or an opaque cursor)."""
        body = self.call("GET", url, params={"limit": 100})
        yield from body["data"]
        while body.get("next"):
            nxt = str(body["next"])
            if nxt.startswith(("/", "http")):
                body = self.call("GET", nxt)
            else:
                body = self.call("GET", url, params={"limit": 100, "cursor": nxt})
            yield from body["data"]


def fabric_path(rest: str) -> str:
    return f"/v1/fabrics/{FABRIC}/{rest}"


def register_fabric(api: Api, topology: str) -> None:
    """The InfiniBand fabric as discovered, its SM host, storage nodes and storage service."""
    api.call(
        "POST",
        "/v1/fabrics",
        json={
            "name": FABRIC,
            "kind": "infiniband",
            "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
        },
    )
    measure(
        "service: topology import (ibnetdiscover)",
        lambda: api.call(
            "PUT",
            fabric_path("topology"),
            content=topology,
            headers={"Content-Type": "text/plain"},
        ),
    )
    api.call("PATCH", fabric_path(f"nodes/{BENCH_TREE.mgmt_host}"), json={"role": "management"})
    storage = [f"stor{s:02d}" for s in range(1, BENCH_TREE.storage_nodes + 1)]
    for node in storage:
        api.call("PATCH", fabric_path(f"nodes/{node}"), json={"role": "storage"})
    api.call("POST", fabric_path("services"), json={"name": STORAGE_SERVICE, "nodes": storage})


def onboard(api: Api, allocation: dict[str, list[str]]) -> str:
    """Tenants, their allocations and grants; returns the id of the one-node allocation.

    The first tenant's last node is allocated on its own, so that it can be released later.
    """
    split: str | None = None
    for index, (tenant, hosts) in enumerate(sorted(allocation.items())):
        qos_class = QOS_CLASSES[index % len(QOS_CLASSES)]
        api.call(
            "POST", "/v1/tenants", json={"name": tenant, "kind": "external", "qos_class": qos_class}
        )
        batches = [hosts[:-1], hosts[-1:]] if split is None else [hosts]
        for batch in batches:
            created = api.call(
                "POST", f"/v1/tenants/{tenant}/allocations", json={"fabric": FABRIC, "nodes": batch}
            )
            if len(batch) == 1 and split is None:
                split = str(created["id"])
        if index < GRANTED_TENANTS:
            api.call(
                "POST",
                f"/v1/tenants/{tenant}/grants",
                json={"fabric": FABRIC, "service": STORAGE_SERVICE},
            )
    assert split is not None
    return split


def artifacts(api: Api) -> dict[str, str]:
    """The service's current OpenSM files, by conf-dir name."""
    return {name: api.call("GET", fabric_path(f"artifacts/opensm/{name}")) for name in ARTIFACTS}


def last_seen(api: Api) -> str:
    return str(api.call("GET", fabric_path(f"targets/{TARGET}"))["last_seen_at"])


def node_state(api: Api, node: str) -> str:
    return str(api.call("GET", fabric_path(f"nodes/{node}"))["state"])


# -------------------------------------------------------------------------------------- agent


@dataclass
class AgentRun:
    """The agent's command line and environment, and what each cycle showed."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    rows: list[Cycle] = field(default_factory=list)


@dataclass(frozen=True)
class Cycle:
    """One ``--once`` run: exit status, wall-clock time, and the report it stored (if any)."""

    label: str
    status: int
    wall: float
    output: str
    report: dict[str, Any] | None

    @property
    def durations(self) -> dict[str, float]:
        return dict(self.report["durations"]) if self.report else {}

    @property
    def ports_read(self) -> int:
        return int(self.report["ports_read"]) if self.report else 0

    @property
    def per_port(self) -> float | None:
        readback = self.durations.get("readback")
        return readback / self.ports_read if readback is not None and self.ports_read else None


def agent_command(
    server: str,
    token: str,
    keyring: Path,
    sm: OpenSM,
    pid_file: Path,
    concurrency: int,
    sample: int,
) -> list[str]:
    """``isofabric agent opensm … --once`` (the venv's console script next to this Python)."""
    isofabric = Path(sys.executable).with_name("isofabric")
    return [
        str(isofabric),
        "agent",
        "opensm",
        "--server",
        server,
        "--token",
        token,
        "--fabric",
        FABRIC,
        "--target",
        TARGET,
        "--conf-dir",
        str(sm.confdir),
        "--public-key",
        str(keyring),
        "--pid-file",
        str(pid_file),
        "--log-file",
        str(sm.log),
        "--once",
        "--concurrency",
        str(concurrency),
        "--sample",
        str(sample),
        "--sweep-timeout",
        str(SWEEP_TIMEOUT),
    ]


def agent_env(fabric: SimFabric, tools: IbTools) -> dict[str, str]:
    """The simulator's client environment; the diags (smpquery, sminfo) found on PATH."""
    env = fabric.client_env()
    tool_dirs = {str(Path(tools.smpquery).parent), str(Path(tools.ibnetdiscover).parent)}
    env["PATH"] = os.pathsep.join([*sorted(tool_dirs), env.get("PATH", "")])
    return env


def latest_report(api: Api) -> dict[str, Any] | None:
    reports = list(api.pages(fabric_path("deployments")))
    return reports[-1] if reports else None


def run_cycle(api: Api, agent: AgentRun, label: str, extra: Sequence[str] = ()) -> Cycle:
    """Run the agent once; its report is the newest deployment, if it stored a new one."""
    before = latest_report(api)
    start = time.perf_counter()
    done = subprocess.run(
        [*agent.argv, *extra],
        env=agent.env,
        cwd=agent.cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=AGENT_TIMEOUT,
        check=False,
    )
    wall = time.perf_counter() - start
    after = latest_report(api)
    new = after if after is not None and (before is None or after["id"] != before["id"]) else None
    cycle = Cycle(label, done.returncode, wall, (done.stdout + done.stderr).strip(), new)
    agent.rows.append(cycle)
    print_cycle(cycle)
    return cycle


def print_cycle(cycle: Cycle) -> None:
    if cycle.report:
        state = f"{cycle.report['state']} (role {cycle.report['role']})"
    else:
        state = "no report stored (nothing to do)"
    print(f"{cycle.label}: exit {cycle.status}, {state}")
    for line in cycle.output.splitlines():
        print(f"    | {line}")
    figure("  agent process (wall clock)", cycle.wall, "s")
    for step, seconds in cycle.durations.items():
        figure(f"  reported: {step}", seconds, "s")
    if cycle.report:
        print(f"{'  ports read':<38} {cycle.ports_read:8d}")
    if cycle.per_port is not None:
        figure("  read-back per port", 1000 * cycle.per_port, "ms")


def print_table(rows: Sequence[Cycle]) -> None:
    steps = [s for s in STEPS if any(s in row.durations for row in rows)]
    extra = sorted({k for row in rows for k in row.durations} - set(STEPS))
    columns = [*steps, *extra]
    head = f"{'cycle':<26} {'state':<10} {'wall s':>7}"
    head += "".join(f" {c[:9]:>9}" for c in columns) + f" {'ports':>6} {'ms/port':>8}"
    print(head)
    for row in rows:
        state = row.report["state"] if row.report else "nothing"
        line = f"{row.label:<26} {state:<10} {row.wall:7.2f}"
        for column in columns:
            value = row.durations.get(column)
            line += f" {value:9.2f}" if value is not None else f" {'-':>9}"
        per_port = f"{1000 * row.per_port:8.1f}" if row.per_port is not None else f"{'-':>8}"
        line += f" {row.ports_read:6d} {per_port}"
        print(line)


def expect_applied(cycle: Cycle, api: Api) -> str:
    """The cycle applied the service's desired snapshot with no mismatch; returns its digest."""
    if cycle.status != 0 or cycle.report is None or cycle.report["state"] != "applied":
        raise SystemExit(f"{cycle.label}: the agent did not apply:\n{cycle.output}")
    if cycle.report["mismatches"]:
        raise SystemExit(f"{cycle.label}: mismatches reported: {cycle.report['mismatches']}")
    desired = str(api.call("GET", fabric_path("sync"))["desired"])
    if cycle.report["digest"] != desired:
        raise SystemExit(f"{cycle.label}: applied {cycle.report['digest']}, desired {desired}")
    return desired


# ---------------------------------------------------------------------------------------- run


def startup_floor(agent: AgentRun) -> float:
    """Seconds the agent's command takes to start and exit (``--help``): paid by every --once."""
    argv = [agent.argv[0], "agent", "opensm", "--help"]
    start = time.perf_counter()
    subprocess.run(argv, env=agent.env, cwd=agent.cwd, capture_output=True, check=True)
    return time.perf_counter() - start


def run(tools: IbTools, workdir: Path, concurrency: int, sample: int) -> None:
    tree = BENCH_TREE
    print(
        f"ibsim fat tree: {tree.gpu_nodes} nodes x {tree.hcas_per_gpu} HCAs + "
        f"{tree.storage_nodes} storage + SM = {len(tree.ca_names()):,} CA ports; "
        f"{tree.leaves + tree.spines} switches; host CPUs: {os.cpu_count()}; "
        f"agent --concurrency {concurrency}, --sample {sample}"
    )
    netfile = workdir / "net.fabric"
    netfile.write_text(render(tree))
    database = workdir / "isofabric.db"
    url = f"sqlite:///{database}"
    keys_create(url)  # signing key, keyring and OpenSM secret beside the database
    keyring = database.with_name(database.stem + "-keyring.jsonl")
    logging.getLogger("isofabric.api").setLevel(logging.ERROR)

    with ExitStack() as stack:
        fabric = SimFabric(tools, netfile, workdir, sim_host=tree.mgmt_ca())
        measure("ibsim start", lambda: stack.enter_context(fabric))
        discovered = measure(
            "ibnetdiscover (before any SM)",
            lambda: fabric.run([tools.ibnetdiscover], timeout=TOOL_TIMEOUT),
        )
        server, api = serve(stack, url)
        token = register_target(api, discovered)

        files = artifacts(api)  # before any tenant: what the SM host was set up with
        sm = start_opensm(fabric, workdir, files, stack)
        assert sm.proc is not None
        pid_file = workdir / "opensm.pid"
        pid_file.write_text(f"{sm.proc.pid}\n")
        rejected = sm.option_errors() + sm.config_errors()
        if rejected:
            raise SystemExit(f"OpenSM rejected the service's configuration: {rejected}")

        allocation = tenant_hosts(tree)
        split = measure("service: 16 tenants x 8 nodes, 8 grants", lambda: onboard(api, allocation))
        agent_dir = workdir / "agent"
        agent_dir.mkdir()
        agent = AgentRun(
            agent_command(server, token, keyring, sm, pid_file, concurrency, sample),
            agent_env(fabric, tools),
            agent_dir,
        )
        figure("agent command start-up (--help)", startup_floor(agent), "s")
        cycles(api, agent, allocation, split)
        print()
        print_table(agent.rows)
        expect_in_sync(api)


def serve(stack: ExitStack, url: str) -> tuple[str, Api]:
    """The service on `url` under uvicorn, and an operator's client of it."""
    from api.app import create_app
    from tenancy.store.settings import Settings

    admin = secrets.token_urlsafe(32)  # the service closes once the agent token exists
    app = create_app(Settings(database_url=url, admin_token=admin))
    server = stack.enter_context(live_server(app))
    client = stack.enter_context(
        httpx2.Client(
            base_url=server, timeout=HTTP_TIMEOUT, headers={"Authorization": f"Bearer {admin}"}
        )
    )
    return server, Api(client)


def register_target(api: Api, discovered: str) -> str:
    """Register the fabric and the SM host's deploy target; the target's agent token."""
    register_fabric(api, discovered)
    api.call("PUT", fabric_path(f"targets/{TARGET}"), json={"kind": "opensm"})
    token = api.call(
        "POST",
        "/v1/tokens",
        json={"name": "bench-agent", "role": "agent", "fabric": FABRIC, "target": TARGET},
    )["token"]
    return str(token)


def expect_in_sync(api: Api) -> None:
    """Print the fabric's sync status; stop the benchmark unless every target is in sync."""
    sync = api.call("GET", fabric_path("sync"))
    targets = {t["name"]: t["state"] for t in sync["targets"]}
    print(f"sync: in_sync {sync['in_sync']}, desired {sync['desired'][:19]}…, {targets}")
    if not sync["in_sync"]:
        raise SystemExit(f"the fabric is not in sync: {sync}")


def cycles(api: Api, agent: AgentRun, allocation: dict[str, list[str]], split: str) -> None:
    """The four agent cycles, each checked for correctness."""
    first = run_cycle(api, agent, "1 first deploy")
    expect_applied(first, api)

    seen = last_seen(api)
    noop = run_cycle(api, agent, "2 no-op")
    if noop.status != 0 or noop.report is not None:
        raise SystemExit(f"the no-op cycle did something:\n{noop.output}")
    print(f"{'  target last_seen_at':<38} {seen} -> {last_seen(api)}")

    donor, taker = sorted(allocation)[:2]
    released = allocation[donor][-1]
    api.call("DELETE", f"/v1/tenants/{donor}/allocations/{split}")
    print(f"released {released} (8 HCA ports) from {donor}: {node_state(api, released)}")
    change = run_cycle(api, agent, "3 one node released")
    expect_applied(change, api)
    after = node_state(api, released)
    print(f"{released} after the agent's read-back: {after}")
    if after != "free":
        raise SystemExit(f"{released} is still {after} after an applied read-back")

    api.call(
        "POST", f"/v1/tenants/{taker}/allocations", json={"fabric": FABRIC, "nodes": [released]}
    )
    print(f"allocated {released} to {taker}")
    full = run_cycle(api, agent, "4 node reallocated, --full", ["--full"])
    expect_applied(full, api)
    if full.ports_read != len(BENCH_TREE.ca_names()):
        print(f"note: --full read {full.ports_read} of {len(BENCH_TREE.ca_names())} CA ports")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=MAX_CONCURRENCY, help="1..4")
    parser.add_argument("--sample", type=int, default=16, help="unchanged ports read back")
    parser.add_argument("--save-dir", type=Path, help="keep the database, logs and configs here")
    args = parser.parse_args(argv)
    if not 1 <= args.concurrency <= MAX_CONCURRENCY:
        parser.error(f"ibsim serves at most 10 clients: concurrency 1..{MAX_CONCURRENCY}")
    tools = lab_tools("agent benchmark")
    if tools is None:
        return
    if args.save_dir is not None:
        args.save_dir.mkdir(parents=True, exist_ok=True)
        run(tools, args.save_dir, args.concurrency, args.sample)
        return
    with tempfile.TemporaryDirectory(prefix="isofabric-bench-agent-") as workdir:
        run(tools, Path(workdir), args.concurrency, args.sample)


if __name__ == "__main__":
    main()
