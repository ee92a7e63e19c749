"""RFC 9457 problem details: the one table that maps domain errors to HTTP, and the handlers.

Every error response of the service, including unknown routes, wrong methods, validation errors
and unexpected failures, is ``application/problem+json`` with ``type``, ``title``, ``status``,
``detail`` and ``instance``; domain errors add their extension members (e.g. counterexamples).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from api.request_id import REQUEST_ID_HEADER, request_id_of
from policies.errors import (
    ArtifactHazardError,
    AuthenticationError,
    ConflictError,
    DatabaseUnavailableError,
    DisruptiveChangeError,
    ForbiddenError,
    IdempotencyInProgressError,
    IdempotencyKeyReusedError,
    InputFormatError,
    InvalidValueError,
    IsofabricError,
    IsolationViolationError,
    KeyUnavailableError,
    NotFoundError,
    NotReadyError,
    NotRetainedError,
    PatchRefusedError,
    PoolExhaustedError,
    PortMovedError,
    SecretNotReplayedError,
    TooManyRequestsError,
    UnsupportedMediaTypeError,
)

PROBLEM_MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("isofabric.api")


@dataclass(frozen=True, slots=True)
class ProblemType:
    """A problem type of the API: its slug (a stable part of the contract), status and title.

    `description` says what the problem means and what the client can do about it; it is
    published at ``/problems/<slug>`` and in the OpenAPI description (api/problem_pages.py).
    """

    slug: str
    status: int
    title: str
    description: str = ""

    @property
    def uri(self) -> str:
        """The ``type`` member: ``/problems/<slug>``."""
        # RFC 9457 §3.1.1: a URI reference; relative ones resolve against the service's base URL.
        return f"/problems/{self.slug}"


# Most specific class first: lookup walks the exception's MRO.
PROBLEM_TYPES: dict[type[IsofabricError], ProblemType] = {
    IsolationViolationError: ProblemType(
        "isolation-violation",
        409,
        "Isolation violation",
        "The change would let two tenants (or a tenant and a service it was not granted) reach "
        "each other; nothing was changed. `counterexamples` names each pair of endpoints, their "
        "owners and the segment: change the request, or the state it conflicts with.",
    ),
    PoolExhaustedError: ProblemType(
        "pool-exhausted",
        409,
        "Identifier pool exhausted",
        "No free P_Key, VLAN, L2VNI, L3VNI or subnet is left in the fabric's range (released ones "
        "are quarantined first). Offboard unused tenants or services, or wait for the quarantine.",
    ),
    PortMovedError: ProblemType(
        "port-moved",
        409,
        "Port claims another host",
        "The import moves ports (`moved`: port, from, to) to another host while either host is "
        "held. Release the host first, or correct the document if the move is a mistake.",
    ),
    IdempotencyInProgressError: ProblemType(
        "idempotency-in-progress",
        409,
        "A request with this key is in progress",
        "Another request with the same Idempotency-Key has not answered yet (or failed after "
        "committing); this one changed nothing. Retry later with the same key to get the "
        "first request's response.",
    ),
    SecretNotReplayedError: ProblemType(
        "secret-not-replayed",
        409,
        "Secret not replayed",
        "The first request with this Idempotency-Key created a token, whose secret is shown "
        "once and never stored. `token_id` names it: use the secret you received then, or "
        "revoke that token and create another with a new key.",
    ),
    PatchRefusedError: ProblemType(
        "patch-refused",
        409,
        "CONFIG_DB patch refused",
        "A SONiC CONFIG_DB patch would touch a key isofabric does not own on the leaf "
        "(`foreign`) or a declared key such as a port, a fabric-wide QoS map or a buffer "
        "(`disruptive`) without the explicit flag; nothing was applied. `refused` names each "
        "operation's path and reason: fix the leaf's foreign configuration, or allow the "
        "disruptive change in a maintenance window.",
    ),
    DisruptiveChangeError: ProblemType(
        "disruptive-change",
        409,
        "Disruptive change",
        "The patch between the two snapshots changes declared CONFIG_DB keys of the leaf "
        "(ports, fabric-wide QoS maps, schedulers, queues, buffers), which can restart swss. "
        "`paths` lists them; ask again with `allow_disruptive=true` to get them in the patch.",
    ),
    ConflictError: ProblemType(
        "conflict",
        409,
        "Conflict with current state",
        "The request contradicts the current state: a name is taken, a node is already "
        "allocated or draining, a tenant is offboarded, the placement policy leaves too few "
        "nodes. `detail` says which; read the resource, then change the request.",
    ),
    NotRetainedError: ProblemType(
        "not-retained",
        410,
        "No longer retained",
        "The resource existed but its content is no longer kept (a snapshot's artifacts beyond "
        "ISOFABRIC_SNAPSHOT_RETAIN); its digest stays in the audit log. Ask for a retained one.",
    ),
    NotFoundError: ProblemType(
        "not-found",
        404,
        "Resource not found",
        "The named resource does not exist, or the caller has no role in the tenant it belongs "
        "to (a tenant role never learns that another tenant exists). Check the name and the "
        "token's tenant.",
    ),
    InputFormatError: ProblemType(
        "invalid-document",
        422,
        "Document does not parse",
        "An uploaded document (ibnetdiscover output, a RoCE inventory, partitions.conf, a "
        "policy) does not parse; `line`, when present, is where parsing stopped. Fix the "
        "document and send it again.",
    ),
    UnsupportedMediaTypeError: ProblemType(
        "unsupported-media-type",
        415,
        "Unsupported media type",
        "The body's Content-Type does not fit the resource (JSON routes take application/json; "
        "an InfiniBand topology is ibnetdiscover text). Send the body in the format the "
        "operation documents.",
    ),
    IdempotencyKeyReusedError: ProblemType(
        "idempotency-key-reused",
        422,
        "Idempotency key used for another request",
        "The Idempotency-Key already named another request (another path, query or body) of "
        "this caller; nothing was done. Use a new key for a new request.",
    ),
    InvalidValueError: ProblemType(
        "validation-error",
        422,
        "Invalid value",
        "A parameter or body member is missing, malformed or outside what the domain allows. "
        "`errors` lists each one with a JSON pointer into the request (`/body/name`, "
        "`/query/limit`) when the request's shape is at fault; correct those values.",
    ),
    AuthenticationError: ProblemType(
        "unauthorized",
        401,
        "Authentication required",
        "The /v1 request has no valid `Authorization: Bearer <token>` (missing, unknown, "
        "expired or revoked), or the service is in open mode and the caller is not on its "
        "host. Send a valid token; `isofabric token create` makes one.",
    ),
    ForbiddenError: ProblemType(
        "forbidden",
        403,
        "Forbidden",
        "The token is valid but its role may not do this (for example a tenant-viewer "
        "changing something, or an auditor reading opensm.conf). Use a token with a role "
        "that may.",
    ),
    ArtifactHazardError: ProblemType(
        "artifact-hazard",
        500,
        "Artifact failed its safety check",
        "A rendered file failed its own safety check (for example a partitions.conf OpenSM "
        "would read as fail-open); it was not served. This is a defect of the service, not of "
        "the request: report it with the X-Request-ID.",
    ),
    DatabaseUnavailableError: ProblemType(
        "database-unavailable",
        503,
        "Database unavailable",
        "The database did not answer or failed the transaction (connection lost, server "
        "restarting, not migrated yet); the service keeps running. Retry later; /readyz says "
        "when the service can take traffic again.",
    ),
    NotReadyError: ProblemType(
        "not-ready",
        503,
        "Not ready",
        "The server cannot take traffic yet; `not_ready` names each reason (database "
        "unreachable, schema not at this version's head, a key missing). Fix those, or send "
        "traffic to another replica.",
    ),
    KeyUnavailableError: ProblemType(
        "key-unavailable",
        503,
        "Key not installed",
        "The audit signing key or the OpenSM secret is not installed, so the service cannot "
        "sign or render; `missing` lists them. An operator runs `isofabric keys create` (or "
        "copies the key files to every replica).",
    ),
    TooManyRequestsError: ProblemType(
        "too-many-requests",
        429,
        "Too many requests",
        "The caller already has as many heavy requests (topology imports, config audits) in "
        "flight as it may. Wait the Retry-After seconds, then retry.",
    ),
}
INTERNAL = ProblemType(
    "internal-error",
    500,
    "Internal server error",
    "The service failed to handle the request and changed nothing; the trace is in its log. "
    "Retry, and report it with the X-Request-ID if it persists.",
)


def problem_type_for(error: IsofabricError) -> ProblemType:
    """The problem type of the most specific class of `error` in the table; else internal-error."""
    for cls in type(error).__mro__:
        if cls in PROBLEM_TYPES:
            return PROBLEM_TYPES[cls]
    return INTERNAL


def problem_response(
    request: Request,
    status: int,
    *,
    slug: str | None = None,
    title: str | None = None,
    detail: str | None = None,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    """An RFC 9457 problem+json response; `about:blank` and the status phrase when no slug."""
    body: dict[str, Any] = {
        "type": f"/problems/{slug}" if slug else "about:blank",
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail or HTTPStatus(status).description,
        "instance": request.url.path,
        **extensions,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


async def _domain_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, IsofabricError)
    if problem_type_for(error) is INTERNAL:  # nobody mapped it: our bug, answered as any other
        return await _unexpected(request, error)
    return domain_problem(request, error)


def domain_problem(request: Request, error: IsofabricError) -> JSONResponse:
    """The problem response the table gives `error`, as the exception handlers send it.

    For code that runs outside the handlers (middleware): same status, type, title, detail,
    extensions and headers (the 401 challenge, the 429 wait).
    """
    kind = problem_type_for(error)
    return problem_response(
        request,
        kind.status,
        slug=kind.slug,
        title=kind.title,
        detail=error.detail,
        headers=_headers(kind, error),
        **error.extensions,
    )


def _headers(kind: ProblemType, error: IsofabricError) -> dict[str, str] | None:
    """The headers a problem carries: the challenge of a 401, the wait of a 429."""
    if kind.status == 401:
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(error, TooManyRequestsError):
        return {"Retry-After": str(error.retry_after)}
    return None


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    errors = [
        {"pointer": _pointer(item.get("loc", ())), "detail": item.get("msg", "invalid")}
        for item in error.errors()
    ]
    summary = "; ".join(f"{e['pointer'] or '/'}: {e['detail']}" for e in errors[:5])
    return problem_response(
        request,
        422,
        slug="validation-error",
        title="Invalid request",
        detail=summary,
        errors=errors,
    )


# Tags of discriminated request unions (POST /v1/fabrics by "kind"): pydantic puts the tag in
# the error location, but it is not a member of the document the client sent.
UNION_TAGS = frozenset({"infiniband", "roce"})


def _pointer(location: Any) -> str:
    """RFC 6901 pointer into the request ('/body/name', '/query/limit')."""
    location = list(location)
    if len(location) > 1 and location[0] == "body" and location[1] in UNION_TAGS:
        del location[1]
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in location]
    return "/" + "/".join(parts) if parts else ""


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    detail = error.detail if isinstance(error.detail, str) else None
    if error.status_code == 404 and detail == "Not Found":
        detail = f"no route matches {request.method} {request.url.path}"
    headers = dict(error.headers or {})
    if error.status_code == 405:
        # RFC 9110 §15.5.6: Allow lists every method of the resource; Starlette names only the
        # first route that matched the path.
        headers["Allow"] = ", ".join(_allowed_methods(request))
    return problem_response(request, error.status_code, detail=detail, headers=headers)


def leaf_routes(routes: Iterable[Any]) -> Iterator[Any]:
    """Every endpoint route, looking into included routers (FastAPI wraps them)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from leaf_routes(included.routes)
        else:
            yield route


