"""Bearer-token authentication for /v1, checked before anything reads the request body.

Credentials are ISOFABRIC_ADMIN_TOKEN (the bootstrap operator token) or an API token minted
with `isofabric token create` / `POST /v1/tokens` (stored hashed; see tenancy/tokens.py). The
API is closed as soon as either exists: every /v1 request then needs a valid, unexpired,
unrevoked ``Authorization: Bearer <token>``. Only while no admin token is configured and no API
token was ever created is the service open (every caller acts as an anonymous operator), so a
fresh ``make run`` demo works without setup.

The check runs as ASGI middleware so that an unauthenticated request is refused with 401 whatever
its body, route or method; it stores the resolved principal in the ASGI scope, where the
authorization dependency (api/deps.py) and the unit of work pick it up.
"""

from __future__ import annotations

import hmac

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from api.problems import problem_response
from tenancy import tokens
from tenancy.uow import Principal, UnitOfWork

PROTECTED_PREFIX = "/v1"
PRINCIPAL_SCOPE_KEY = "isofabric.principal"
ADMIN = Principal("admin-token", "operator")
ANONYMOUS = Principal("anonymous", "operator")


class BearerTokenAuth:
    """ASGI middleware: authenticate every /v1 request before anything reads its body.

    Once the service is closed, a request without a valid ``Authorization: Bearer <token>`` is
    refused with 401 problem+json; the principal of every accepted request is recorded in the
    ASGI scope.
    """

    def __init__(self, app: ASGIApp, token: str | None, uow: UnitOfWork) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.uow = uow

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with its principal, or answer 401 without calling the app."""
        if scope["type"] != "http" or not _protected(scope["path"]):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        bearer = credentials.strip() if scheme.lower() == "bearer" else ""
        principal = await run_in_threadpool(self._principal, bearer)
        if principal is not None:
            scope[PRINCIPAL_SCOPE_KEY] = principal
            await self.app(scope, receive, send)
            return
        await self._problem(request, credentials)(scope, receive, send)

    def _principal(self, bearer: str) -> Principal | None:
        if bearer and self.token is not None and hmac.compare_digest(bearer.encode(), self.token):
            return ADMIN
        if bearer:
            principal = tokens.authenticate(self.uow, secret=bearer)
            if principal is not None:
                return principal
        if self.token is None and not tokens.tokens_exist(self.uow):
            return ANONYMOUS
        return None

    @staticmethod
    def _problem(request: Request, credentials: str) -> JSONResponse:
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
