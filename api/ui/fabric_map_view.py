"""The fabric map's drawing model: leaves grouped by rail, ports or leaves coloured by owner.

A fabric of at most `DETAIL_LEAVES` leaves is drawn port by port. A larger one (the 3,128-leaf
benchmark fabric) is drawn one cell per leaf, coloured by the owner holding most of its host
ports, with a drill-down per rail (`DETAIL_LEAVES` leaves a page, port by port) and, with a tenant
filter, the tenant's own leaves port by port. Owner colours are CSS classes (console.css):
``own-0`` .. ``own-11`` for tenants, ``own-svc`` for services, ``own-free`` for free ports,
``own-mgmt`` for management nodes' ports (never allocatable).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from tenancy.usecases.fabric_map import FREE, MANAGEMENT, FabricLayout, LeafUse, PortUse

DETAIL_LEAVES = 64
# Port by port up to this many ports a page (64 leaves of 32 ports; 16 leaves of 256 ports):
# a 64-leaf RoCE fabric of 16,384 NICs drawn whole is a 3 MB page.
DETAIL_PORTS = 4096
PALETTE = 12
PORT_COLUMNS = 16  # ports per row of a leaf's drawing
CELL, GAP = 14, 3  # a port's square and the space between squares (SVG user units)
LEAF_COLUMNS = 40  # leaves per row of a rail's overview
LEGEND_LIMIT = 24
SMALL_FABRIC_LEAVES = 16


@dataclass(frozen=True, slots=True)
class Colours:
    """Owner -> CSS class: distinct colours for up to `PALETTE` tenants, else a stable hash."""

    tenants: dict[str, int]

    @classmethod
    def of(cls, owners: Iterable[str]) -> Colours:
        """The colours of `owners`' tenants (a stable hash when there are too many to tell)."""
        tenants = sorted({o for o in owners if o.startswith("tenant:")})
        if len(tenants) <= PALETTE:
            return cls({t: i for i, t in enumerate(tenants)})
        return cls({t: zlib.crc32(t.encode()) % PALETTE for t in tenants})

    def css(self, owner: str) -> str:
        """The owner's colour class."""
        if owner == FREE:
            return "own-free"
        if owner == MANAGEMENT:
            return "own-mgmt"
        if owner.startswith("service:"):
            return "own-svc"
        return f"own-{self.tenants.get(owner, 0)}"


def is_large(layout: FabricLayout) -> bool:
    """Whether the fabric is drawn one cell per leaf (too many leaves or ports for squares)."""
    ports = sum(leaf.ports for leaf in layout.leaves)
    return len(layout.leaves) > DETAIL_LEAVES or ports > DETAIL_PORTS


