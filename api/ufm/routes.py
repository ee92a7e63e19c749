"""The routes of the UFM-compatible API, served under every base path UFM has.

The contract is UFM's PKey REST API as its clients call it (UFM REST API Guide, "PKey GUIDs REST
API"; docs/integrators/orchestrators.md lists each client's calls): every route with and
without a trailing slash, exactly 200 with JSON on success, UFM-shaped errors (api/ufm/wire.py).
The routes are built once per base path when this module is imported and shared by every app
(api/mounting.py); they are not part of /v1's OpenAPI document.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from api.auth import TokenAuthenticator
from api.mounting import serve_routes
from api.ufm.auth import Caller, CurrentCaller, Style
from api.ufm.guard import RateLimiter, RefusalCache, request_key
from api.ufm.sessions import LOGIN_ROUTER, acting_uow, kerberos_router, mint_child
from api.ufm.wire import UfmRoute, domain_refusal, ok, refusal
from policies.errors import InputFormatError, IsofabricError
from tenancy.schemas.ufm import (
    MANAGEMENT_PKEY,
    GuidsBody,
    HostsBody,
    PkeyBody,
    RemoveGuidsBody,
    parse_host_names,
    parse_pkey,
)
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import ufm_fabric, ufm_facade, ufm_views
from tenancy.usecases.ufm_views import FacadeScope

VERSION = {"ufm_release_version": "6.22.1", "isofabric": "ufm-compatible PKey API"}


class FacadeState:
    """What the facade keeps per app: its authenticator, refusal cache and rate limiter."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.authenticator = TokenAuthenticator(uow.settings.admin_token, uow)
        self.refusals = RefusalCache()
        self.limiter = RateLimiter()


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")


def _body(raw: bytes) -> dict[str, Any]:
    try:
        document = json.loads(raw or b"{}")
    except ValueError as error:
        raise InputFormatError(f"the body is not JSON: {error}", reason="invalid-body") from error
    if not isinstance(document, dict):
        raise InputFormatError("the body must be a JSON object", reason="invalid-body")
    return document


def _listing_headers(listing: ufm_views.PkeyListing) -> dict[str, str]:
    return {
        "X-Isofabric-Intended-Snapshot": listing.intended or "none",
        "X-Isofabric-Enforced-Snapshot": listing.enforced or "none",
    }


async def _version(_: CurrentCaller) -> JSONResponse:
    return ok(VERSION)


async def _smconf(request: Request, who: CurrentCaller) -> JSONResponse:
    uow: UnitOfWork = request.app.state.uow
    answer = await run_in_threadpool(
        ufm_fabric.sm_config, uow, fabric_name=who.scope.fabric, reveal_keys=who.is_operator
    )
    return ok(answer)


async def _list_pkeys(request: Request, who: CurrentCaller) -> JSONResponse:
    guids, qos = (
        _flag(request.query_params.get("guids_data")),
        _flag(request.query_params.get("qos_conf")),
    )
    if guids and qos:
        return refusal(400, "guids_data and qos_conf together are not supported", "query")
    listing = await _listing(request, who.scope, guids=guids, qos=qos, only=None)
    # UFM always lists the management partition (NICo reads an empty list as "not found").
    management = {"0x7fff": ufm_views.management_entry(guids=guids, qos=qos)}
    pkeys = listing.pkeys | management
    if not guids and not qos:
        pkeys = {k: {"partition": v["partition"], "ip_over_ib": v["ip_over_ib"]}
                 for k, v in pkeys.items()}  # fmt: skip
    return ok(pkeys, _listing_headers(listing))


async def _one_pkey(request: Request, pkey: str, who: CurrentCaller) -> JSONResponse:
    guids = _flag(request.query_params.get("guids_data"))
    qos = _flag(request.query_params.get("qos_conf"))
    wanted = parse_pkey(pkey)
    if wanted == MANAGEMENT_PKEY:  # readable, never writable (NICo checks it is restricted)
        return ok(ufm_views.management_entry(guids=guids, qos=qos))
    listing = await _listing(request, who.scope, guids=guids, qos=qos, only=wanted)
    # UFM answers 200 {} for a key it does not know (NICo's ufmclient/rest.rs).
    return ok(next(iter(listing.pkeys.values()), {}), _listing_headers(listing))


