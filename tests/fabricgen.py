"""Generate ibsim topology files for a two-level fat tree.

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
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

DEFAULT_RADIX = 36


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
    """Return every cable once, in both directions.

    CAs are dealt round robin over the leaves in the order GPU HCAs, storage,
    management host; with ``hcas_per_gpu == leaves`` this is a rail layout
    (every ``mlx5_0`` on leaf01, every ``mlx5_1`` on leaf02). Leaf ports start
    at 1 for CAs; the uplinks are the top ``spines`` ports. Leaf ``l`` uses
    spine port ``l``.
    """
    leaves, spines = tree.leaf_names(), tree.spine_names()
    next_port = dict.fromkeys(leaves, 1)
    cables: list[_Link] = []
    for i, ca in enumerate([*tree.gpu_cas(), *tree.storage_cas(), tree.mgmt_ca()]):
        leaf = leaves[i % len(leaves)]
        cables.append(_Link(ca, 1, leaf, next_port[leaf]))
        next_port[leaf] += 1
    first_uplink = tree.radix - len(spines) + 1
    for li, leaf in enumerate(leaves):
        for si, spine in enumerate(spines):
            cables.append(_Link(leaf, first_uplink + si, spine, li + 1))
    return cables + [_Link(c.peer, c.peer_port, c.node, c.port) for c in cables]


def _record(kind: str, ports: int, name: str, links: list[_Link]) -> str:
    lines = [f'{kind}\t{ports} "{name}"']
    lines += [f'[{lk.port}]\t"{lk.peer}"[{lk.peer_port}]' for lk in sorted(links, key=_port)]
    return "\n".join(lines) + "\n"


def _port(link: _Link) -> int:
    return link.port


def render(tree: FatTree) -> str:
    """Return the ibsim net file text for ``tree`` (deterministic)."""
    _validate(tree)
    links: dict[str, list[_Link]] = {}
    for link in _links(tree):
        links.setdefault(link.node, []).append(link)
    header = (
        f"# isofabric fat tree: {tree.leaves} leaves, {tree.spines} spines, "
        f"{tree.gpu_nodes} gpu nodes x {tree.hcas_per_gpu} HCAs, "
        f"{tree.storage_nodes} storage nodes, management host {tree.mgmt_host}\n"
    )
    records = [_record("Hca", 1, ca, links[ca]) for ca in tree.ca_names()]
    records += [_record("Switch", tree.radix, sw, links.get(sw, [])) for sw in tree.leaf_names()]
    records += [
        _record("Switch", tree.spine_ports, sw, links.get(sw, [])) for sw in tree.spine_names()
    ]
    return header + "\n" + "\n".join(records)


def fat_tree(**params: int | str) -> str:
    """Shortcut: ``fat_tree(leaves=2, gpu_nodes=8)`` -> net file text."""
    return render(FatTree(**params))  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = FatTree()
    for field in ("leaves", "spines", "gpu_nodes", "hcas_per_gpu", "storage_nodes", "radix"):
        flag = "--" + field.replace("_", "-")
        parser.add_argument(flag, type=int, default=getattr(defaults, field))
    parser.add_argument("--spine-radix", type=int, default=None, help="default: --radix")
    parser.add_argument("--mgmt-host", default=defaults.mgmt_host)
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    args = parser.parse_args(argv)
    params = {k: v for k, v in vars(args).items() if k != "output"}
    text = render(FatTree(**params))
    if args.output:
        with open(args.output, "w", encoding="ascii") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
