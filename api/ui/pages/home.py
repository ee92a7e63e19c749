"""The console's home (/ui): the fabrics overview for fabric-wide readers, else their tenant.

Also the catch-all for /ui paths no page serves (an HTML 404, not problem+json); it is mounted
after every page router (api/ui/__init__.py).
"""

from __future__ import annotations

from contextlib import suppress

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from api.ui.deps import ConsoleUow, CurrentSession, console_router, console_session
from api.ui.errors import ConsoleRoute, error_page
from api.ui.pages.fabrics import fabrics_overview
from api.ui.render import nav_for
from api.ui.session import SignInRequired

HOME = "/ui"
router = console_router()
fallback = APIRouter(prefix="/ui", include_in_schema=False, route_class=ConsoleRoute)


@router.get("")
async def home(request: Request, session: CurrentSession, uow: ConsoleUow) -> Response:
    """The fabrics overview if the principal may read it; else its first page (its tenant)."""
    links = nav_for(session)
    if any(link["key"] == "fabrics" for link in links):
        return await fabrics_overview(request, uow)
    if links:
        return RedirectResponse(links[0]["href"], status_code=303)
    return error_page(request, 403, "Forbidden", "this role has no console page")


@fallback.api_route("/{path:path}", methods=["GET", "POST"])
async def no_such_page(request: Request, path: str) -> Response:
    """404 page for a console path no page serves (with the nav when signed in); /ui/ -> /ui."""
    if not path:
        return RedirectResponse(HOME, status_code=307)
    with suppress(SignInRequired):  # a 404 tells a stranger nothing: no sign-in needed
        await console_session(request)
    return error_page(request, 404, "Not found", f"the console has no page at /ui/{path}")
