"""The console's dependencies: the session's principal, authorization, CSRF, the unit of work.

A page router (api/ui/pages/) is made by `console_router`: every route on it resolves the
session cookie (`console_principal`), is authorized against the same RBAC policy as the API
(policies/authz.py, the /ui rows) with the same 404 for another tenant's pages, and, for any
method but GET and HEAD, must carry the session's CSRF token in its form.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, Request
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from api.access_rules import decide
from api.deps import SLUG, hidden_tenant
from api.request_id import REQUEST_ID_HEADER, choose_request_id, request_id_of
from api.ui.errors import ConsoleRoute
from api.ui.render import SELF_SCOPED_PAGES, SESSION_STATE_KEY
from api.ui.session import CSRF_FIELD, ConsoleSession, ConsoleSessions, csrf_matches
from policies.authz import GLOBAL_DOMAIN, Decision
from policies.errors import ForbiddenError
from tenancy.store.uow import Principal, UnitOfWork

SAFE_METHODS = frozenset({"GET", "HEAD"})
FORM_STATE_KEY = "console_form"
FORM_MEDIA_TYPE = "application/x-www-form-urlencoded"


async def console_session(request: Request) -> ConsoleSession:
    """The request's console session (cookie or open mode); redirects to sign in without one."""
    cached = getattr(request.state, SESSION_STATE_KEY, None)
    if isinstance(cached, ConsoleSession):
        return cached
    sessions: ConsoleSessions = request.app.state.console_sessions
    session = await run_in_threadpool(sessions.resolve, request)
    setattr(request.state, SESSION_STATE_KEY, session)
    return session


CurrentSession = Annotated[ConsoleSession, Depends(console_session)]


async def console_principal(session: CurrentSession) -> Principal:
    """Who uses the console: the principal its cookie's token (or open mode) stands for."""
    return session.principal


ConsolePrincipal = Annotated[Principal, Depends(console_principal)]


async def console_authorize(request: Request, session: CurrentSession) -> None:
    """Enforce the RBAC policy on the matched /ui route and its tenant, then CSRF on posts.

    Raises:
        NotFoundError: the page is about a tenant in which the principal holds no role
            (shaped like a missing tenant, as the API answers).
        ForbiddenError: the role may not do this, or a post's CSRF token is missing or wrong.
    """
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        raise ForbiddenError("no policy covers this request")
    principal = session.principal
    tenant = request.path_params.get("tenant")
    if tenant is not None and not SLUG.fullmatch(str(tenant)):
        raise hidden_tenant(str(tenant))
    domain = GLOBAL_DOMAIN if tenant is None else str(tenant)
    if tenant is None and principal.tenant is not None and route.path in SELF_SCOPED_PAGES:
        domain = principal.tenant
    method = "GET" if request.method == "HEAD" else request.method
    decision = decide(
        f"principal:{principal.name}", principal.role, principal.tenant, domain, route.path, method
    )
    if decision is Decision.HIDDEN:
        raise hidden_tenant(domain)
    if decision is not Decision.ALLOW:
        raise ForbiddenError(f"role '{principal.role}' may not {method} {route.path}")
    if request.method not in SAFE_METHODS:
        form = await read_form(request)
        if not csrf_matches(session.csrf_token, form.get(CSRF_FIELD)):
            raise ForbiddenError(
                "the form's CSRF token is missing or wrong: reload the page and try again"
            )


async def read_form(request: Request) -> dict[str, str]:
    """The request's URL-encoded form (read once; the last value of a repeated field).

    Another media type reads as an empty form, so its CSRF check fails. The body's size is
    capped by api/limits.py before it gets here.
    """
    cached = getattr(request.state, FORM_STATE_KEY, None)
    if isinstance(cached, dict):
        return cached
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    body = await request.body() if media == FORM_MEDIA_TYPE else b""
    form = dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))
    setattr(request.state, FORM_STATE_KEY, form)
    return form


async def console_uow(request: Request, session: CurrentSession) -> UnitOfWork:
    """The app's unit of work acting for the console's principal (audited as them)."""
    uow: UnitOfWork = request.app.state.uow
    supplied = request.headers.get(REQUEST_ID_HEADER)
    request_id = request_id_of(request.scope) or choose_request_id(supplied)
    return replace(uow, principal=session.principal, request_id=request_id)


ConsoleUow = Annotated[UnitOfWork, Depends(console_uow)]


def console_router() -> APIRouter:
    """A router for console pages: under /ui, out of OpenAPI, authorized, errors as HTML."""
    return APIRouter(
        prefix="/ui",
        include_in_schema=False,
        route_class=ConsoleRoute,
        dependencies=[Depends(console_authorize)],
    )
