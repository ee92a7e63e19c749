"""The benchmark lab fabric: 1,024 GPU HCAs on a non-blocking fat tree, for ibsim and OpenSM.

128 GPU nodes x 8 HCAs, 2 storage nodes and the SM host (1,027 CA ports) hang off 58 leaves of
36 ports (18 down, 18 up, as a non-blocking leaf is cabled), every leaf wired once to each of
18 spines of 64 ports (a 36-port spine would cap a two-level tree at 36 leaves, i.e. 648 hosts).
76 switches in all. The net file comes from ``tests/fabricgen.py``; the GUIDs are ibsim's, so the
snapshot that tenants are planned on is built from what ``ibnetdiscover`` reports on the running
simulator (`snapshot_from_discovery`).

Usage::

    python -m tests.benchmarks.ibsim_fabric -o net.fabric
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

from policies.infiniband.intent import plan_partitions
from policies.infiniband.model import IbPort, IbSettings, IbSnapshot, QosClass
from policies.infiniband.parse_ibnetdiscover import parse_ibnetdiscover
from policies.infiniband.render import SubnetManagerKeys
from policies.model import Grant, Node, NodeRole, Owner
from tests.benchmarks.timing import measure
from tests.conformance.harness import IbTools, OpenSM, SimFabric, ToolsMissingError
from tests.fabricgen import FatTree, render

# OpenSM's first sweep of 1,024 HCAs takes seconds, many more on a loaded 2-core host.
START_TIMEOUT = 900.0

BENCH_TREE = FatTree(
    leaves=58,
    spines=18,
    gpu_nodes=128,
    hcas_per_gpu=8,
    storage_nodes=2,
    radix=36,
    spine_radix=64,
)
FABRIC = "ib-bench"
STORAGE_SERVICE = "storage"
STORAGE_PKEY = 0x0100
FIRST_TENANT_PKEY = 0x0101
TENANTS = 16  # of 8 nodes (64 HCAs) each: every GPU node allocated
GRANTED_TENANTS = 8  # the first half reach storage
GOLD = QosClass("gold", ib_sl=3, ib_rate=3, ib_mtu=4, vlarb_weight=128)
BRONZE = QosClass("bronze", ib_sl=1, ib_rate=3, ib_mtu=4, vlarb_weight=16)
# Lab keys (ibsim implements no M_Key); a real fabric's come from the OpenSM secret.
KEYS = SubnetManagerKeys(
    m_key=0x1122334455667788, sm_key=0x0A0B0C0D0E0F1011, sa_key=0x2122232425262728
)


def tenant_name(index: int) -> str:
    return f"t{index:03d}"


def gpu_host(index: int) -> str:
    return f"gpu{index:04d}"


def tenant_hosts(tree: FatTree = BENCH_TREE, tenants: int = TENANTS) -> dict[str, list[str]]:
    """Tenant name -> its GPU hosts: consecutive blocks of equal size, the rest left free."""
    per_tenant = tree.gpu_nodes // tenants
    return {
        tenant_name(t): [gpu_host(t * per_tenant + i) for i in range(1, per_tenant + 1)]
        for t in range(tenants)
    }


def nodes_for(
    tree: FatTree, allocation: Mapping[str, Sequence[str]], storage_hosts: Sequence[str]
) -> tuple[Node, ...]:
    owner = {host: Owner.tenant(t) for t, hosts in allocation.items() for host in hosts}
    gpus = [gpu_host(g) for g in range(1, tree.gpu_nodes + 1)]
    nodes = [Node(h, NodeRole.COMPUTE, (owner[h],) if h in owner else ()) for h in gpus]
    nodes += [Node(h, NodeRole.STORAGE, (Owner.service(STORAGE_SERVICE),)) for h in storage_hosts]
    nodes.append(Node(tree.mgmt_host, NodeRole.MANAGEMENT))
    return tuple(nodes)


def snapshot_from_discovery(
    ibnetdiscover_text: str,
    *,
    tree: FatTree = BENCH_TREE,
    allocation: Mapping[str, Sequence[str]] | None = None,
) -> IbSnapshot:
    """The fabric as discovered, with `allocation` (default: `tenant_hosts`) and storage granted.

    Tenant ``t000`` gets P_Key 0x0101 and class gold, ``t001`` 0x0102 and bronze, and so on;
    the first `GRANTED_TENANTS` tenants may reach the storage service.
    """
    topology = parse_ibnetdiscover(ibnetdiscover_text)
    ports = tuple(
        IbPort(p.guid, p.hostname, p.hca, p.port, p.switch_name, p.switch_port)
        for p in topology.ca_ports
    )
    if allocation is None:
        allocation = tenant_hosts(tree)
    storage_hosts = [f"stor{s:02d}" for s in range(1, tree.storage_nodes + 1)]
    tenant_keys: dict[str, tuple[int, str | None]] = {
        name: (FIRST_TENANT_PKEY + i, (GOLD, BRONZE)[i % 2].name)
        for i, name in enumerate(sorted(allocation))
    }
    grants = tuple(Grant(name, STORAGE_SERVICE) for name in sorted(allocation)[:GRANTED_TENANTS])
    nodes = nodes_for(tree, allocation, storage_hosts)
    partitions = plan_partitions(nodes, ports, tenant_keys, {STORAGE_SERVICE: STORAGE_PKEY}, grants)
    settings = IbSettings(FABRIC, pkey_first=STORAGE_PKEY, pkey_last=0x01FF)
    return IbSnapshot(settings, nodes, ports, partitions, grants, (BRONZE, GOLD))


REQUIRE_ENV = "ISOFABRIC_REQUIRE_CONFORMANCE"


def lab_tools(benchmark: str) -> IbTools | None:
    """The lab's tools; None (said on stdout) when missing, unless the lab is required."""
    try:
        return IbTools.locate()
    except ToolsMissingError as error:
        if os.environ.get(REQUIRE_ENV, "").strip().lower() in {"1", "true", "yes"}:
            raise
        print(f"{benchmark} skipped: {error}")
        return None


def start_opensm(
    fabric: SimFabric, workdir: Path, files: Mapping[str, str], stack: ExitStack
) -> OpenSM:
    """OpenSM on the lab fabric with `files`, its start timed; stopped when `stack` closes."""
    sm = OpenSM(
        fabric,
        workdir / "opensm",
        files[OpenSM.OPTIONS],
        files[OpenSM.PARTITIONS],
        files[OpenSM.QOS_POLICY],
    )
    measure("OpenSM start to first SUBNET UP", lambda: sm.start(timeout=START_TIMEOUT))
    stack.callback(sm.stop)
    rejected = sm.option_errors() + sm.config_errors()
    if rejected:
        raise SystemExit(f"OpenSM rejected the configuration: {rejected}")
    return sm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", help="write the ibsim net file here, not to stdout")
    args = parser.parse_args(argv)
    text = render(BENCH_TREE)
    if args.output:
        with open(args.output, "w", encoding="ascii") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
