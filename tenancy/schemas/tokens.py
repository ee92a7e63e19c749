"""API tokens: creation, listing and the one-time secret."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Self

from pydantic import (
    BaseModel,
    Field,
    model_validator,
)

from tenancy.schemas.common import (
    Slug,
    Strict,
)

TokenRole = Literal[
    "operator", "auditor", "billing", "tenant-admin", "tenant-viewer", "agent", "orchestrator"
]


TENANT_TOKEN_ROLES = frozenset({"tenant-admin", "tenant-viewer"})
ROLES = (
    "'operator', 'auditor', 'billing', 'tenant-admin', 'tenant-viewer', 'agent' (a deploy agent) "
    "or 'orchestrator' (a scheduler on the UFM-compatible API, bound to one fabric)"
)
# Roles bound to one fabric: `agent` (and a deploy target), `orchestrator` (and maybe a tenant).
FABRIC_ROLES = frozenset({"agent", "orchestrator"})


class TokenCreate(Strict):
    """Body that mints an API token.

    The tenant roles (``tenant-admin``, ``tenant-viewer``) need a `tenant` and the global roles
    must not have one; the ``agent`` role (a deploy agent) needs a `fabric` and a `target` and
    no other role may have them; the ``orchestrator`` role needs a `fabric`, may have a `tenant`
    (it then acts for that tenant alone) and has no target. `expires_at`, if given, needs a time
    zone (no expiry when absent). A token minted with a token expires no later than that token,
    whatever `expires_at` says.
    """

    name: Slug = Field(description="A name for people, e.g. 'ci-deploy' (need not be unique)")
    role: TokenRole = Field(description=ROLES)
    tenant: Slug | None = Field(
        default=None,
        description="The tenant of a tenant role, or of an orchestrator acting for one tenant; "
        "null for the global roles",
    )
    fabric: Slug | None = Field(
        default=None,
        description="The fabric of the agent and orchestrator roles; null for every other role",
    )
    target: Slug | None = Field(
        default=None, description="The agent role's deploy target; null for every other role"
    )
    expires_at: datetime | None = Field(
        default=None,
        description="When it stops working, RFC 3339 with a time zone; null: never (but no "
        "later than the token that mints it)",
    )

    @model_validator(mode="after")
    def _tenant_matches_role(self) -> Self:
        self._fabric_matches_role()
        if self.role in TENANT_TOKEN_ROLES and self.tenant is None:
            raise ValueError(f"role '{self.role}' needs a tenant")
        free_tenant = TENANT_TOKEN_ROLES | {"orchestrator"}
        if self.role not in free_tenant and self.tenant is not None:
            raise ValueError(f"role '{self.role}' is global and cannot have a tenant")
        if self.expires_at is not None and self.expires_at.tzinfo is None:
            raise ValueError("expires_at needs a time zone")
        return self

    def _fabric_matches_role(self) -> None:
        if self.role == "agent" and (self.fabric is None or self.target is None):
            raise ValueError("role 'agent' needs a fabric and a target")
        if self.role == "orchestrator" and (self.fabric is None or self.target is not None):
            raise ValueError("role 'orchestrator' needs a fabric and has no target")
        if self.role not in FABRIC_ROLES and (self.fabric is not None or self.target is not None):
            raise ValueError(f"role '{self.role}' cannot have a fabric or a target")


class TokenView(BaseModel):
    """A token's metadata, never its secret; a revoked or expired token no longer authenticates.

    `parent` is the id of the token that minted it (null when minted with the admin token, in
    open mode or by the CLI); it expires no later than its parent and is revoked with it.
    """

    id: str = Field(description="The token's id, a UUID (not its secret)")
    name: str = Field(description="Its name")
    role: str = Field(description=ROLES)
    tenant: str | None = Field(
        description="The tenant of a tenant role or of a tenant's orchestrator; null otherwise"
    )
    fabric: str | None = Field(
        default=None, description="The fabric of an agent or orchestrator; null otherwise"
    )
    target: str | None = Field(
        default=None, description="The agent's deploy target; null otherwise"
    )
    created_at: datetime = Field(description="When it was minted, RFC 3339 UTC")
    expires_at: datetime | None = Field(
        description="When it stops working, RFC 3339 UTC; null: never"
    )
    revoked_at: datetime | None = Field(
        description="When it was revoked, RFC 3339 UTC; null while not revoked"
    )
    parent: str | None = Field(
        description="Id of the token that minted it (or that reissued it); null when minted "
        "without a token. Revoking the parent revokes this token too"
    )


class TokenCreated(BaseModel):
    """The only response that carries the secret."""

    id: str = Field(description="The token's id, a UUID: revoke it with DELETE /v1/tokens/{id}")
    name: str = Field(description="Its name")
    role: str = Field(description=ROLES)
    tenant: str | None = Field(
        description="The tenant of a tenant role or of a tenant's orchestrator; null otherwise"
    )
    fabric: str | None = Field(
        default=None, description="The fabric of an agent or orchestrator; null otherwise"
    )
    target: str | None = Field(
        default=None, description="The agent's deploy target; null otherwise"
    )
    token: str = Field(
        description="The secret, 'isf_' and 43 URL-safe characters: send it as "
        "'Authorization: Bearer <token>'. Shown this once; only a hash is stored"
    )
