"""UFM's sign-ins on the facade: ``POST /dologin`` sessions and ``POST /app/tokens``.

``/dologin`` takes UFM's form (``httpd_username``, ``httpd_password``; the password is an
isofabric token) and sets a session cookie of its own, not the console's: ``Path=/ufmRestV2``
(or ``/fabrics/{fabric}/ufmRestV2``), HttpOnly, SameSite=Strict, Secure behind TLS. It authorizes
nothing under /v1 or /ui (those read other credentials). ``/app/tokens`` mints a child of the
caller's token with the same role and scope, revoked with it (tenancy/usecases/tokens.py).
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from api.request_id import choose_request_id, request_id_of
from api.ufm.auth import SESSION_COOKIE, Caller, Style, acting_principal
from api.ufm.wire import UfmRoute, ok, refusal
from api.ui.session import is_https
from policies.errors import AuthenticationError
from tenancy.schemas import TokenCreate
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import facade_sessions, tokens
from tenancy.usecases.facade_sessions import SESSION_LIFETIME

LOGIN_ROUTER = APIRouter(route_class=UfmRoute, include_in_schema=False)


def acting_uow(request: Request, who: Caller) -> UnitOfWork:
    """The app's unit of work acting as the caller (audited under its principal)."""
    uow: UnitOfWork = request.app.state.uow
    request_id = request_id_of(request.scope) or choose_request_id(None)
    return replace(uow, principal=who.principal, request_id=request_id)


async def _dologin(request: Request) -> JSONResponse:
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    password = (form.get("httpd_password") or [""])[0].strip()
    authenticator = request.app.state.ufm.authenticator
    principal = await run_in_threadpool(authenticator.principal, password) if password else None
    if principal is None:
        raise AuthenticationError(
            "httpd_password must be an isofabric token", reason="unauthenticated"
        )
    acting_principal(principal)
    uow: UnitOfWork = request.app.state.uow
    secret = await run_in_threadpool(facade_sessions.sign_in, uow, credential=password)
    fabric = request.path_params.get("fabric")
    path = f"/fabrics/{fabric}/{Style.SESSION.value}" if fabric else f"/{Style.SESSION.value}"
    response = ok({})
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=int(SESSION_LIFETIME.total_seconds()),
        path=path,
        httponly=True,
        samesite="strict",
        secure=is_https(request),
    )
    return response


LOGIN_ROUTER.add_api_route("/dologin", _dologin, methods=["POST"])
LOGIN_ROUTER.add_api_route("/fabrics/{fabric}/dologin", _dologin, methods=["POST"])


async def mint_child(request: Request, who: Caller) -> JSONResponse:
    """A new token of the caller's role and scope, its child (revoked with it)."""
    principal = who.principal
    spec = TokenCreate(
        name="ufm-token",
        role=principal.role,
        tenant=principal.tenant,
        fabric=principal.fabric,
    )
    created = await run_in_threadpool(tokens.create_token, acting_uow(request, who), spec=spec)
    return ok({"access_token": created.token, "id": created.id, "role": created.role})


def kerberos_router(bases: list[tuple[str, Style]]) -> list[APIRouter]:
    """``/ufmRestKrb`` answers 501: isofabric has no Kerberos realm to trust."""
    router = APIRouter(route_class=UfmRoute, include_in_schema=False)

    async def not_implemented(request: Request) -> JSONResponse:
        return refusal(
            501,
            "Kerberos is not supported: use /ufmRest (HTTP Basic with a token) or /ufmRestV3",
            "not-implemented",
        )

    for base, style in bases:
        if style is Style.KERBEROS:
            router.add_api_route(
                base + "/{rest:path}", not_implemented, methods=["GET", "POST", "PUT", "DELETE"]
            )
    return [router]
