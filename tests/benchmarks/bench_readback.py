"""Read-back benchmark (make bench): OpenSM on a 1,024-HCA ibsim fat tree, P_Key tables per port.

Starts ibsim on `tests.benchmarks.ibsim_fabric.BENCH_TREE` (1,027 CA ports, 76 switches) and
OpenSM with the files isofabric renders for 16 tenants, through the conformance harness, then
prints what a deploy agent's cycle is made of: OpenSM's time to its first ``SUBNET UP``,
``ibnetdiscover``, the P_Key read-back (seconds per port at each concurrency, and for the whole
fabric), and one apply (a node moves from one tenant to another: the changed files installed,
SIGHUP to ``SUBNET UP``, read-back of the moved ports). The read-back is the code ``isofabric
collect ib`` runs (`cli.collect`); every table read is compared with the model. Never asserts
on time.

In the lab one ``smpquery`` per port costs mostly its own start-up: libumad2sim builds a fake
sysfs in the working directory for every process (kernel time, on the host's CPUs). The line
"smpquery start-up" measures that floor with a query of the local node only; the MAD round trip
through ibsim is the small difference to the per-port figure. ``ibnetdiscover`` (one process,
thousands of SMPs) shows the simulator's own speed.

ibsim serves at most 10 clients (OpenSM is one), so concurrency stays at or below 8. Without the
lab tools (ibsim, OpenSM, infiniband-diags, libumad2sim) it prints why and exits 0, unless
``ISOFABRIC_REQUIRE_CONFORMANCE=1``.

    python -m tests.benchmarks.bench_readback [--concurrency 1,4] [--save-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from cli import collect
from policies.infiniband.model import IbSnapshot
from policies.infiniband.observations import intended_tables
from policies.infiniband.render import render_opensm_artifacts
from tests.benchmarks.ibsim_fabric import (
    BENCH_TREE,
    KEYS,
    START_TIMEOUT,
    lab_tools,
    snapshot_from_discovery,
    start_opensm,
    tenant_hosts,
)
from tests.benchmarks.timing import measure
from tests.conformance.harness import IbTools, OpenSM, SimFabric
from tests.fabricgen import render

TOOL_TIMEOUT = 600.0
Ports = Sequence[tuple[int, int]]  # (port GUID, LID)
Reader = Callable[[Ports, int], dict[int, list[int]]]


def figure(label: str, value: float, unit: str) -> None:
    """One line in the layout of `tests.benchmarks.timing`."""
    print(f"{label:<38} {value:8.2f} {unit}")


def make_reader(fabric: SimFabric, tools: IbTools) -> tuple[Reader | None, str]:
    """The bounded-concurrency read of a list of ports from ``cli.collect``, if it has one."""
    read_tables: Any = getattr(collect, "read_pkey_tables", None)
    if read_tables is None:
        return None, "collect_ib (cli.collect has no read of a port list)"
    env = fabric.client_env()
    ctools = collect.Tools(ibnetdiscover=tools.ibnetdiscover, smpquery=tools.smpquery)

    def read(ports: Ports, concurrency: int) -> dict[int, list[int]]:
        tables: dict[int, list[int]] = read_tables(
            ports,
            m_key=KEYS.m_key,
            env=env,
            tools=ctools,
            timeout=TOOL_TIMEOUT,
            concurrency=concurrency,
        )
        return tables

    return read, "cli.collect.read_pkey_tables"


def mismatches(observed: Mapping[int, Sequence[int]], intended: Mapping[int, set[int]]) -> int:
    """Ports whose non-empty P_Keys differ from the model's."""
    return sum(1 for guid, keys in observed.items() if set(keys) != intended.get(guid, set()))


def expected_tables(snapshot: IbSnapshot) -> dict[int, set[int]]:
    tables = intended_tables(snapshot)
    for port in snapshot.ports:
        if port.node == BENCH_TREE.mgmt_host:
            tables[port.guid] = {0xFFFF}  # the SM's port: SELF=full in the default partition
    return tables


def opensm_files(snapshot: IbSnapshot) -> dict[str, str]:
    """File name (as the harness installs it) -> text, as isofabric renders them."""
    return {
        a.path.rsplit("/", 1)[1]: a.content.decode()
        for a in render_opensm_artifacts(snapshot, KEYS)
    }


def timed_read(read: Reader, ports: Ports, concurrency: int) -> tuple[dict[int, list[int]], float]:
    start = time.perf_counter()
    tables = read(ports, concurrency)
    return tables, time.perf_counter() - start


def smpquery_floor(fabric: SimFabric, tools: IbTools, runs: int = 20) -> float:
    """Seconds per ``smpquery`` that reads the local node only: process start-up under umad2sim."""
    start = time.perf_counter()
    for _ in range(runs):
        fabric.run([tools.smpquery, "-D", "nodeinfo", "0"])
    return (time.perf_counter() - start) / runs


