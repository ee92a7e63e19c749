"""The fabric map (/ui/fabrics/{fabric}/map): switches, leaves by rail, ports coloured by owner.

Two aggregate reads (tenancy/usecases/fabric_map.py): host ports per leaf and owner, then port by
port only for the leaves drawn in detail; no snapshot is loaded. api/ui/fabric_map_view.py decides
what is drawn (port by port up to 64 leaves, else one cell per leaf with drill-downs).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.deps import SLUG
from api.ui import fabric_map_view as fv
from api.ui.deps import ConsoleUow, console_router
from api.ui.render import render
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.fabric_map import (
    FabricLayout,
    LeafUse,
    PortUse,
    leaf_ports,
    leaf_use,
    tenant_ports,
)

router = console_router()

KIND_LABELS = {"infiniband": "InfiniBand", "roce": "RoCE"}
NO_RAIL = -1  # ?rail=-1: the leaves whose ports carry no HCA index


@router.get("/fabrics/{fabric}/map")
async def map_page(
    request: Request,
    fabric: str,
    uow: ConsoleUow,
    tenant: Annotated[str, Query(max_length=63)] = "",
    rail: Annotated[int | None, Query(ge=NO_RAIL, le=4096)] = None,
    page: Annotated[int, Query(ge=0, le=10_000)] = 0,
) -> Response:
    """The map; `tenant` highlights one tenant's ports, `rail` (and `page`) drills into a rail."""
    owner = f"tenant:{tenant}" if tenant and SLUG.fullmatch(tenant) else None
    layout, ports, detail = await run_in_threadpool(_read, uow, fabric, owner, rail, page)
    return render(request, "fabric_map.html", map_context(layout, ports, detail, owner, rail, page))


@router.get("/tenants/{tenant}/fabrics/{fabric}/map")
async def tenant_map_page(request: Request, tenant: str, fabric: str, uow: ConsoleUow) -> Response:
    """A tenant's own footprint on a fabric: its leaves by rail and its ports, nothing else.

    The page a tenant role may open (the policy's /ui/tenants/{tenant} rows: another tenant's
    is a 404); other owners' ports are neither drawn nor counted.
    """
    ports = await run_in_threadpool(
        lambda: tenant_ports(uow, tenant_name=tenant, fabric_name=fabric)
    )
    return render(request, "tenant_map.html", tenant_map_context(tenant, fabric, ports))


def tenant_map_context(tenant: str, fabric: str, ports: list[PortUse]) -> dict[str, Any]:
    """The tenant map's context: the tenant's ports drawn by leaf, leaves grouped by rail."""
    by_leaf: dict[str, list[PortUse]] = {}
    for port in ports:
        by_leaf.setdefault(port.leaf, []).append(port)
    leaves = tuple(
        LeafUse(name, tuple((p.hca, p.owner, 1) for p in held)) for name, held in by_leaf.items()
    )
    layout = FabricLayout(fabric, "", (), leaves)
    owner = f"tenant:{tenant}"
    colours = fv.Colours.of([owner])
    return {
        "active": "tenants",
        "tenant": tenant,
        "fabric": fabric,
        "port_count": len(ports),
        "leaf_count": len(leaves),
        "groups": _drawings(fv.rails(layout), ports, list(leaves), colours, None),
        "cell": fv.CELL,
        "scale": fv.scale(len(leaves)),
    }


def _read(
    uow: UnitOfWork, fabric: str, owner: str | None, rail: int | None, page: int
) -> tuple[FabricLayout, list[PortUse], list[LeafUse]]:
    """The layout, the leaves drawn port by port and their ports (NotFoundError: no fabric)."""
    layout = leaf_use(uow, fabric_name=fabric)
    detail = detail_leaves(layout, owner, rail, page)
    ports = leaf_ports(uow, fabric_name=fabric, leaves=[leaf.leaf for leaf in detail])
    return layout, ports, detail


def detail_leaves(
    layout: FabricLayout, owner: str | None, rail: int | None, page: int
) -> list[LeafUse]:
    """The leaves drawn port by port.

    All of a small fabric; of a large one, a page of the chosen rail, else the filtered
    tenant's first leaves (a page's worth), else none.
    """
    leaves, size = list(layout.leaves), fv.page_size(layout)
    if not fv.is_large(layout):
        return leaves
    if rail is not None:
        wanted = None if rail == NO_RAIL else rail
        chosen = [leaf for leaf in leaves if leaf.rail == wanted]
        return chosen[page * size : (page + 1) * size]
    if owner is not None:
        return [leaf for leaf in leaves if leaf.holds(owner)][:size]
    return []


def map_context(
    layout: FabricLayout,
    ports: list[PortUse],
    detail: list[LeafUse],
    owner: str | None,
    rail: int | None,
    page: int,
) -> dict[str, Any]:
    """The template's context: overview per rail when large, drawings of the detailed leaves."""
    totals = fv.owner_totals(layout.leaves)
    colours = fv.Colours.of(totals)
    by_rail = fv.rails(layout)
    large, size = fv.is_large(layout), fv.page_size(layout)
    rail_size = len(by_rail.get(None if rail == NO_RAIL else rail, [])) if rail is not None else 0
    held = [leaf for leaf in layout.leaves if leaf.holds(owner)] if owner else []
    return {
        "active": "fabrics",
        "fabric": layout.fabric,
        "kind": KIND_LABELS.get(layout.kind, layout.kind),
        "tenant": owner.partition(":")[2] if owner else "",
        "tenant_ports": totals.get(owner, 0) if owner else 0,
        "tenant_leaves": len(held),
        "spines": layout.spines,
        "leaf_count": len(layout.leaves),
        "port_count": sum(totals.values()),
        "large": large,
        "overview": _overview(by_rail, colours, owner) if large else [],
        "groups": _drawings(by_rail, ports, detail, colours, owner),
        "rail": rail,
        "page": page,
        "pages": -(-rail_size // size) if rail_size else 0,
        "page_size": size,
        "legend": fv.legend(totals, colours),
        "cell": fv.CELL,
        "scale": fv.scale(len(layout.leaves)),
    }


def _overview(
    by_rail: dict[int | None, list[LeafUse]], colours: fv.Colours, owner: str | None
) -> list[dict[str, Any]]:
    """One grid of leaf cells per rail."""
    return [
        {
            "rail": NO_RAIL if key is None else key,
            "label": fv.rail_label(key),
            "count": len(members),
            "grid": fv.rail_overview(members, colours, owner),
        }
        for key, members in by_rail.items()
    ]


def _drawings(
    by_rail: dict[int | None, list[LeafUse]],
    ports: list[PortUse],
    detail: list[LeafUse],
    colours: fv.Colours,
    owner: str | None,
) -> list[dict[str, Any]]:
    """The leaves drawn port by port, grouped by rail (rails without one are left out)."""
    by_leaf: dict[str, list[PortUse]] = {}
    for port in ports:
        by_leaf.setdefault(port.leaf, []).append(port)
    drawn = {leaf.leaf for leaf in detail}
    groups = []
    for key, members in by_rail.items():
        leaves = [
            fv.leaf_drawing(leaf.leaf, by_leaf.get(leaf.leaf, []), colours, owner)
            for leaf in members
            if leaf.leaf in drawn
        ]
        if leaves:
            groups.append({"rail": key, "label": fv.rail_label(key), "leaves": leaves})
    return groups
