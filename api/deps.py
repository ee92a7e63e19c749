"""FastAPI dependencies: the principal, authorization, JSON bodies, the unit of work, lists."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from starlette.concurrency import run_in_threadpool

from api.access_rules import agent_scope_allows, decide, object_for
from api.auth import PRINCIPAL_SCOPE_KEY
from api.dry_run import dry_run_requested
from api.heavy_processes import HeavyProcesses
from api.idempotency import KEYED_REQUEST_SCOPE_KEY
from api.json_body import declared_json_body
from api.limits import HeavyWorkLimit, media_type
from api.request_id import REQUEST_ID_HEADER, choose_request_id, request_id_of
from policies.authz import GLOBAL_DOMAIN, Decision, Role
from policies.errors import (
    AuthenticationError,
    ForbiddenError,
    NotFoundError,
    UnsupportedMediaTypeError,
)
from tenancy.gate.what_if import rehearsing
from tenancy.record.idempotency import KeyedRequest
from tenancy.schemas import SLUG_PATTERN
from tenancy.store.documents import unique_members
from tenancy.store.pagination import DEFAULT_LIMIT, MAX_LIMIT
from tenancy.store.uow import Principal, UnitOfWork

SLUG = re.compile(SLUG_PATTERN)
# Routes without a tenant in their path that a tenant principal asks about its own tenant.
SELF_SCOPED = frozenset(
    {
        "/v1/tenants",
        "/v1/qos-classes",
        "/v1/tokens",
        "/v1/tokens/{token_id}",
        "/v1/proofs",
        "/v1/proofs/{proof_id}",
        "/v1/keys",
        "/v1/keys/transitions",
    }
)


# The dependencies below do no I/O: `async def` keeps FastAPI from running each one in a worker
# thread (a thread hop per dependency per request, as much CPU as the rest of a small request).


async def get_principal(request: Request) -> Principal:
    """Who asks, as resolved by the authentication middleware (api/auth.py)."""
    return _principal(request)


def _principal(request: Request) -> Principal:
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY)
    if not isinstance(principal, Principal):  # fail closed if the middleware did not run
        raise AuthenticationError("the request was not authenticated")
    return principal


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


async def get_uow(request: Request) -> UnitOfWork:
    """The app's unit of work for this request.

    It carries the principal, the request id, the Idempotency-Key reservation, and whether the
    request is a dry run (api/dry_run.py).
    """
    uow: UnitOfWork = request.app.state.uow
    supplied = request.headers.get(REQUEST_ID_HEADER)
    request_id = request_id_of(request.scope) or choose_request_id(supplied)
    keyed = request.scope.get(KEYED_REQUEST_SCOPE_KEY)
    uow = replace(
        uow,
        principal=_principal(request),
        request_id=request_id,
        first_write=keyed if isinstance(keyed, KeyedRequest) else None,
    )
    return rehearsing(uow) if dry_run_requested(request) else uow


Uow = Annotated[UnitOfWork, Depends(get_uow)]


async def heavy_work(
    request: Request, principal: CurrentPrincipal
) -> AsyncIterator[HeavyProcesses]:
    """Hold one of the principal's heavy-request slots until the handler is done (429 if none).

    Declared on the route, so it runs after authentication and authorization: a caller who may
    not use the route never takes a slot. The limit is `app.state.heavy_work` (api/app.py). It
    gives the handler the app's worker processes (api/heavy_processes.py), which only a holder
    of a slot may use.
    """
    limit: HeavyWorkLimit = request.app.state.heavy_work
    with limit.slot(principal.name):
        yield request.app.state.heavy_processes


HEAVY_WORK = Depends(heavy_work)
HeavyWork = Annotated[HeavyProcesses, HEAVY_WORK]

# Documents the scheme in OpenAPI (/docs "Authorize"); the check itself is api/auth.py, which
# runs before the body is read.
bearer_scheme = HTTPBearer(
    auto_error=False, description="ISOFABRIC_ADMIN_TOKEN or an API token (isofabric token create)"
)


def hidden_tenant(name: str) -> NotFoundError:
    """Exactly what a missing tenant looks like, so a caller cannot infer that it exists."""
    return NotFoundError(f"tenant '{name}' does not exist", resource="tenant", name=name)


async def _domain(request: Request, template: str, principal: Principal) -> str:
    tenant = request.path_params.get("tenant")
    if tenant is not None:
        if not SLUG.fullmatch(tenant):
            raise hidden_tenant(tenant)  # no tenant can have this name
        return str(tenant)
    if template == "/v1/tokens" and request.method == "POST":
        return await _body_tenant(request)
    if template in SELF_SCOPED and principal.tenant is not None:
        return principal.tenant
    return GLOBAL_DOMAIN


async def _body_tenant(request: Request) -> str:
    """The tenant a token is requested for; a global token (or a bad body) is fabric-wide."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return GLOBAL_DOMAIN
    tenant = body.get("tenant") if isinstance(body, dict) else None
    return tenant if isinstance(tenant, str) and SLUG.fullmatch(tenant) else GLOBAL_DOMAIN


