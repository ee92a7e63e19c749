"""Tenant pages: the list (/ui/tenants) and one tenant (/ui/tenants/{tenant}).

The list is GET /v1/tenants's use case (billing sees names and billing accounts only, as in
the API); the tenant page is api/ui/tenant_page.py's sections, each shown when the API would
answer its route to this principal. Another tenant's page is a 404 for a tenant role
(console_authorize). A flash message left by an operator action is shown once.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.ui.deps import ConsolePrincipal, ConsoleUow, console_router
from api.ui.flash import render_with_flash
from api.ui.tenant_page import may, tenant_page
from policies.authz import GLOBAL_DOMAIN, Role
from tenancy.usecases import tenants

router = console_router()
PAGE_SIZE = 100
Cursor = Annotated[str | None, Query(max_length=200, pattern=r"^[A-Za-z0-9_=-]*$")]


@router.get("/tenants")
async def tenants_page(
    request: Request, uow: ConsoleUow, principal: ConsolePrincipal, cursor: Cursor = None
) -> Response:
    """Tenants by name, a page at a time; the operator gets the onboarding button."""
    page = await run_in_threadpool(
        tenants.list_tenants, uow, limit=PAGE_SIZE, cursor=cursor or None, only=principal.tenant
    )
    context = {
        "active": "tenants",
        "tenants": [t.model_dump() for t in page.data],
        "count": page.count,
        "next": page.next,
        "billing_only": principal.role == Role.BILLING,
        "can_onboard": may(principal, GLOBAL_DOMAIN, "/ui/actions/onboard", "POST"),
    }
    return render_with_flash(request, "tenants.html", context)


@router.get("/tenants/{tenant}")
async def tenant_detail(
    request: Request, tenant: str, uow: ConsoleUow, principal: ConsolePrincipal
) -> Response:
    """One tenant: nodes by fabric, segments, grants, peerings, reachability, proofs, usage."""
    context = await run_in_threadpool(tenant_page, uow, principal, tenant)
    context["active"] = "tenants"
    return render_with_flash(request, "tenant.html", context)
