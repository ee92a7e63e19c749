"""The fabrics overview (/ui/fabrics): per fabric its verdict, pool use, nodes, deploy sync.

It reads what GET /metrics reads (tenancy/monitoring.py `service_state`): one read-only
transaction of aggregate queries and the read cache; it never loads a snapshot or verifies.
"""

from __future__ import annotations

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.ui.deps import ConsoleUow, console_router
from api.ui.render import render
from tenancy.monitoring import service_state
from tenancy.uow import UnitOfWork

router = console_router()


@router.get("/fabrics")
async def fabrics_page(request: Request, uow: ConsoleUow) -> Response:
    """Every fabric's kind, verdict, pool use, nodes by state and deploy targets' sync."""
    return await fabrics_overview(request, uow)


async def fabrics_overview(request: Request, uow: UnitOfWork) -> Response:
    """Render the overview (also the home page of fabric-wide readers)."""
    state = await run_in_threadpool(service_state, uow)
    return render(request, "fabrics.html", {"fabrics": state.fabrics, "active": "fabrics"})