async def authorize(request: Request, principal: CurrentPrincipal) -> None:
    """Enforce the RBAC policy (policies/authz.py) on the matched route and its tenant.

    403 when the principal may not do this; 404, shaped like a missing tenant, when the request
    is about a tenant in which the principal holds no role.
    """
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        raise ForbiddenError("no policy covers this request")
    domain = await _domain(request, route.path, principal)
    obj = object_for(route.path, {k: str(v) for k, v in request.path_params.items()})
    # HEAD reveals what GET does (RFC 9110 §9.3.2), so the policy decides it as GET.
    method = "GET" if request.method == "HEAD" else request.method
    decision = decide(
        f"principal:{principal.name}", principal.role, principal.tenant, domain, obj, method
    )
    if decision is Decision.HIDDEN:
        raise hidden_tenant(domain)
    if decision is Decision.FORBIDDEN:
        raise ForbiddenError(f"role '{principal.role}' may not {request.method} {route.path}")
    params = {k: str(v) for k, v in request.path_params.items()}
    if principal.role == Role.AGENT and not agent_scope_allows(
        principal.fabric, principal.deploy_target, params, route.path
    ):
        raise ForbiddenError(
            f"this agent token acts for target '{principal.deploy_target}' of fabric "
            f"'{principal.fabric}' only"
        )


# What `require_json_body` accepts, as the 415 problem's `accepted` member lists it.
JSON_MEDIA_TYPES = ("application/json", "application/*+json")


def is_json(media: str) -> bool:
    """Whether a media type (no parameters, lower-case) is JSON: application/json or */*+json."""
    maintype, _, subtype = media.partition("/")
    return maintype == "application" and (subtype == "json" or subtype.endswith("+json"))


async def require_json_body(request: Request, _: Annotated[None, Depends(authorize)]) -> None:
    """415 for a body in another format on a route whose body is a JSON document.

    FastAPI parses only JSON-typed bodies and hands anything else to pydantic as bytes, which
    fails with a 422 that never names the media type (``curl -d`` sends form encoding).
    Routes that read their body themselves (text/plain or YAML: topology, config audits) have
    no body field and keep their own rules, except a JSON document validated by the route
    (api/json_body.py), which gets this 415 as a typed body does. Runs after `authorize` (a
    sub-dependency, solved once per request), so a caller who may not use the route learns
    nothing from it.
    """
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    validates_its_own = declared_json_body(route.endpoint) is not None  # api/json_body.py
    if route.body_field is None and not validates_its_own:
        return
    received = media_type(request)
    body = await request.body()
    if is_json(received) and body and not validates_its_own:
        # A change set may be megabytes: its parse must not hold the loop. A route validating
        # its own body finds repeated members there, in a heavy worker.
        await _off_the_loop_if_large(_refuse_repeated_members, body)
    if is_json(received) or not body:
        return  # an empty body is pydantic's to report (a missing field), whatever its type
    sent = f"'Content-Type: {received}'" if received else "no Content-Type"
    raise UnsupportedMediaTypeError(
        "this route takes a JSON body: send 'Content-Type: application/json' (or an "
        f"application/*+json type); the request has {sent}",
        accepted=list(JSON_MEDIA_TYPES),
    )


def authorized_router(**options: Any) -> APIRouter:
    """An APIRouter (same `options`) for /v1 routes: each is authorized, then JSON-only.

    Every route it declares authenticates the bearer token (documented in OpenAPI), is
    authorized against the RBAC policy (`authorize`), and refuses a JSON body sent as another
    type (`require_json_body`). The dependencies are the router's own, not added when an app
    includes it, so its routes are complete when the module is imported (api/mounting.py).
    """
    return APIRouter(
        dependencies=[Depends(bearer_scheme), Depends(authorize), Depends(require_json_body)],
        **options,
    )


# Parsing this much JSON takes well under a millisecond: not worth a worker thread's hand-off.
SMALL_BODY_BYTES = 16 * 1024


async def _off_the_loop_if_large(check: Callable[[bytes], None], body: bytes) -> None:
    if len(body) <= SMALL_BODY_BYTES:
        check(body)
    else:
        await run_in_threadpool(check, body)


def _refuse_repeated_members(body: bytes) -> None:
    """422 for a JSON body naming a member twice (``{"max_nodes": 1, "max_nodes": null}``).

    The JSON parser keeps the last value silently, so the change made would not be the one the
    client's other tools read. A body that does not parse is left to FastAPI's own problem.
    """
    try:
        json.loads(body, object_pairs_hook=unique_members)
    except (ValueError, RecursionError):
        return  # InputFormatError is not a ValueError: a repeated name propagates


@dataclass(frozen=True, slots=True)
class ListParams:
    """The page size and the cursor of a list request."""

    limit: int
    cursor: str | None


async def list_params(
    limit: Annotated[
        int,
        Query(
            ge=1,
            le=MAX_LIMIT,
            description=f"Page size: the most items in `data`, 1 to {MAX_LIMIT} "
            f"(default {DEFAULT_LIMIT})",
        ),
    ] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        Query(
            max_length=512,
            description="Where to resume: the opaque `next` of the previous page, as given; "
            "omitted for the first page",
        ),
    ] = None,
) -> ListParams:
    """The `limit` and `cursor` query parameters every list endpoint takes."""
    return ListParams(limit, cursor)


Listing = Annotated[ListParams, Depends(list_params)]
