"""FastAPI dependencies: the unit of work, bearer-token authentication, list parameters."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from policies.errors import AuthenticationError
from tenancy.pagination import DEFAULT_LIMIT, MAX_LIMIT
from tenancy.uow import UnitOfWork


def get_uow(request: Request) -> UnitOfWork:
    uow: UnitOfWork = request.app.state.uow
    return uow


Uow = Annotated[UnitOfWork, Depends(get_uow)]

_bearer = HTTPBearer(auto_error=False, description="ISOFABRIC_ADMIN_TOKEN, when it is set")


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """When ISOFABRIC_ADMIN_TOKEN is set, every /v1 request must carry it as a bearer token."""
    expected = request.app.state.uow.settings.admin_token
    if expected is None:
        return
    if credentials is None:
        raise AuthenticationError("this service requires 'Authorization: Bearer <token>'")
    if not hmac.compare_digest(credentials.credentials.encode(), expected.encode()):
        raise AuthenticationError("the bearer token is not valid")


@dataclass(frozen=True, slots=True)
class ListParams:
    limit: int
    cursor: str | None


def list_params(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Page size")] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=512, description="From a 'next' field")] = None,
) -> ListParams:
    return ListParams(limit, cursor)


Listing = Annotated[ListParams, Depends(list_params)]
