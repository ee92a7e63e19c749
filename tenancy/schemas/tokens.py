"""API tokens: creation, listing and the one-time secret."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Self

from pydantic import (
    BaseModel,
    model_validator,
)

from tenancy.schemas.common import (
    Slug,
    Strict,
)

TokenRole = Literal["operator", "auditor", "billing", "tenant-admin", "tenant-viewer", "agent"]


TENANT_TOKEN_ROLES = frozenset({"tenant-admin", "tenant-viewer"})


class TokenCreate(Strict):
    """Body that mints an API token.

    The tenant roles (``tenant-admin``, ``tenant-viewer``) need a `tenant` and the global roles
    must not have one; the ``agent`` role (a deploy agent) needs a `fabric` and a `target` and
    no other role may have them. `expires_at`, if given, needs a time zone (no expiry when
    absent). A token minted with a token expires no later than that token, whatever
    `expires_at` says.
    """

    name: Slug
    role: TokenRole
    tenant: Slug | None = None
    fabric: Slug | None = None
    target: Slug | None = None
    expires_at: datetime | None = None

    @model_validator(mode="after")
    def _tenant_matches_role(self) -> Self:
        scoped = self.fabric is not None and self.target is not None
        if self.role == "agent" and not scoped:
            raise ValueError("role 'agent' needs a fabric and a target")
        if self.role != "agent" and (self.fabric is not None or self.target is not None):
            raise ValueError(f"role '{self.role}' cannot have a fabric or a target")
        if self.role in TENANT_TOKEN_ROLES and self.tenant is None:
            raise ValueError(f"role '{self.role}' needs a tenant")
        if self.role not in TENANT_TOKEN_ROLES and self.tenant is not None:
            raise ValueError(f"role '{self.role}' is global and cannot have a tenant")
        if self.expires_at is not None and self.expires_at.tzinfo is None:
            raise ValueError("expires_at needs a time zone")
        return self


class TokenView(BaseModel):
    """A token's metadata, never its secret; a revoked or expired token no longer authenticates.

    `parent` is the id of the token that minted it (null when minted with the admin token, in
    open mode or by the CLI); it expires no later than its parent and is revoked with it.
    """

    id: str
    name: str
    role: str
    tenant: str | None
    fabric: str | None = None
    target: str | None = None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    parent: str | None


class TokenCreated(BaseModel):
    """The only response that carries the secret."""

    id: str
    name: str
    role: str
    tenant: str | None
    fabric: str | None = None
    target: str | None = None
    token: str
