"""RFC 9457 problem details: the one table that maps domain errors to HTTP, and the handlers.

Every error response of the service, including unknown routes, wrong methods, validation errors
and unexpected failures, is ``application/problem+json`` with ``type``, ``title``, ``status``,
``detail`` and ``instance``; domain errors add their extension members (e.g. counterexamples).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from api.problem_types import INTERNAL, PROBLEM_TYPES, ProblemType
from api.request_id import REQUEST_ID_HEADER, request_id_of
from policies.errors import IsofabricError, TooManyRequestsError
from tenancy.schemas.messages import in_words

PROBLEM_MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("isofabric.api")


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
        {"pointer": _pointer(item.get("loc", ())), "detail": in_words(item)}
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