async def _ports(request: Request, who: CurrentCaller) -> JSONResponse:
    uow: UnitOfWork = request.app.state.uow
    computers = request.query_params.get("sys_type", "").lower() == "computer"
    answer = await run_in_threadpool(
        ufm_fabric.list_ports, uow, scope=who.scope, computers_only=computers
    )
    return ok(answer)


async def _last_updated(request: Request, who: CurrentCaller) -> JSONResponse:
    uow: UnitOfWork = request.app.state.uow
    when = await run_in_threadpool(ufm_views.last_updated, uow, fabric_name=who.scope.fabric)
    text = None if when is None else when.strftime("%a %b %e %H:%M:%S UTC %Y")
    return ok({"last_updated": text})


async def _add_guids(request: Request, who: CurrentCaller) -> JSONResponse:
    return await _write(request, who, GuidsBody, _add(replace=False))


async def _set_guids(request: Request, who: CurrentCaller) -> JSONResponse:
    return await _write(request, who, GuidsBody, _add(replace=True))


async def _create(request: Request, who: CurrentCaller) -> JSONResponse:
    return await _write(request, who, PkeyBody, ufm_facade.create_pkey)


async def _qos_conf(request: Request, who: CurrentCaller) -> JSONResponse:
    return await _write(request, who, PkeyBody, ufm_facade.set_qos)


async def _hosts(request: Request, who: CurrentCaller) -> JSONResponse:
    return await _write(request, who, HostsBody, ufm_facade.add_hosts)


async def _remove_legacy(request: Request, who: CurrentCaller) -> JSONResponse:
    return await _write(request, who, RemoveGuidsBody, _remove)


async def _remove_listed(
    request: Request, pkey: str, guids: str, who: CurrentCaller
) -> JSONResponse:
    body = {"pkey": pkey, "guids": [g for g in guids.split(",") if g]}
    return await _write(request, who, RemoveGuidsBody, _remove, body)


async def _remove_hosts(
    request: Request, pkey: str, hosts: str, who: CurrentCaller
) -> JSONResponse:
    return await _write(request, who, None, _removing_hosts(parse_pkey(pkey), hosts))


async def _delete(request: Request, pkey: str, who: CurrentCaller) -> JSONResponse:
    return await _write(request, who, None, _deleting(parse_pkey(pkey)))


async def _tokens(request: Request, who: CurrentCaller) -> JSONResponse:
    return await mint_child(request, who)


# (method, path under a base path, handler), in matching order: fixed paths before {pkey}.
ROUTES: list[tuple[str, str, Callable[..., Any]]] = [
    ("GET", "/app/ufm_version", _version),
    ("GET", "/app/smconf", _smconf),
    ("POST", "/app/tokens", _tokens),
    ("GET", "/resources/ports", _ports),
    ("GET", "/resources/pkeys", _list_pkeys),
    ("GET", "/resources/pkeys/last_updated", _last_updated),
    ("POST", "/resources/pkeys", _add_guids),
    ("PUT", "/resources/pkeys", _set_guids),
    ("POST", "/resources/pkeys/add", _create),
    ("PUT", "/resources/pkeys/qos_conf", _qos_conf),
    ("POST", "/resources/pkeys/hosts", _hosts),
    ("POST", "/actions/remove_guids_from_pkey", _remove_legacy),
    ("DELETE", "/resources/pkeys/{pkey}/guids/{guids}", _remove_listed),
    ("DELETE", "/resources/pkeys/{pkey}/hosts/{hosts}", _remove_hosts),
    ("GET", "/resources/pkeys/{pkey}", _one_pkey),
    ("DELETE", "/resources/pkeys/{pkey}", _delete),
]


