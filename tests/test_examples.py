"""examples/ run as tests so they cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from policies.infiniband.parse_ibnetdiscover import parse_ibnetdiscover
from tests.builders import created, ok
from tests.capture_examples import RAIL_CAPTURE, RAIL_TOPOLOGY, RAIL_TREE, rail_topology
from tests.fabricgen import main as fabricgen_main
from tests.fabricgen import render

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_verify_fabric_example_reports_isolation_and_renders_partitions():
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "verify_fabric.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=EXAMPLES.parent,
    )

    assert result.returncode == 0, result.stderr
    assert "isolation holds" in result.stdout
    assert "tenant:acme <-> service:storage via 0x0100 allowed=True" in result.stdout
    assert "tenant_acme=0x0101, ipoib, mtu=4, rate=3, sl=3 :" in result.stdout
    assert "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;" in result.stdout


# --- examples/ib-rail: the rail-optimised fabric of docs/operators/policy.md ---

RAIL_FABRIC = {
    "name": "ib-rail",
    "kind": "infiniband",
    "pkey_range": {"first": "0x0100", "last": "0x7ffe"},
}


def import_rail_example(client: TestClient) -> dict[str, Any]:
    created(client.post("/v1/fabrics", json=RAIL_FABRIC))
    return ok(
        client.put(
            "/v1/fabrics/ib-rail/topology",
            content=RAIL_CAPTURE.read_text(),
            headers={"content-type": "text/plain"},
        )
    )


def rail_nodes(client: TestClient) -> dict[str, list[dict[str, Any]]]:
    body = ok(client.get("/v1/fabrics/ib-rail/nodes", params={"limit": 1000}))
    assert body["next"] is None
    return {node["name"]: node["ports"] for node in body["data"]}


def leaves_of(ports: list[dict[str, Any]]) -> frozenset[str]:
    return frozenset(port["switch"] for port in ports)


def test_rail_topology_source_is_what_the_generator_renders():
    assert RAIL_TOPOLOGY.read_text() == rail_topology()


def test_rail_capture_cables_every_hca_as_the_topology_does():
    discovered = parse_ibnetdiscover(RAIL_CAPTURE.read_text())
    cabled = {
        f"{port.hostname} {port.hca}": (port.switch_name, port.switch_port)
        for port in discovered.ca_ports
    }

    expected = {
        f"{host} mlx5_{rail}": (leaf, slot)
        for group in range(1, RAIL_TREE.groups + 1)
        for slot, host in enumerate(RAIL_TREE.gpu_hosts(group), start=1)
        for rail, leaf in enumerate(RAIL_TREE.group_leaves(group))
    }
    assert {ca: at for ca, at in cabled.items() if ca.startswith("gpu")} == expected
    assert {cabled[ca][0] for ca in RAIL_TREE.service_cas()} == {"leaf-svc"}
    assert cabled[RAIL_TREE.mgmt_ca()][0] == "leaf-svc"
    assert sorted(s.name for s in discovered.switches) == sorted(
        RAIL_TREE.leaf_names() + RAIL_TREE.spine_names()
    )


def test_rail_example_imports_through_the_topology_route(client):
    body = import_rail_example(client)

    # 16 group leaves + leaf-svc + 2 spines; 16 GPU nodes, stor01/02, tel01, sm01; 64 + 4 ports.
    assert (body["switches"], body["nodes"], body["ports"]) == (19, 20, 68)
    assert (body["missing"], body["moved"]) == ([], [])


def test_every_rail_gpu_node_has_four_hcas_on_four_different_leaves(client):
    import_rail_example(client)
    gpus = {name: ports for name, ports in rail_nodes(client).items() if name.startswith("gpu")}

    assert len(gpus) == 16
    for name, ports in gpus.items():
        assert sorted(port["hca"] for port in ports) == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
        assert len(leaves_of(ports)) == 4, name
        rails = {port["switch"].rsplit("-r", 1)[1] for port in ports}
        assert rails == {"0", "1", "2", "3"}, name


def test_rail_example_has_four_disjoint_leaf_groups_of_four_nodes(client):
    import_rail_example(client)
    groups: dict[frozenset[str], list[str]] = {}
    for name, ports in rail_nodes(client).items():
        if name.startswith("gpu"):
            groups.setdefault(leaves_of(ports), []).append(name)

    assert len(groups) >= 4
    assert all(len(members) == 4 for members in groups.values())
    every_leaf = [leaf for leaves in groups for leaf in leaves]
    assert len(every_leaf) == len(set(every_leaf))  # no leaf in two groups
    service_leaves = {
        leaf
        for name, ports in rail_nodes(client).items()
        if not name.startswith("gpu")
        for leaf in leaves_of(ports)
    }
    assert service_leaves == {"leaf-svc"}
    assert service_leaves.isdisjoint(every_leaf)


def test_fabricgen_command_line_renders_the_rail_example(tmp_path):
    out = tmp_path / "rail.fabric"
    argv = ["--leaf-groups", "4", "--hcas-per-gpu", "4", "--gpu-nodes", "16", "-o", str(out)]

    assert fabricgen_main(argv) == 0
    assert out.read_text() == render(RAIL_TREE)
