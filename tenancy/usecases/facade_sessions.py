"""Sessions of the UFM-compatible API's ``/dologin`` (UFM's ``/ufmRestV2`` cookie sign-in).

A session stands for the token it signed in with: the cookie's secret is random, and the
database keeps only its SHA-256 and that of the token (never either secret), so a session is
valid on every replica and a database reader can use neither. Each request authenticates the
token again: revoking or expiring it ends its sessions. Sessions last `SESSION_LIFETIME`.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from sqlmodel import col, delete

from tenancy import models as m
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.tokens import hash_secret

SESSION_LIFETIME = timedelta(hours=12)
SESSION_PREFIX = "isfs_"


def sign_in(uow: UnitOfWork, *, credential: str) -> str:
    """A new session for an authenticated `credential`; returns the cookie's secret."""
    secret = SESSION_PREFIX + secrets.token_urlsafe(32)
    with uow.transaction() as tx:
        tx.session.execute(delete(m.FacadeSession).where(col(m.FacadeSession.expires_at) < tx.now))
        tx.session.add(
            m.FacadeSession(
                id=hash_secret(secret),
                credential_sha256=hash_secret(credential),
                created_at=tx.now,
                expires_at=tx.now + SESSION_LIFETIME,
            )
        )
    return secret


def credential_of(uow: UnitOfWork, *, secret: str) -> str | None:
    """The SHA-256 of the token an unexpired session signed in with; None: no such session."""
    if not secret.startswith(SESSION_PREFIX) or len(secret) > 64:
        return None
    with uow.transaction(read_only=True) as tx:
        row = tx.session.get(m.FacadeSession, hash_secret(secret))
        if row is None or row.expires_at <= tx.now:
            return None
        return row.credential_sha256