def build_router(base: str) -> APIRouter:
    """The facade's routes under `base` (``/ufmRest``, ``/fabrics/{fabric}/ufmRestV3``, ...).

    Each with and without a trailing slash (ib-kubernetes sends ``/resources/pkeys/``), a GET
    also as HEAD (RFC 9110 §9.3.2; the Together fork of ib-kubernetes reads the server's clock
    from ``HEAD /ufmRest/app/ufm_version``); any other path under `base` is a UFM-shaped 404.
    """
    router = APIRouter(prefix=base, route_class=UfmRoute, include_in_schema=False)
    for method, path, handler in ROUTES:
        methods = [method, "HEAD"] if method == "GET" else [method]
        for variant in (path, path + "/"):
            router.add_api_route(variant, handler, methods=methods)
    router.add_api_route("/{rest:path}", _unknown, methods=_METHODS)
    return router


_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


async def _unknown(request: Request) -> JSONResponse:
    return refusal(404, f"no such resource: {request.method} {request.url.path}", "not-found")


async def _listing(
    request: Request, scope: FacadeScope, *, guids: bool, qos: bool, only: int | None
) -> ufm_views.PkeyListing:
    uow: UnitOfWork = request.app.state.uow
    return await run_in_threadpool(
        ufm_views.list_pkeys, uow, scope=scope, guids=guids, qos=qos, only=only
    )


Operation = Callable[..., ufm_facade.WriteOutcome]


def _add(*, replace: bool) -> Operation:
    def operation(uow: UnitOfWork, *, scope: FacadeScope, body: GuidsBody) -> Any:
        return ufm_facade.add_guids(uow, scope=scope, body=body, replace=replace)

    return operation


def _remove(uow: UnitOfWork, *, scope: FacadeScope, body: RemoveGuidsBody) -> Any:
    return ufm_facade.remove_guids(uow, scope=scope, pkey=body.pkey, guids=body.guids)


def _removing_hosts(pkey: int, hosts: str) -> Operation:
    def operation(uow: UnitOfWork, *, scope: FacadeScope, body: None) -> Any:
        guids = ufm_facade.host_guids(uow, scope=scope, hosts=parse_host_names(hosts))
        return ufm_facade.remove_guids(uow, scope=scope, pkey=pkey, guids=guids)

    return operation


def _deleting(pkey: int) -> Operation:
    def operation(uow: UnitOfWork, *, scope: FacadeScope, body: None) -> Any:
        return ufm_facade.delete_pkey(uow, scope=scope, pkey=pkey)

    return operation


async def _write(
    request: Request,
    who: Caller,
    model: type[Any] | None,
    operation: Operation,
    document: dict[str, Any] | None = None,
) -> JSONResponse:
    """Run a write: an identical refusal answered from the cache, else verified and committed."""
    state: FacadeState = request.app.state.ufm
    raw = await request.body()
    key = request_key(who.principal.name, request.method, str(request.url), raw)
    cached = state.refusals.get(key)
    if cached is not None:
        return cached
    answer = await _answer(request, who, model, operation, document if document else raw)
    if 400 <= answer.status_code < 500 and answer.status_code not in (401, 429):
        state.refusals.put(key, answer)
    return answer


async def _answer(
    request: Request,
    who: Caller,
    model: type[Any] | None,
    operation: Operation,
    source: dict[str, Any] | bytes,
) -> JSONResponse:
    uow = acting_uow(request, who)
    try:
        document = source if isinstance(source, dict) else _body(source)
        body = None if model is None else model.model_validate(document)
        outcome = await run_in_threadpool(operation, uow, scope=who.scope, body=body)
    except IsofabricError as error:
        return domain_refusal(error)
    return ok(outcome.body())


# Base paths: UFM's four, and each again under /fabrics/{fabric} for clients that take a URL.
BASES = [(f"/{style.value}", style) for style in Style] + [
    (f"/fabrics/{{fabric}}/{style.value}", style) for style in Style
]
ROUTERS = [build_router(base) for base, style in BASES if style is not Style.KERBEROS]


def install_ufm_api(app: FastAPI) -> None:
    """Serve the facade on `app`: its routes, ``/dologin`` and Kerberos' 501."""
    app.state.ufm = FacadeState(app.state.uow)
    serve_routes(app, LOGIN_ROUTER, *ROUTERS, *kerberos_router(BASES))


__all__ = ["ROUTERS", "install_ufm_api"]