def page_size(layout: FabricLayout) -> int:
    """Leaves drawn port by port on one page: at most `DETAIL_LEAVES` and `DETAIL_PORTS`."""
    widest = max((leaf.ports for leaf in layout.leaves), default=1)
    return max(1, min(DETAIL_LEAVES, DETAIL_PORTS // max(widest, 1)))


def scale(leaves: int) -> int:
    """The drawing scale of port squares: 2 for a few leaves (room to read), else 1."""
    return 2 if leaves <= SMALL_FABRIC_LEAVES else 1


def rail_label(rail: int | None) -> str:
    """How a rail is named: by the HCA index its leaves' ports share."""
    return "no rail (no HCA index)" if rail is None else f"rail {rail} (mlx5_{rail} / NIC {rail})"


def rails(layout: FabricLayout) -> dict[int | None, list[LeafUse]]:
    """The leaves by rail, rails in index order (leaves without an index last)."""
    grouped: dict[int | None, list[LeafUse]] = {}
    for leaf in layout.leaves:
        grouped.setdefault(leaf.rail, []).append(leaf)
    return dict(sorted(grouped.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))


def leaf_cell(leaf: LeafUse, colours: Colours, tenant: str | None, index: int) -> dict[str, Any]:
    """A leaf in the aggregate view: its dominant owner's colour, position and hover text."""
    owners = leaf.by_owner()
    total = sum(owners.values())
    dominant = max(sorted(owners), key=lambda o: owners[o])
    top = sorted(owners.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
    parts = ", ".join(f"{o} {n}" for o, n in top)
    more = f", +{len(owners) - len(top)} more" if len(owners) > len(top) else ""
    held = leaf.holds(tenant) if tenant else 0
    row, column = divmod(index, LEAF_COLUMNS)
    return {
        "leaf": leaf.leaf,
        "css": colours.css(dominant),
        "mark": ("hl" if held else "dim") if tenant else "",
        "x": column * (CELL + GAP),
        "y": row * (CELL + GAP),
        "title": f"{leaf.leaf}: {total} host ports; {parts}{more}"
        + (f"; {tenant} {held}" if tenant else ""),
    }


def rail_overview(leaves: list[LeafUse], colours: Colours, tenant: str | None) -> dict[str, Any]:
    """A rail's leaves as one SVG grid of leaf cells."""
    cells = [leaf_cell(leaf, colours, tenant, i) for i, leaf in enumerate(leaves)]
    columns = min(len(leaves), LEAF_COLUMNS)
    lines = -(-len(leaves) // LEAF_COLUMNS)
    rects = rects_of("leaf-cell", cells, ("leaf",))
    return {"cells": cells, "rects": rects, "width": columns * (CELL + GAP),
            "height": lines * (CELL + GAP)}  # fmt: skip


def leaf_drawing(
    leaf: str, ports: list[PortUse], colours: Colours, tenant: str | None
) -> dict[str, Any]:
    """One leaf port by port: a square per host port, coloured by its owner."""
    squares = []
    for i, port in enumerate(ports):
        row, column = divmod(i, PORT_COLUMNS)
        squares.append(
            {
                "port": port.port,
                "node": port.node,
                "owner": port.owner,
                "css": colours.css(port.owner),
                "mark": ("hl" if port.owner == tenant else "dim") if tenant else "",
                "x": column * (CELL + GAP),
                "y": row * (CELL + GAP),
                "title": f"{leaf} port {port.port}: {port.node} {port.hca} · {port.owner}",
            }
        )
    columns = max(1, min(len(ports), PORT_COLUMNS))
    lines = max(1, -(-len(ports) // PORT_COLUMNS))
    return {
        "leaf": leaf,
        "squares": squares,
        "rects": rects_of("port", squares, ("owner", "node")),
        "width": columns * (CELL + GAP),
        "height": lines * (CELL + GAP),
        "held": sum(1 for p in ports if p.owner == tenant) if tenant else 0,
    }


def legend(counts: dict[str, int], colours: Colours) -> dict[str, Any]:
    """The owners shown, most ports first (at most `LEGEND_LIMIT`), and how many are not."""
    ranked = sorted(counts.items(), key=lambda kv: (kv[0] in (FREE, MANAGEMENT), -kv[1], kv[0]))
    shown = [{"owner": o, "css": colours.css(o), "ports": n} for o, n in ranked[:LEGEND_LIMIT]]
    return {"owners": shown, "hidden": max(0, len(ranked) - LEGEND_LIMIT)}


def owner_totals(leaves: Iterable[LeafUse]) -> dict[str, int]:
    """Host ports per owner over `leaves`."""
    totals: dict[str, int] = {}
    for leaf in leaves:
        for owner, count in leaf.by_owner().items():
            totals[owner] = totals.get(owner, 0) + count
    return totals


def rects_of(kind: str, items: list[dict[str, Any]], data: tuple[str, ...]) -> Markup:
    """The SVG squares of `items` (css, mark, x, y, title and the `data` attributes), escaped.

    Built here rather than in the template: thousands of squares (3,128 leaves) render in a
    tenth of the time Jinja2 takes for the same markup.
    """
    parts = []
    for item in items:
        classes = f"{kind} {item['css']} {item['mark']}".rstrip()
        attributes = "".join(f' data-{name}="{escape(item[name])}"' for name in data)
        parts.append(
            f'<rect class="{classes}"{attributes} x="{item["x"]}" y="{item["y"]}" '
            f'width="{CELL}" height="{CELL}"><title>{escape(item["title"])}</title></rect>'
        )
    return Markup("".join(parts))
