"""Who calls the UFM-compatible API, and for which fabric and tenants.

UFM's authentication styles (UFM REST API Guide, "REST API Complementary Information"), each with
an isofabric token as the secret: HTTP Basic under ``/ufmRest`` (the user name is free, the
password is the token), ``Authorization: Basic <token>`` under ``/ufmRestV3`` (UFM's access
tokens, as ufm_sdk_3.0's `ufm_rest_client.py` and NICo's `rest.rs` send them), and a session
cookie under ``/ufmRestV2`` after ``POST /dologin`` (form fields ``httpd_username`` and
``httpd_password``). Anything else is 401 with ``WWW-Authenticate: Basic``. Only orchestrator
and operator tokens act here; an orchestrator is bound to its fabric (and maybe one tenant).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from api.auth import TokenAuthenticator, local_caller
from policies.authz import Role
from policies.errors import (
    AuthenticationError,
    ForbiddenError,
    InvalidValueError,
    NotFoundError,
    TooManyRequestsError,
)
from tenancy.store.uow import Principal, UnitOfWork
from tenancy.usecases import facade_sessions
from tenancy.usecases.ufm_views import FacadeScope

SESSION_COOKIE = "isofabric_ufm_session"
NO_CREDENTIALS = AuthenticationError(
    "authentication required: HTTP Basic with an isofabric token as the password",
    reason="unauthenticated",
)
BAD_CREDENTIALS = AuthenticationError(
    "the credentials are not a valid isofabric token", reason="unauthenticated"
)


class Style(StrEnum):
    """How a base path authenticates."""

    BASIC = "ufmRest"
    SESSION = "ufmRestV2"
    TOKEN = "ufmRestV3"
    KERBEROS = "ufmRestKrb"


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller and what it acts on."""

    principal: Principal
    scope: FacadeScope

    @property
    def is_operator(self) -> bool:
        """Whether it is an operator (it sees the fabric's keys in ``app/smconf``)."""
        return self.principal.role == Role.OPERATOR


def secret_of(request: Request, style: Style) -> str:
    """The token the request carries in the style of its base path; "" if none."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if style is Style.SESSION:
        return ""  # the cookie, resolved by `caller_for`
    if scheme.lower() != "basic" or not value.strip():
        return ""
    if style is Style.TOKEN:
        return value.strip()
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return decoded.partition(":")[2]


def style_of(request: Request) -> Style:
    """The authentication style of the request's base path (its matched route's)."""
    route = request.scope.get("route")
    template = str(getattr(route, "path", request.url.path))
    for segment in template.split("/"):
        if segment in Style.__members__.values():
            return Style(segment)
    return Style.BASIC


async def current_caller(request: Request) -> Caller:
    """The dependency of every facade route: authenticate, rate-limit, find the scope."""
    authenticator: TokenAuthenticator = request.app.state.ufm.authenticator
    principal = await run_in_threadpool(_principal, request, style_of(request), authenticator)
    # Per principal (api/ufm/guard.py): a scheduler retrying in a loop cannot starve others.
    wait = request.app.state.ufm.limiter.wait_for(principal.name)
    if wait:
        raise TooManyRequestsError(
            f"too many requests from this token: retry in {wait} s",
            retry_after=wait,
            reason="rate-limited",
        )
    return Caller(principal, scope_of(request, principal))


CurrentCaller = Annotated[Caller, Depends(current_caller)]


def _principal(request: Request, style: Style, authenticator: TokenAuthenticator) -> Principal:
    if style is Style.SESSION:
        return _session_principal(request, authenticator)
    secret = secret_of(request, style)
    principal = authenticator.principal(secret) if secret else None
    if principal is None:
        outcome = authenticator.authenticate("", local_caller(request.scope))
        if secret or not isinstance(outcome, Principal):
            raise BAD_CREDENTIALS if secret else NO_CREDENTIALS
        principal = outcome  # open mode, on the service's own host
    return acting_principal(principal)


def _session_principal(request: Request, authenticator: TokenAuthenticator) -> Principal:
    uow: UnitOfWork = request.app.state.uow
    secret = request.cookies.get(SESSION_COOKIE, "")
    credential = facade_sessions.credential_of(uow, secret=secret) if secret else None
    principal = authenticator.principal_by_hash(credential) if credential else None
    if principal is None:
        raise AuthenticationError(
            "sign in first: POST /dologin with httpd_username and httpd_password (a token)",
            reason="unauthenticated",
        )
    return acting_principal(principal)


def acting_principal(principal: Principal) -> Principal:
    """`principal` if its role acts on the facade (orchestrator, operator); else 403."""
    if principal.role not in (Role.ORCHESTRATOR, Role.OPERATOR):
        raise ForbiddenError(
            f"role '{principal.role}' may not use the UFM-compatible API: use an orchestrator "
            "or operator token",
            reason="forbidden",
        )
    return principal


def scope_of(request: Request, principal: Principal) -> FacadeScope:
    """The fabric the request is about (its path's, the token's, or the configured one)."""
    asked = request.path_params.get("fabric")
    if principal.role == Role.ORCHESTRATOR:
        if asked is not None and asked != principal.fabric:
            raise NotFoundError(f"fabric '{asked}' does not exist", reason="not-found")
        assert principal.fabric is not None
        return FacadeScope(principal.fabric, principal.tenant)
    uow: UnitOfWork = request.app.state.uow
    fabric = asked or uow.settings.ufm_fabric
    if fabric is None:
        raise InvalidValueError(
            "an operator token names its fabric in the path (/fabrics/{fabric}/ufmRest…) or "
            "the service sets ISOFABRIC_UFM_FABRIC",
            reason="no-fabric",
        )
    return FacadeScope(str(fabric))


def credential_of_form(username: str, password: str) -> str:
    """The token of a ``/dologin`` form: the password (the user name is free)."""
    del username
    return password.strip()
