"""FastAPI dependencies: the unit of work, bearer-token authentication, list parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import HTTPBearer

from tenancy.pagination import DEFAULT_LIMIT, MAX_LIMIT
from tenancy.uow import UnitOfWork


def get_uow(request: Request) -> UnitOfWork:
    uow: UnitOfWork = request.app.state.uow
    return uow


Uow = Annotated[UnitOfWork, Depends(get_uow)]

# Documents the scheme in OpenAPI (/docs "Authorize"); the check itself is api/auth.py, which
# runs before the body is read.
bearer_scheme = HTTPBearer(auto_error=False, description="ISOFABRIC_ADMIN_TOKEN, when it is set")


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
