"""Bearer-token authentication for /v1, checked before anything reads the request body.

Credentials are ISOFABRIC_ADMIN_TOKEN (the bootstrap operator token) or an API token minted
with `isofabric token create` / `POST /v1/tokens` (stored hashed; see tenancy/usecases/tokens.py).
The API is closed as soon as either exists: every /v1 request then needs a valid, unexpired,
unrevoked ``Authorization: Bearer <token>``. Only while no admin token is configured and no API
token was ever created is the service open: a caller on the service's own host (a loopback
client address) acts as an anonymous operator, so a fresh ``make run`` demo works without
setup, and every other caller gets 401 saying how to bootstrap. Loopback is judged by the ASGI
client address only (the TCP peer), never by X-Forwarded-For or Forwarded, which any client
can write; behind a reverse proxy every caller looks local, so open mode must be closed first.

The check runs as ASGI middleware so that an unauthenticated request is refused with 401 whatever
its body, route or method; it stores the resolved principal in the ASGI scope, where the
authorization dependency (api/deps.py) and the unit of work pick it up. Token lookups are
read-only transactions, and a bearer that cannot be a token never reaches the database.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from api.problems import domain_problem
from policies.errors import AuthenticationError
from tenancy.store.uow import Principal, UnitOfWork
from tenancy.usecases import tokens

PROTECTED_PREFIX = "/v1"
# Names every fabric: authenticated like /v1 unless ISOFABRIC_METRICS_ACCESS=open (api/metrics.py).
METRICS_PATH = "/metrics"
PRINCIPAL_SCOPE_KEY = "isofabric.principal"
ADMIN = Principal("admin-token", "operator")
ANONYMOUS = Principal("anonymous", "operator")
LOCAL_HOSTNAMES = frozenset({"localhost"})
BOOTSTRAP_HINT = (
    "set ISOFABRIC_ADMIN_TOKEN, or create the first token on the service's host "
    "(`isofabric token create --role operator --name ops`, or POST /v1/tokens from 127.0.0.1)"
)
OPEN_MODE_REFUSED = AuthenticationError(
    "this service has no token yet, so it answers only clients on its own host (open mode); "
    f"to use it from elsewhere, {BOOTSTRAP_HINT}, then send 'Authorization: Bearer <token>'"
)
NO_CREDENTIALS = AuthenticationError("this service requires 'Authorization: Bearer <token>'")
BAD_CREDENTIALS = AuthenticationError("the bearer token is not valid")


def is_loopback(host: str | None) -> bool:
    """Whether `host` (an address, or ``localhost``) is this host: 127.0.0.0/8 or ::1.

    IPv4-mapped IPv6 addresses count as their IPv4 address (a dual-stack listener reports
    ``::ffff:127.0.0.1``); a name other than ``localhost`` or no address at all does not count.
    """
    if host is None:
        return False
    if host.lower() in LOCAL_HOSTNAMES:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def client_host(scope: Scope) -> str | None:
    """The ASGI client address (the TCP peer); request headers are never consulted."""
    client = scope.get("client")
    return str(client[0]) if client else None


def forwarded_https(request: Request, trusted: Sequence[str]) -> bool:
    """Whether a trusted proxy (the TCP peer is in `trusted`) says the client used https.

    Only the scheme is taken from the proxy (X-Forwarded-Proto's first value, the one the
    client-facing proxy set); the client's address stays the TCP peer.
    """
    peer = client_host(request.scope)
    if peer is None or not _among(peer, trusted):
        return False
    proto = request.headers.get("x-forwarded-proto", "")
    return proto.split(",")[0].strip().lower() == "https"


def _among(host: str, trusted: Sequence[str]) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(e == "*" or address in ipaddress.ip_network(e, strict=False) for e in trusted)


def local_caller(scope: Scope) -> str | None:
    """The TCP peer, if the request also names this host by a loopback name (Host); else None.

    Open mode trusts a loopback peer only when it asked for a loopback host: a browser on this
    host running a page whose domain resolves to 127.0.0.1 (DNS rebinding) connects from
    loopback but sends that domain in Host, and must not act as the operator.
    """
    return client_host(scope) if is_loopback(Request(scope).url.hostname) else None


def bearer_of(request: Request) -> str:
    """The credential of the request's ``Authorization: Bearer <token>`` header; "" if none."""
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


class TokenAuthenticator:
    """Who a credential is: the one check behind the bearer header and the console's cookie.

    ISOFABRIC_ADMIN_TOKEN (compared in constant time) or an API token (tenancy/usecases/tokens.py);
    with neither configured nor ever created (open mode), a loopback client is the anonymous
    operator.
    """

    def __init__(self, token: str | None, uow: UnitOfWork) -> None:
        self.token = token.encode() if token else None
        self.uow = uow
        # Closing is one-way (an admin token is configuration; token rows are revoked, never
        # deleted), so once seen closed the check costs no query.
        self._closed = self.token is not None

    def authenticate(self, bearer: str, host: str | None) -> Principal | AuthenticationError:
        """The caller's principal, or the authentication error to answer with (blocking I/O)."""
        principal = self.principal(bearer) if bearer else None
        if principal is not None:
            return principal
        if self.is_open():
            return ANONYMOUS if is_loopback(host) else OPEN_MODE_REFUSED
        return BAD_CREDENTIALS if bearer else NO_CREDENTIALS

    def principal(self, secret: str) -> Principal | None:
        """The principal of a valid admin or API token (unexpired, unrevoked), else None."""
        if self.token is not None and hmac.compare_digest(secret.encode(), self.token):
            return ADMIN
        return tokens.authenticate(self.uow, secret=secret)

    def principal_by_hash(self, secret_sha256: str) -> Principal | None:
        """`principal` of the secret whose SHA-256 is `secret_sha256` (a stored session's)."""
        admin = tokens.hash_secret(self.token.decode()) if self.token is not None else None
        if admin is not None and hmac.compare_digest(secret_sha256, admin):
            return ADMIN
        return tokens.authenticate_hash(self.uow, secret_sha256=secret_sha256)

    def is_open(self) -> bool:
        """Whether no admin token is configured and no API token was ever created."""
        if not self._closed and tokens.tokens_exist(self.uow):
            self._closed = True
        return not self._closed


class BearerTokenAuth:
    """ASGI middleware: authenticate every /v1 request before anything reads its body.

    Once the service is closed, a request without a valid ``Authorization: Bearer <token>`` is
    refused with 401 problem+json; while it is open, only loopback clients are let in. The
    principal of every accepted request is recorded in the ASGI scope.
    """

    def __init__(self, app: ASGIApp, token: str | None, uow: UnitOfWork) -> None:
        self.app = app
        self.uow = uow
        self.authenticator = TokenAuthenticator(token, uow)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with its principal, or answer 401 without calling the app."""
        if scope["type"] != "http" or not self._protects(scope["path"]):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        bearer = bearer_of(request)
        outcome = await run_in_threadpool(
            self.authenticator.authenticate, bearer, local_caller(scope)
        )
        if isinstance(outcome, Principal):
            scope[PRINCIPAL_SCOPE_KEY] = outcome
            await self.app(scope, receive, send)
            return
        await domain_problem(request, outcome)(scope, receive, send)

    def _protects(self, path: str) -> bool:
        if path == METRICS_PATH:
            return self.uow.settings.metrics_access == "authenticated"
        return _protected(path)


def _protected(path: str) -> bool:
    return path == PROTECTED_PREFIX or path.startswith(PROTECTED_PREFIX + "/")
