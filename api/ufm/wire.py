"""How the UFM-compatible API answers: exactly 200 with JSON on success, UFM-shaped errors.

UFM's clients compare the status with 200 (ib-kubernetes `pkg/drivers/http/client.go`), so every
success is 200 with a JSON body (``{}`` where UFM sends nothing). A refusal is a JSON object with
``error`` (what was wrong, in words), ``status`` and ``reason`` (a stable code, also the label of
the refusal counter in /metrics); its status is the API's own (api/problem_types.py) except that
a refused request is 400 where /v1 says 409 or 422, as UFM answers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError

from api.problems import problem_type_for
from policies.errors import AuthenticationError, IsofabricError, TooManyRequestsError

log = logging.getLogger("isofabric.api.ufm")
# Statuses UFM's clients know; /v1's 409 and 422 are UFM's 400.
_AS_UFM = {409: 400, 422: 400}
# The first path segment of the facade's routes (or the third, under /fabrics/{fabric}).
_FACADE_SEGMENTS = frozenset({"ufmRest", "ufmRestV2", "ufmRestV3", "ufmRestKrb", "dologin"})


def is_facade_path(path: str) -> bool:
    """Whether `path` is the facade's: under a UFM base path or /dologin, maybe per fabric."""
    parts = path.split("/")
    if len(parts) > 1 and parts[1] in _FACADE_SEGMENTS:
        return True
    return len(parts) > 3 and parts[1] == "fabrics" and parts[3] in _FACADE_SEGMENTS


def too_large(limit: int) -> JSONResponse:
    """A body over the service's size limit (api/limits.py), in UFM's shape."""
    return refusal(413, f"request body exceeds {limit} bytes", "body-too-large")


def ok(body: Any = None, headers: dict[str, str] | None = None) -> JSONResponse:
    """200 with `body` (``{}`` when None)."""
    return JSONResponse({} if body is None else body, status_code=200, headers=headers)


def refusal(
    status: int, message: str, reason: str, headers: dict[str, str] | None = None, **more: Any
) -> JSONResponse:
    """A UFM-shaped error answer."""
    body = {"error": message, "status": status, "reason": reason, **more}
    return JSONResponse(body, status_code=status, headers=headers)


def domain_refusal(error: IsofabricError) -> JSONResponse:
    """The answer to a domain error, its status from the one mapping table."""
    kind = problem_type_for(error)
    status = _AS_UFM.get(kind.status, kind.status)
    extensions = dict(error.extensions)
    reason = str(extensions.pop("reason", kind.slug))
    headers = _headers(error)
    return refusal(status, error.detail, reason, headers, **extensions)


def _headers(error: IsofabricError) -> dict[str, str] | None:
    if isinstance(error, AuthenticationError):
        return {"WWW-Authenticate": 'Basic realm="ufm"'}
    if isinstance(error, TooManyRequestsError):
        return {"Retry-After": str(error.retry_after)}
    return None


def invalid_body(error: ValidationError) -> JSONResponse:
    """A body that does not validate: the first problem, in words."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "body"
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    return refusal(400, f"{where}: {message}", "invalid-body")


class UfmRoute(APIRoute):
    """A facade route: whatever it raises is answered in UFM's shape, never as problem+json."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The handler, wrapped so that its errors and its dependencies' are UFM-shaped."""
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                response = await handler(request)
            except IsofabricError as error:
                response = domain_refusal(error)
            except ValidationError as error:
                response = invalid_body(error)
            except RequestValidationError as error:
                response = refusal(400, str(error.errors()[0].get("msg")), "invalid-query")
            except HTTPException as error:
                reason = "body-too-large" if error.status_code == 413 else "http"
                response = refusal(error.status_code, str(error.detail), reason)
            note_refusal(request, response)
            return response

        return answer


def note_refusal(request: Request, response: Response) -> None:
    """Count a refused request by reason in /metrics (`isofabric_ufm_refusals`)."""
    if response.status_code < 400 or not isinstance(response, JSONResponse):
        return
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is None:
        return
    reason = json.loads(bytes(response.body)).get("reason", "unknown")
    metrics.ufm_refusals.labels(str(reason)).inc()