def run(tools: IbTools, workdir: Path, concurrencies: Sequence[int]) -> None:
    tree = BENCH_TREE
    print(
        f"ibsim fat tree: {tree.gpu_nodes} nodes x {tree.hcas_per_gpu} HCAs + "
        f"{tree.storage_nodes} storage + SM = {len(tree.ca_names()):,} CA ports; {tree.leaves} "
        f"leaves of {tree.radix} ports, {tree.spines} spines of {tree.spine_ports} ports; "
        f"host CPUs: {os.cpu_count()}"
    )
    netfile = workdir / "net.fabric"
    netfile.write_text(render(tree))
    with ExitStack() as stack:
        fabric = SimFabric(tools, netfile, workdir, sim_host=tree.mgmt_ca())
        measure("ibsim start", lambda: stack.enter_context(fabric))
        discovered = measure(
            "ibnetdiscover (before any SM)",
            lambda: fabric.run([tools.ibnetdiscover], timeout=TOOL_TIMEOUT),
        )
        (workdir / "ibnetdiscover.txt").write_text(discovered)
        snapshot = snapshot_from_discovery(discovered)
        files = opensm_files(snapshot)
        print(
            f"rendered: {len(snapshot.partitions)} partitions, partitions.conf "
            f"{len(files[OpenSM.PARTITIONS]):,} bytes"
        )
        sm = start_opensm(fabric, workdir, files, stack)
        measure(
            "ibnetdiscover (swept)",
            lambda: fabric.run([tools.ibnetdiscover], timeout=TOOL_TIMEOUT),
        )
        ports = measure(
            "ibnetdiscover -p (CA ports and LIDs)",
            lambda: collect.ca_ports(fabric.run([tools.ibnetdiscover, "-p"], timeout=TOOL_TIMEOUT)),
        )
        figure("smpquery start-up (local NodeInfo)", 1000 * smpquery_floor(fabric, tools), "ms")
        intended = expected_tables(snapshot)
        read, source = make_reader(fabric, tools)
        print(f"read-back of {len(ports):,} ports with {source}")
        if read is None:
            env = fabric.client_env()
            ctools = collect.Tools(ibnetdiscover=tools.ibnetdiscover, smpquery=tools.smpquery)
            document = measure(
                "collect_ib (whole fabric)",
                lambda: collect.collect_ib(m_key=KEYS.m_key, env=env, tools=ctools),
            )
            observed = {
                int(p["guid"], 16): [int(k, 16) for k in p["pkeys"]] for p in document["ports"]
            }
            print(f"{'  tables differing from the model':<38} {mismatches(observed, intended):8d}")
            return
        for concurrency in concurrencies:
            tables, elapsed = timed_read(read, ports, concurrency)
            label = f"read-back, concurrency {concurrency}"
            figure(f"{label}: per port", 1000 * elapsed / len(ports), "ms")
            figure(f"{label}: whole fabric", elapsed, "s")
            print(f"{'  tables differing from the model':<38} {mismatches(tables, intended):8d}")
        apply_one_change(sm, read, ports, max(concurrencies), discovered, files)


def apply_one_change(
    sm: OpenSM,
    read: Reader,
    ports: Ports,
    concurrency: int,
    discovered: str,
    installed: Mapping[str, str],
) -> None:
    """What a deploy agent does for one allocation: install, SIGHUP, wait, read back the ports."""
    allocation = tenant_hosts()
    donor, taker = max(allocation), min(allocation)
    moved = allocation[donor].pop()
    allocation[taker].append(moved)
    snapshot = snapshot_from_discovery(discovered, allocation=allocation)
    files = opensm_files(snapshot)
    changed = sorted(name for name, text in files.items() if installed[name] != text)
    print(f"apply: {moved} moves from {donor} to {taker}; files changed: {', '.join(changed)}")
    for name in changed:
        sm.install(name, files[name])
    offset = measure("apply: SIGHUP to next SUBNET UP", lambda: sm.reload(timeout=START_TIMEOUT))
    if sm.config_errors(offset):
        raise SystemExit(f"OpenSM rejected partitions.conf: {sm.config_errors(offset)}")
    affected = {p.guid for p in snapshot.ports if p.node == moved}
    subset = [(guid, lid) for guid, lid in ports if guid in affected]
    tables, elapsed = timed_read(read, subset, concurrency)
    figure(f"apply: read-back of the {len(subset)} moved ports", elapsed, "s")
    intended = expected_tables(snapshot)
    print(f"{'  tables differing from the model':<38} {mismatches(tables, intended):8d}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,4", help="comma-separated, each 1..8")
    parser.add_argument("--save-dir", type=Path, help="keep the net file, logs and configs here")
    args = parser.parse_args(argv)
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    if not all(1 <= c <= 8 for c in concurrencies):
        parser.error("ibsim serves at most 10 clients, OpenSM included: concurrency 1..8")
    tools = lab_tools("read-back benchmark")
    if tools is None:
        return
    if args.save_dir is not None:
        args.save_dir.mkdir(parents=True, exist_ok=True)
        run(tools, args.save_dir, concurrencies)
        return
    with tempfile.TemporaryDirectory(prefix="isofabric-bench-") as workdir:
        run(tools, Path(workdir), concurrencies)


if __name__ == "__main__":
    main()
