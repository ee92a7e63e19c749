"""Generate ibsim topology files for a two-level fat tree, classic or rail-optimised.

ibsim reads the ``ibnetdiscover`` text format (``Switch``/``Hca`` records with
``[port] "peer"[peer-port]`` lines). The quoted node id doubles as the
NodeDescription that ``ibnetdiscover`` prints back, so CA ids are written as
``"<hostname> <hca>"`` (e.g. ``"gpu0001 mlx5_0"``) and switches as ``leaf01`` /
``spine01``. ``SIM_HOST`` accepts the same quoted id.

ibsim hands out GUIDs in the order nodes are first *referenced* in the file
(CA node GUIDs 0x100000, 0x100002, ...; port GUID = node GUID + 1; switches
0x200000, ...). The CA records are therefore written first, management host
first, so the management host is both ibsim's default attach point and the
first CA GUID.

Usage::

    python tests/fabricgen.py --gpu-nodes 8 --leaves 2 --spines 2 > net.fabric
    python tests/fabricgen.py --leaf-groups 4 --hcas-per-gpu 4 --gpu-nodes 16 > rail.fabric
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

DEFAULT_RADIX = 36
SERVICE_LEAF = "leaf-svc"


@dataclass(frozen=True)
class FatTree:
    """Parameters of a two-level (leaf/spine) fat tree."""

    leaves: int = 2
    spines: int = 2
    gpu_nodes: int = 8
    hcas_per_gpu: int = 2
    storage_nodes: int = 2
    mgmt_host: str = "sm01"
    radix: int = DEFAULT_RADIX
    # Ports of a spine; None: the leaves' radix. Larger spines (64 ports, or a director's) give a
    # non-blocking two-level tree more leaves than the leaves have ports.
    spine_radix: int | None = None

    @property
    def spine_ports(self) -> int:
        return self.radix if self.spine_radix is None else self.spine_radix

    def gpu_cas(self) -> list[str]:
        return [
            f"gpu{g:04d} mlx5_{h}"
            for g in range(1, self.gpu_nodes + 1)
            for h in range(self.hcas_per_gpu)
        ]

    def storage_cas(self) -> list[str]:
        return [f"stor{s:02d} mlx5_0" for s in range(1, self.storage_nodes + 1)]

    def mgmt_ca(self) -> str:
        return f"{self.mgmt_host} mlx5_0"

    def ca_names(self) -> list[str]:
        """Return every CA NodeDescription in file order (management host first)."""
        return [self.mgmt_ca(), *self.gpu_cas(), *self.storage_cas()]

    def leaf_names(self) -> list[str]:
        return [f"leaf{i:02d}" for i in range(1, self.leaves + 1)]

    def spine_names(self) -> list[str]:
        return [f"spine{i:02d}" for i in range(1, self.spines + 1)]


@dataclass(frozen=True)
class RailTree:
    """Parameters of a rail-optimised two-level fat tree.

    A leaf group has one leaf per rail, ``leaf-g<group>-r<rail>``; HCA ``mlx5_<r>`` of every GPU
    node in group ``g`` is cabled to ``leaf-g<g>-r<r>``, so the nodes of a group share exactly
    the group's leaves and no node reaches another group's leaves (NVIDIA's DGX SuperPOD
    reference architecture cables a scalable unit's rails this way). Storage, telemetry and the
    management host hang off one services leaf, ``leaf-svc``.
    """

    groups: int = 4
    rails: int = 4
    nodes_per_group: int = 4
    spines: int = 2
    storage_nodes: int = 2
    telemetry_nodes: int = 1
    mgmt_host: str = "sm01"
    radix: int = DEFAULT_RADIX

    @property
    def spine_ports(self) -> int:
        return self.radix

    def gpu_hosts(self, group: int) -> list[str]:
        """Return the GPU hosts of leaf group ``group`` (1-based), numbered across groups."""
        first = (group - 1) * self.nodes_per_group + 1
        return [f"gpu{n:04d}" for n in range(first, first + self.nodes_per_group)]

    def group_leaves(self, group: int) -> list[str]:
        return [f"leaf-g{group}-r{rail}" for rail in range(self.rails)]

    def gpu_cas(self) -> list[str]:
        return [
            f"{host} mlx5_{rail}"
            for group in range(1, self.groups + 1)
            for host in self.gpu_hosts(group)
            for rail in range(self.rails)
        ]

    def service_cas(self) -> list[str]:
        storage = [f"stor{s:02d} mlx5_0" for s in range(1, self.storage_nodes + 1)]
        return storage + [f"tel{t:02d} mlx5_0" for t in range(1, self.telemetry_nodes + 1)]

    def mgmt_ca(self) -> str:
        return f"{self.mgmt_host} mlx5_0"

    def ca_names(self) -> list[str]:
        """Return every CA NodeDescription in file order (management host first)."""
        return [self.mgmt_ca(), *self.gpu_cas(), *self.service_cas()]

    def leaf_names(self) -> list[str]:
        groups = range(1, self.groups + 1)
        return [leaf for group in groups for leaf in self.group_leaves(group)] + [SERVICE_LEAF]

    def spine_names(self) -> list[str]:
        return [f"spine{i:02d}" for i in range(1, self.spines + 1)]


@dataclass(frozen=True)
class _Link:
    node: str
    port: int
    peer: str
    peer_port: int


def _validate(tree: FatTree) -> None:
    if not (1 <= tree.radix <= 255 and 1 <= tree.spine_ports <= 255):
        raise ValueError("ibsim switches have 1..255 ports")
    if tree.leaves < 1 or tree.spines < 0 or tree.gpu_nodes < 0 or tree.storage_nodes < 0:
        raise ValueError(f"invalid fat tree parameters: {tree}")
    if tree.hcas_per_gpu < 1:
        raise ValueError("hcas_per_gpu must be >= 1")
    if tree.spines and tree.leaves > tree.spine_ports:
        raise ValueError(f"spine radix {tree.spine_ports} < {tree.leaves} leaves")
    downlinks = -(-len(tree.ca_names()) // tree.leaves)
    if downlinks + tree.spines > tree.radix:
        raise ValueError(
            f"leaf radix {tree.radix} too small for {downlinks} CAs + {tree.spines} uplinks"
        )


def _links(tree: FatTree) -> list[_Link]:
    """Return every cable once.

    CAs are dealt round robin over the leaves in the order GPU HCAs, storage,
    management host; with ``hcas_per_gpu == leaves`` this is a rail layout
    (every ``mlx5_0`` on leaf01, every ``mlx5_1`` on leaf02). Leaf ports start
    at 1 for CAs; the uplinks are the top ``spines`` ports. Leaf ``l`` uses
    spine port ``l``.
    """
    leaves = tree.leaf_names()
    next_port = dict.fromkeys(leaves, 1)
    cables: list[_Link] = []
    for i, ca in enumerate([*tree.gpu_cas(), *tree.storage_cas(), tree.mgmt_ca()]):
        leaf = leaves[i % len(leaves)]
        cables.append(_Link(ca, 1, leaf, next_port[leaf]))
        next_port[leaf] += 1
    return cables + _uplinks(tree)


def _uplinks(tree: FatTree | RailTree) -> list[_Link]:
    """Cable every leaf once to every spine: the leaf's top ports, spine port = leaf index + 1."""
    spines = tree.spine_names()
    first_uplink = tree.radix - len(spines) + 1
    return [
        _Link(leaf, first_uplink + si, spine, li + 1)
        for li, leaf in enumerate(tree.leaf_names())
        for si, spine in enumerate(spines)
    ]


def _validate_rail(tree: RailTree) -> None:
    if not 1 <= tree.radix <= 255:
        raise ValueError("ibsim switches have 1..255 ports")
    counts = (tree.nodes_per_group, tree.spines, tree.storage_nodes, tree.telemetry_nodes)
    if tree.groups < 1 or tree.rails < 1 or min(counts) < 0:
        raise ValueError(f"invalid rail tree parameters: {tree}")
    if tree.spines and len(tree.leaf_names()) > tree.spine_ports:
        raise ValueError(f"spine radix {tree.spine_ports} < {len(tree.leaf_names())} leaves")
    downlinks = max(tree.nodes_per_group, len(tree.service_cas()) + 1)
    if downlinks + tree.spines > tree.radix:
        raise ValueError(
            f"leaf radix {tree.radix} too small for {downlinks} CAs + {tree.spines} uplinks"
        )


def _rail_links(tree: RailTree) -> list[_Link]:
    """Return every cable once: a group's node ``i`` on port ``i`` of each of the group's leaves."""
    cables = [
        _Link(f"{host} mlx5_{rail}", 1, leaf, port)
        for group in range(1, tree.groups + 1)
        for port, host in enumerate(tree.gpu_hosts(group), start=1)
        for rail, leaf in enumerate(tree.group_leaves(group))
    ]
    services = [*tree.service_cas(), tree.mgmt_ca()]
    cables += [_Link(ca, 1, SERVICE_LEAF, port) for port, ca in enumerate(services, start=1)]
    return cables + _uplinks(tree)


def _record(kind: str, ports: int, name: str, links: list[_Link]) -> str:
    lines = [f'{kind}\t{ports} "{name}"']
    lines += [f'[{lk.port}]\t"{lk.peer}"[{lk.peer_port}]' for lk in sorted(links, key=_port)]
    return "\n".join(lines) + "\n"


def _port(link: _Link) -> int:
    return link.port


def render(tree: FatTree | RailTree) -> str:
    """Return the ibsim net file text for ``tree`` (deterministic)."""
    if isinstance(tree, RailTree):
        _validate_rail(tree)
        cables = _rail_links(tree)
    else:
        _validate(tree)
        cables = _links(tree)
    links: dict[str, list[_Link]] = {}
    for link in cables + [_Link(c.peer, c.peer_port, c.node, c.port) for c in cables]:
        links.setdefault(link.node, []).append(link)
    records = [_record("Hca", 1, ca, links[ca]) for ca in tree.ca_names()]
    records += [_record("Switch", tree.radix, sw, links.get(sw, [])) for sw in tree.leaf_names()]
    records += [
        _record("Switch", tree.spine_ports, sw, links.get(sw, [])) for sw in tree.spine_names()
    ]
    return _header(tree) + "\n" + "\n".join(records)


def _header(tree: FatTree | RailTree) -> str:
    if isinstance(tree, RailTree):
        return (
            f"# isofabric rail-optimised fat tree: {tree.groups} leaf groups x {tree.rails} rails, "
            f"{tree.nodes_per_group} gpu nodes per group x {tree.rails} HCAs, "
            f"{tree.storage_nodes} storage and {tree.telemetry_nodes} telemetry nodes on "
            f"{SERVICE_LEAF}, {tree.spines} spines, management host {tree.mgmt_host}\n"
        )
    return (
        f"# isofabric fat tree: {tree.leaves} leaves, {tree.spines} spines, "
        f"{tree.gpu_nodes} gpu nodes x {tree.hcas_per_gpu} HCAs, "
        f"{tree.storage_nodes} storage nodes, management host {tree.mgmt_host}\n"
    )


def fat_tree(**params: int | str) -> str:
    """Shortcut: ``fat_tree(leaves=2, gpu_nodes=8)`` -> net file text."""
    return render(FatTree(**params))  # type: ignore[arg-type]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = FatTree()
    for field in ("leaves", "spines", "gpu_nodes", "hcas_per_gpu", "storage_nodes", "radix"):
        flag = "--" + field.replace("_", "-")
        parser.add_argument(flag, type=int, default=getattr(defaults, field))
    parser.add_argument("--spine-radix", type=int, default=None, help="default: --radix")
    parser.add_argument("--mgmt-host", default=defaults.mgmt_host)
    parser.add_argument(
        "--leaf-groups",
        type=int,
        default=0,
        help="rail-optimised: this many groups of one leaf per HCA (rail), --gpu-nodes split "
        "evenly over them, services on leaf-svc; --leaves and --spine-radix are then unused",
    )
    parser.add_argument("--telemetry-nodes", type=int, default=RailTree().telemetry_nodes)
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    return parser


def _tree(args: argparse.Namespace, parser: argparse.ArgumentParser) -> FatTree | RailTree:
    params = {k: v for k, v in vars(args).items() if k not in {"output", "leaf_groups"}}
    telemetry = params.pop("telemetry_nodes")
    if args.leaf_groups <= 0:
        return FatTree(**params)
    if args.gpu_nodes % args.leaf_groups:
        parser.error(f"--gpu-nodes {args.gpu_nodes} is not a multiple of --leaf-groups")
    return RailTree(
        groups=args.leaf_groups,
        rails=args.hcas_per_gpu,
        nodes_per_group=args.gpu_nodes // args.leaf_groups,
        spines=args.spines,
        storage_nodes=args.storage_nodes,
        telemetry_nodes=telemetry,
        mgmt_host=args.mgmt_host,
        radix=args.radix,
    )


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    text = render(_tree(args, parser))
    if args.output:
        with open(args.output, "w", encoding="ascii") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
