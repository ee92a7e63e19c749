"""The console's session: the sign-in cookie resolves to a principal, and CSRF tokens.

The cookie holds the API token itself (HttpOnly, SameSite=Strict, Path=/ui; Secure on https),
so a console request is authenticated by exactly the check a bearer token goes through
(api/auth.py `TokenAuthenticator`): an expired, revoked or offboarded tenant's token stops
working in the console the moment it stops working in the API, with no session table to keep
in step. In open mode (no token configured or created yet) a loopback client is the anonymous
operator, like the API, if it also names this host as a loopback name or address (Host).

CSRF: every console POST carries a hidden form field, HMAC-SHA256 keyed by the session token
over a fixed label (OWASP CSRF cheat sheet, "signed double-submit cookie"), compared in constant
time. A cross-site page cannot read it (same-origin policy), and the SameSite=Strict cookie is
not sent with a cross-site POST anyway. Open mode has no token: the key is a random secret of
this process. Sign-in, before any session exists, uses a random double-submit cookie against
login CSRF (an attacker signing a victim in as the attacker).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import StrEnum

from starlette.requests import Request
from starlette.responses import Response

from api.auth import TokenAuthenticator, client_host, forwarded_https, is_loopback
from policies.authz import MACHINE_ROLES
from policies.errors import AuthenticationError
from tenancy.store.uow import Principal, UnitOfWork

SESSION_COOKIE = "isofabric_session"
SIGN_IN_COOKIE = "isofabric_sign_in"  # the sign-in form's double-submit nonce
COOKIE_PATH = "/ui"
CSRF_FIELD = "csrf_token"
CSRF_LABEL = b"isofabric console csrf v1"


class SignInReason(StrEnum):
    """Why a request was sent to the sign-in page; the page shows a fixed message per reason."""

    REQUIRED = "required"  # no cookie
    INVALID = "invalid"  # a cookie that no longer (or never did) authenticate
    SIGNED_OUT = "signed-out"
    OPEN_MODE_REMOTE = "open-mode-remote"  # open mode, but not a loopback client


SIGN_IN_MESSAGES = {
    SignInReason.REQUIRED: "Sign in with an API token to use the console.",
    SignInReason.INVALID: "Your session ended: its token is unknown, expired or revoked. "
    "Sign in again.",
    SignInReason.SIGNED_OUT: "You are signed out.",
    SignInReason.OPEN_MODE_REMOTE: "This service has no token yet (open mode): it answers only "
    "clients on its own host. Create a token there (`isofabric token create --role operator "
    "--name ops`) and sign in with it.",
}


class SignInRequired(Exception):  # noqa: N818 - a control-flow signal, not a domain error
    """Raised by `console_principal`: answer with a redirect to the sign-in page."""

    def __init__(self, reason: SignInReason, *, clear_cookie: bool) -> None:
        super().__init__(reason.value)
        self.reason = reason
        self.clear_cookie = clear_cookie


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """Who uses the console in this request, and the CSRF token its forms must carry."""

    principal: Principal
    csrf_token: str
    open_mode: bool  # the anonymous operator of a loopback client: nothing to sign out of


class ConsoleSessions:
    """Resolves console requests to sessions; one per app (api/ui/__init__.py)."""

    def __init__(self, authenticator: TokenAuthenticator) -> None:
        self.authenticator = authenticator
        self._open_mode_key = secrets.token_bytes(32)  # changes on restart: forms reload

    def resolve(self, request: Request) -> ConsoleSession:
        """The session of `request` (blocking: may query the token table).

        Raises:
            SignInRequired: no cookie, a cookie that does not authenticate (cleared), or open
                mode from a client that is not on this host.
        """
        secret = request.cookies.get(SESSION_COOKIE, "")
        if secret:
            principal = self.authenticator.principal(secret)
            # An agent or orchestrator token acts for a machine, never in the console: sign-in
            # refuses it (pages/sign_in.py), and so does a cookie set by hand.
            if principal is not None and principal.role not in MACHINE_ROLES:
                return ConsoleSession(principal, csrf_token_for(secret.encode()), False)
        outcome = self.authenticator.authenticate("", client_host(request.scope))
        if isinstance(outcome, Principal):  # open mode, loopback: a stale cookie is ignored
            if not is_loopback(request.url.hostname):
                # A loopback client asking for another host name is a browser on this host
                # running a page of a name that resolves here (DNS rebinding): that page could
                # read the console, CSRF token included.
                raise SignInRequired(SignInReason.OPEN_MODE_REMOTE, clear_cookie=False)
            return ConsoleSession(outcome, csrf_token_for(self._open_mode_key), True)
        if secret:
            raise SignInRequired(SignInReason.INVALID, clear_cookie=True)
        if self.authenticator.is_open():
            raise SignInRequired(SignInReason.OPEN_MODE_REMOTE, clear_cookie=False)
        raise SignInRequired(SignInReason.REQUIRED, clear_cookie=False)

    def sign_in(self, secret: str) -> Principal:
        """The principal a token signs in as.

        Raises:
            AuthenticationError: the token is not valid (unknown, expired, revoked).
        """
        principal = self.authenticator.principal(secret.strip()) if secret.strip() else None
        if principal is None:
            raise AuthenticationError("the token is not valid: unknown, expired or revoked")
        return principal


def csrf_token_for(key: bytes) -> str:
    """The CSRF token of a session keyed by `key`: HMAC-SHA256 over a fixed label, hex."""
    return hmac.new(key, CSRF_LABEL, hashlib.sha256).hexdigest()


def csrf_matches(expected: str, sent: str | None) -> bool:
    """Whether the form's token is the session's, compared in constant time."""
    return sent is not None and hmac.compare_digest(expected.encode(), sent.encode())


def is_https(request: Request) -> bool:
    """Whether the client's request came over https (then the cookies are Secure).

    This server's own scheme, or what a trusted TLS-terminating proxy says of it
    (`Settings.forwarded_allow_ips`, api/auth.py `forwarded_https`).
    """
    if request.url.scheme == "https":
        return True
    uow: UnitOfWork = request.app.state.uow
    return forwarded_https(request, uow.settings.forwarded_allow_ips)


def set_session_cookie(response: Response, request: Request, secret: str) -> None:
    """Store the signed-in token: HttpOnly, SameSite=Strict, Path=/ui, Secure on https."""
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=is_https(request),
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    """Delete the session cookie (same attributes, or the browser keeps it)."""
    response.delete_cookie(
        SESSION_COOKIE,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=is_https(request),
    )


def new_sign_in_nonce() -> str:
    """A fresh nonce for the sign-in form (its CSRF field and `set_sign_in_cookie`)."""
    return secrets.token_urlsafe(32)


def set_sign_in_cookie(response: Response, request: Request, nonce: str) -> None:
    """Set the sign-in form's nonce cookie, which the POST must echo in its CSRF field."""
    response.set_cookie(
        SIGN_IN_COOKIE,
        nonce,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=is_https(request),
    )
