"""Probe pages for the authorization and CSRF tests: console routes that record their calls.

They go through `console_router` exactly like real pages (policy, 404 for other tenants, CSRF),
so the tests do not depend on which pages other work has landed yet. Inserted before the
console's catch-all 404.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import FastAPI
from starlette.responses import PlainTextResponse, Response

from api.ui.deps import ConsolePrincipal, console_router

TENANT_PAGE = "/ui/tenants/{tenant}/probe"
TENANT_ACTION = "/ui/tenants/{tenant}/actions/probe"
GLOBAL_ACTION = "/ui/actions/probe"


@dataclass
class Probes:
    """What the probe routes were called with: (path, principal role)."""

    calls: list[tuple[str, str]] = field(default_factory=list)


def install_probes(app: FastAPI) -> Probes:
    """Add the probe routes to `app` ahead of the console's catch-all; their record."""
    probes = Probes()
    router = console_router()

    @router.get("/tenants/{tenant}/probe")
    async def tenant_page(tenant: str, principal: ConsolePrincipal) -> Response:
        probes.calls.append((f"GET {tenant}", principal.role))
        return PlainTextResponse(f"tenant {tenant}")

    @router.post("/tenants/{tenant}/actions/probe")
    async def tenant_action(tenant: str, principal: ConsolePrincipal) -> Response:
        probes.calls.append((f"POST {tenant}", principal.role))
        return PlainTextResponse("done")

    @router.post("/actions/probe")
    async def global_action(principal: ConsolePrincipal) -> Response:
        probes.calls.append(("POST global", principal.role))
        return PlainTextResponse("done")

    before = len(app.router.routes)
    app.include_router(router)
    added = app.router.routes[before:]
    del app.router.routes[before:]
    app.router.routes[0:0] = added
    return probes
