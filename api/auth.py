"""Bearer-token authentication for /v1, checked before anything reads the request body.

While the full role model is not there, one operator token (ISOFABRIC_ADMIN_TOKEN) guards the
API when it is set. The check runs as ASGI middleware so that an unauthenticated request is
refused with 401 whatever its body, route or method.
"""

from __future__ import annotations

import hmac

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from api.problems import problem_response

PROTECTED_PREFIX = "/v1"


class BearerTokenAuth:
    """Refuse /v1 requests without ``Authorization: Bearer <token>`` (401 problem+json)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] != "http" or not _protected(scope["path"]):
            await self.app(scope, receive, send)
            return
        problem = self._problem(Request(scope))
        if problem is None:
            await self.app(scope, receive, send)
            return
        await problem(scope, receive, send)

    def _problem(self, request: Request) -> JSONResponse | None:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if (
            scheme.lower() == "bearer"
            and credentials
            and self.token is not None
            and (hmac.compare_digest(credentials.strip().encode(), self.token))
        ):
            return None
        detail = (
            "this service requires 'Authorization: Bearer <token>'"
            if not credentials
            else "the bearer token is not valid"
        )
        return problem_response(
            request,
            401,
            slug="unauthorized",
            title="Authentication required",
            detail=detail,
            headers={"WWW-Authenticate": "Bearer"},
        )


def _protected(path: str) -> bool:
    return path == PROTECTED_PREFIX or path.startswith(PROTECTED_PREFIX + "/")
