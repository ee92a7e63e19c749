"""The fabrics overview (/ui, /ui/fabrics): per fabric its verdict, pools, nodes, deploy sync.

It reads exactly what GET /metrics reads (tenancy/usecases/monitoring.py `service_state`): one
read-only transaction of aggregate queries plus the read cache; it never loads a snapshot, verifies
or renders, so it costs the same on a 100k-port fabric as on the demo. This module turns that
state into what the template shows (labels, fractions, durations); the template draws it.
Deploy sync includes (RoCE) the leaves that carry owners' ports without a deploy target: the
fabric is not in sync while one exists, whatever its targets report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.ui.deps import ConsoleUow, console_router
from api.ui.render import render
from policies.node_state import NodeState
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.monitoring import (
    NODE_COUNT_KEYS,
    FabricState,
    PoolUse,
    ServiceState,
    TargetSync,
    service_state,
)

router = console_router()

POOL_LABELS = {
    "pkey": "P_Keys",
    "vlan": "VLANs",
    "l2vni": "L2 VNIs",
    "l3vni": "L3 VNIs",
    "subnet": "Tenant subnets",
    "rd": "Route distinguishers",
}
KIND_LABELS = {"infiniband": "InfiniBand", "roce": "RoCE"}
SYNC_LABELS = {
    "in_sync": ("in sync", "badge-ok"),
    "pending": ("pending", "badge-warn"),
    "failed": ("failed", "badge-bad"),
    "unreported": ("never reported", "badge"),
}
# Pool bars turn amber from 75 % and red from 90 % (docs/operators/monitoring.md alerts at 90 %).
HIGH_USE, FULL_USE = 0.75, 0.9


@dataclass(frozen=True, slots=True)
class Verdict:
    """How the overview states a fabric's verdict."""

    text: str
    badge: str  # a badge class of console.css


@router.get("/fabrics")
async def fabrics_page(request: Request, uow: ConsoleUow) -> Response:
    """Every fabric's kind, verdict, pool use, nodes by state and deploy targets' sync."""
    return await fabrics_overview(request, uow)


async def fabrics_overview(request: Request, uow: UnitOfWork) -> Response:
    """Render the overview (also the home page of the roles that read every fabric)."""
    state = await run_in_threadpool(service_state, uow)
    return render(request, "fabrics.html", overview_context(state))


def overview_context(state: ServiceState) -> dict[str, Any]:
    """The template's context: one card per fabric, and the audit log's summary."""
    return {
        "active": "fabrics",
        "fabrics": [fabric_card(f) for f in state.fabrics],
        "audit_entries": state.audit_entries,
        "checkpoint_size": state.checkpoint_size,
        "checkpoint_age": None
        if state.checkpoint_age_seconds is None
        else human_duration(state.checkpoint_age_seconds),
    }


def fabric_card(fabric: FabricState) -> dict[str, Any]:
    """What a fabric's card shows."""
    total_nodes = sum(fabric.nodes.values())
    return {
        "name": fabric.name,
        "kind": KIND_LABELS.get(fabric.kind, fabric.kind),
        "verdict": verdict_of(fabric),
        "pools": [pool_row(p) for p in fabric.pools],
        "nodes": [
            {"state": key, "count": fabric.nodes.get(key, 0)}
            for key in NODE_COUNT_KEYS
            if fabric.nodes.get(key, 0) or key in (NodeState.FREE, NodeState.ALLOCATED)
        ],
        "node_segments": stacked_segments(
            [(key, fabric.nodes.get(key, 0)) for key in NODE_COUNT_KEYS], total_nodes
        ),
        "total_nodes": total_nodes,
        "targets": [target_row(t) for t in fabric.targets],
        "untargeted": list(fabric.untargeted),
    }


def verdict_of(fabric: FabricState) -> Verdict:
    """Holds, violated (with the counterexample count when known), or not verified yet."""
    if fabric.holds is None:
        return Verdict("not verified yet", "badge")
    if fabric.holds:
        return Verdict("isolation holds", "badge-ok")
    if fabric.counterexamples is None:
        reason = "; the last full check raised an alarm" if fabric.alarm else ""
        return Verdict(f"violated{reason}", "badge-bad")
    plural = "" if fabric.counterexamples == 1 else "s"
    return Verdict(f"violated: {fabric.counterexamples} counterexample{plural}", "badge-bad")


def pool_row(pool: PoolUse) -> dict[str, Any]:
    """A pool's label, use, size and bar (percent of the size, at least visible when used)."""
    fraction = pool.used / pool.size if pool.size else 0.0
    level = "full" if fraction >= FULL_USE else "high" if fraction >= HIGH_USE else ""
    return {
        "pool": pool.pool,
        "label": POOL_LABELS.get(pool.pool, pool.pool),
        "used": pool.used,
        "size": pool.size,
        "percent": f"{fraction:.1%}" if fraction >= 0.001 or not pool.used else "<0.1%",
        "width": bar_width(fraction, pool.used > 0),
        "level": level,
    }


def bar_width(fraction: float, nonzero: bool) -> float:
    """A bar's width in a 0-100 viewBox; a used pool stays visible (at least 0.6)."""
    width = round(min(max(fraction, 0.0), 1.0) * 100, 2)
    return max(width, 0.6) if nonzero else width


def stacked_segments(parts: list[tuple[str, int]], total: int) -> list[dict[str, Any]]:
    """Segments (name, x, width in a 0-100 viewBox) of a stacked bar of `parts`."""
    segments, x = [], 0.0
    for name, count in parts:
        if count and total:
            width = count / total * 100
            segments.append({"name": name, "count": count, "x": round(x, 3), "width": width})
            x += width
    return segments


def target_row(target: TargetSync) -> dict[str, Any]:
    """A deploy target's name, sync state and how long it has been out of sync."""
    label, badge = SYNC_LABELS.get(target.sync, (target.sync, "badge"))
    since = "" if target.sync == "in_sync" else human_duration(target.seconds_since_in_sync)
    return {"name": target.name, "sync": target.sync, "label": label, "badge": badge,
            "since": since}  # fmt: skip


def human_duration(seconds: float) -> str:
    """`seconds` as people say it: 45 s, 12 min, 3 h, 2 d."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"