def _allowed_methods(request: Request) -> list[str]:
    methods: set[str] = set()
    for route in leaf_routes(request.app.router.routes):
        route_methods = getattr(route, "methods", None)
        match, _ = route.matches({**request.scope, "method": next(iter(route_methods or {"GET"}))})
        if match is Match.FULL:
            methods |= set(route_methods or {"GET"})
    return sorted(methods)


async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    # Log the trace for operators; never send it to the client.
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    request_id = request_id_of(request.scope)
    return problem_response(
        request,
        500,
        slug=INTERNAL.slug,
        title=INTERNAL.title,
        detail="the server failed to handle the request; nothing was changed",
        # Starlette answers a 500 outside the middleware that echoes the id (api/request_id.py).
        headers={REQUEST_ID_HEADER: request_id} if request_id else None,
    )


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every error of `app` as problem+json (api/openapi_responses.py documents it)."""
    app.add_exception_handler(IsofabricError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details; domain errors add extension members.",
    "required": ["type", "title", "status", "detail", "instance"],
    "properties": {
        "type": {
            "type": "string",
            "description": "The problem type, a URI reference '/problems/<slug>' (e.g. "
            "'/problems/isolation-violation'): GET it for its meaning and what to do",
        },
        "title": {"type": "string", "description": "The problem type's short, fixed title"},
        "status": {"type": "integer", "description": "The HTTP status code of the response"},
        "detail": {"type": "string", "description": "What went wrong in this request, for people"},
        "instance": {"type": "string", "description": "The request's path"},
    },
    "additionalProperties": True,
}
PROBLEM_RESPONSE: dict[str, Any] = {
    "description": "Problem (RFC 9457)",
    "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
}
