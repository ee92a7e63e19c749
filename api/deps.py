"""FastAPI dependencies: the unit of work, bearer-token authentication, list parameters."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, replace
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import HTTPBearer

from tenancy.pagination import DEFAULT_LIMIT, MAX_LIMIT
from tenancy.uow import Principal, UnitOfWork

REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def get_uow(request: Request) -> UnitOfWork:
    """The app's unit of work, for this request's principal and request id (audit log)."""
    uow: UnitOfWork = request.app.state.uow
    # Until the role model exists, the admin token (or an open, token-less service) is the
    # operator; the audit log says which.
    name = "admin-token" if uow.settings.admin_token else "anonymous"
    supplied = request.headers.get("x-request-id", "")
    request_id = supplied if REQUEST_ID.fullmatch(supplied) else str(uuid.uuid4())
    return replace(uow, principal=Principal(name, "operator"), request_id=request_id)


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
