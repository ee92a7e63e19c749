"""API tokens: random secrets shown once, stored as SHA-256, with role, tenant, expiry, revocation.

Tokens are high-entropy (``isf_`` + 32 random bytes, URL-safe base64), so a plain SHA-256 is
enough to store them: there is nothing to brute-force.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid

from sqlmodel import col, select

from policies.errors import NotFoundError
from tenancy import audit_log
from tenancy import models as m
from tenancy.lookups import tenant_named
from tenancy.pagination import page_rows
from tenancy.schemas import Page, TokenCreate, TokenCreated, TokenView
from tenancy.uow import Principal, UnitOfWork

TOKEN_PREFIX = "isf_"


def hash_secret(secret: str) -> str:
    """The hex SHA-256 stored for a token and looked up on authentication; unsalted on purpose."""
    return hashlib.sha256(secret.encode()).hexdigest()


def token_view(row: m.ApiToken) -> TokenView:
    """The API shape of a token: its metadata, never its secret or the secret's hash."""
    return TokenView.model_validate(row, from_attributes=True)


def create_token(uow: UnitOfWork, *, spec: TokenCreate) -> TokenCreated:
    """Mint a token; the returned secret is never stored nor shown again."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with uow.transaction() as tx:
        if spec.tenant is not None:
            tenant_named(tx.session, spec.tenant)
        row = m.ApiToken(
            id=str(uuid.uuid4()),
            name=spec.name,
            role=spec.role,
            tenant=spec.tenant,
            secret_sha256=hash_secret(secret),
            created_at=tx.now,
            expires_at=spec.expires_at,
        )
        tx.session.add(row)
        tx.session.flush()
        audit_log.record(tx, "token.create", f"tokens/{row.id}")
        return TokenCreated(
            id=row.id, name=row.name, role=row.role, tenant=row.tenant, token=secret
        )


def list_tokens(
    uow: UnitOfWork, *, limit: int, cursor: str | None, tenant: str | None = None
) -> Page[TokenView]:
    """Tokens by id (never their secret); only `tenant`'s when given."""
    with uow.transaction() as tx:
        query = select(m.ApiToken)
        if tenant is not None:
            query = query.where(m.ApiToken.tenant == tenant)
        rows, total, after = page_rows(tx.session, query, col(m.ApiToken.id), limit, cursor)
        return Page(data=[token_view(r) for r in rows], count=total, next=after)


def revoke_token(uow: UnitOfWork, *, token_id: str, tenant: str | None = None) -> None:
    """Revoke a token (idempotent); with `tenant`, only a token of that tenant is visible."""
    with uow.transaction() as tx:
        row = tx.session.get(m.ApiToken, token_id)
        if row is None or (tenant is not None and row.tenant != tenant):
            raise NotFoundError(f"token '{token_id}' does not exist", resource="token")
        if row.revoked_at is None:
            row.revoked_at = tx.now
            tx.session.add(row)
            tx.session.flush()
            audit_log.record(tx, "token.revoke", f"tokens/{row.id}")


def tokens_exist(uow: UnitOfWork) -> bool:
    """Whether any token was ever created (then the API is closed to anonymous callers)."""
    with uow.transaction() as tx:
        return tx.session.exec(select(m.ApiToken.id).limit(1)).first() is not None


def authenticate(uow: UnitOfWork, *, secret: str) -> Principal | None:
    """The principal of a valid (known, unexpired, unrevoked) token secret, else None."""
    if not secret.startswith(TOKEN_PREFIX):
        return None
    with uow.transaction() as tx:
        row = tx.session.exec(
            select(m.ApiToken).where(m.ApiToken.secret_sha256 == hash_secret(secret))
        ).first()
        if row is None or row.revoked_at is not None:
            return None
        if row.expires_at is not None and row.expires_at <= tx.now:
            return None
        return Principal(f"token:{row.name}:{row.id}", row.role, row.tenant)
