"""API tokens: random secrets shown once, stored as SHA-256, with role, tenant, expiry, revocation.

Tokens are high-entropy (``isf_`` + 32 random bytes, URL-safe base64), so a plain SHA-256 is
enough to store them: there is nothing to brute-force.

A token minted by a request that authenticated with a token is that token's child, and never
outlives it: its expiry is capped at its parent's and revoking a token revokes its descendants.
Otherwise an expiring token, or one about to be revoked, could mint a lasting one. Tokens
minted with ISOFABRIC_ADMIN_TOKEN, in open mode or by the CLI have no parent. A tenant's tokens
are revoked when it is offboarded, and no token of an offboarded tenant authenticates.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import bindparam
from sqlmodel import Session, col, select

from policies.errors import AuthenticationError, ConflictError, NotFoundError
from policies.model import FabricKind
from tenancy import models as m
from tenancy.record import audit_log
from tenancy.schemas import Page, TokenCreate, TokenCreated, TokenView
from tenancy.store.locks import lock_active_tenant, lock_token_lineage
from tenancy.store.lookups import fabric_named, target_named
from tenancy.store.pagination import page_rows
from tenancy.store.uow import Principal, Tx, UnitOfWork

TOKEN_PREFIX = "isf_"
# What `create_token` mints: the prefix and 32 random bytes as unpadded URL-safe base64.
TOKEN_SHAPE = re.compile(re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]{43}")


def hash_secret(secret: str) -> str:
    """The hex SHA-256 stored for a token and looked up on authentication; unsalted on purpose."""
    return hashlib.sha256(secret.encode()).hexdigest()


def token_view(row: m.ApiToken) -> TokenView:
    """The API shape of a token: its metadata, never its secret or the secret's hash."""
    return TokenView(
        id=row.id,
        name=row.name,
        role=row.role,
        tenant=row.tenant,
        fabric=row.fabric,
        target=row.target,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        parent=row.parent_id,
    )


def principal_of(row: m.ApiToken) -> Principal:
    """Who a token authenticates: its name carries the token id (see `token_id_of`)."""
    return Principal(f"token:{row.name}:{row.id}", row.role, row.tenant, row.fabric, row.target)


def token_id_of(principal: Principal) -> str | None:
    """The id of the token `principal` authenticated with; None for any other principal."""
    kind, _, rest = principal.name.partition(":")
    return rest.rpartition(":")[2] if kind == "token" else None


def create_token(uow: UnitOfWork, *, spec: TokenCreate) -> TokenCreated:
    """Mint a token; the returned secret is never stored nor shown again.

    Minted by a token, it is that token's child and expires no later than it.

    Raises:
        NotFoundError: the tenant of a tenant token does not exist.
        ConflictError: that tenant is offboarded.
        AuthenticationError: the minting token was revoked or expired meanwhile.
    """
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with uow.transaction() as tx:
        if spec.tenant is not None:
            # Under the tenant's lock: an offboarding that revokes the tenant's tokens either
            # sees this one or is seen by it.
            lock_active_tenant(tx.session, spec.tenant)
        _check_scope(tx.session, spec)
        lock_token_lineage(tx.session)  # the parent cannot be revoked until this one is seen
        parent = _live_parent(tx.session, tx.principal, tx.now)
        row = m.ApiToken(
            id=str(uuid.uuid4()),
            name=spec.name,
            role=spec.role,
            tenant=spec.tenant,
            fabric=spec.fabric,
            target=spec.target,
            secret_sha256=hash_secret(secret),
            created_at=tx.now,
            expires_at=_capped_expiry(spec.expires_at, parent),
            parent_id=None if parent is None else parent.id,
        )
        tx.session.add(row)
        tx.session.flush()
        audit_log.record(tx, "token.create", f"tokens/{row.id}")
        return TokenCreated(
            id=row.id,
            name=row.name,
            role=row.role,
            tenant=row.tenant,
            fabric=row.fabric,
            target=row.target,
            token=secret,
        )


def _check_scope(session: Session, spec: TokenCreate) -> None:
    """The token's fabric (and deploy target) exist; an orchestrator's fabric is InfiniBand."""
    if spec.fabric is None:
        return
    fabric = fabric_named(session, spec.fabric)
    if spec.target is not None:
        target_named(session, fabric, spec.target)
    if spec.role == "orchestrator" and fabric.kind != FabricKind.INFINIBAND:
        raise ConflictError(
            f"fabric '{fabric.name}' is RoCE: an orchestrator drives InfiniBand partitions",
            fabric=fabric.name,
        )


def list_tokens(
    uow: UnitOfWork, *, limit: int, cursor: str | None, tenant: str | None = None
) -> Page[TokenView]:
    """Tokens by id (never their secret); only `tenant`'s when given."""
    with uow.transaction(read_only=True) as tx:
        query = select(m.ApiToken)
        if tenant is not None:
            query = query.where(m.ApiToken.tenant == tenant)
        rows, total, after = page_rows(tx.session, query, col(m.ApiToken.id), limit, cursor)
        return Page(data=[token_view(r) for r in rows], count=total, next=after)


def _live_parent(session: Session, principal: Principal, now: datetime) -> m.ApiToken | None:
    """The token the request authenticated with, re-read under the lineage lock, if any."""
    token_id = token_id_of(principal)
    if token_id is None:
        return None  # ISOFABRIC_ADMIN_TOKEN, open mode, the CLI: the root of a lineage
    parent = session.get(m.ApiToken, token_id, populate_existing=True)
    if parent is None or not _usable(parent, now):
        raise AuthenticationError(
            "the token this request was made with was revoked or expired meanwhile"
        )
    return parent


def _usable(row: m.ApiToken, now: datetime) -> bool:
    return row.revoked_at is None and (row.expires_at is None or row.expires_at > now)


def _capped_expiry(requested: datetime | None, parent: m.ApiToken | None) -> datetime | None:
    """`requested`, but no later than the parent's expiry (no expiry stands for the latest)."""
    limit = None if parent is None else parent.expires_at
    if limit is None:
        return requested
    return limit if requested is None else min(requested, limit)


def revoke_token(uow: UnitOfWork, *, token_id: str, tenant: str | None = None) -> None:
    """Revoke a token and its descendants (idempotent); with `tenant`, only that tenant's.

    A token of another tenant is a 404, as if it did not exist.
    """
    with uow.transaction() as tx:
        lock_token_lineage(tx.session)  # no child is being minted under it meanwhile
        row = tx.session.get(m.ApiToken, token_id)
        if row is None or (tenant is not None and row.tenant != tenant):
            raise NotFoundError(f"token '{token_id}' does not exist", resource="token")
        revoke_lineages(tx, [row])


def reissue_token(uow: UnitOfWork, *, token_id: str) -> TokenView:
    """Re-parent token `token_id` under the caller's own token, keeping its secret and role.

    A token is revoked with the token that minted it (`revoke_lineages`). An operator about to
    revoke its own credential first reissues the agent (or other) tokens minted with it under
    its new one, so that no agent stops. Under the admin token, open mode or the command line
    the token becomes a root. Its expiry is capped at its new parent's, as at creation.

    Raises:
        NotFoundError: no token has this id (404).
        ConflictError: it is revoked or expired, or it is the caller's own token or one the
            caller's token descends from (a lineage cannot loop) (409).
    """
    with uow.transaction() as tx:
        lock_token_lineage(tx.session)
        row = tx.session.get(m.ApiToken, token_id, populate_existing=True)
        if row is None:
            raise NotFoundError(f"token '{token_id}' does not exist", resource="token")
        if not _usable(row, tx.now):
            raise ConflictError(f"token '{token_id}' is revoked or expired: create a new one")
        parent = _live_parent(tx.session, tx.principal, tx.now)
        if parent is not None and row.id in _lineage(tx.session, parent):
            raise ConflictError(
                f"token '{token_id}' is the token of this request or one it descends from: "
                "reissue it with another operator's token"
            )
        row.parent_id = None if parent is None else parent.id
        row.expires_at = _capped_expiry(row.expires_at, parent)
        tx.session.add(row)
        tx.session.flush()
        audit_log.record(tx, "token.reissue", f"tokens/{row.id}")
        return token_view(row)


def _lineage(session: Session, token: m.ApiToken) -> set[str]:
    """`token`'s id and the ids of every token it descends from."""
    ids = {token.id}
    parent_id = token.parent_id
    while parent_id is not None and parent_id not in ids:
        ids.add(parent_id)
        above = session.get(m.ApiToken, parent_id)
        parent_id = None if above is None else above.parent_id
    return ids


def revoke_tenant_tokens(tx: Tx, tenant: str) -> None:
    """Revoke every token of `tenant` and their descendants (offboarding).

    The caller holds the tenant's lock exclusively, so no token of the tenant is being minted.
    """
    lock_token_lineage(tx.session)
    query = select(m.ApiToken).where(
        m.ApiToken.tenant == tenant, col(m.ApiToken.revoked_at).is_(None)
    )
    revoke_lineages(tx, list(tx.session.exec(query)))


def revoke_lineages(tx: Tx, roots: Sequence[m.ApiToken]) -> None:
    """Revoke `roots` and all their descendants, generation by generation; each one audited.

    Already revoked tokens keep their time, and their descendants are still walked, so a
    lineage is revoked whole whatever was revoked in it before. The caller holds the lineage
    lock (`lock_token_lineage`).
    """
    generation = list(roots)
    while generation:
        for row in generation:
            if row.revoked_at is None:
                row.revoked_at = tx.now
                tx.session.add(row)
                tx.session.flush()
                audit_log.record(tx, "token.revoke", f"tokens/{row.id}")
        parents = [row.id for row in generation]
        generation = list(
            tx.session.exec(select(m.ApiToken).where(col(m.ApiToken.parent_id).in_(parents)))
        )


def revoke_agent_tokens(tx: Tx, *, fabric: str, target: str) -> None:
    """Revoke the agent tokens of a deploy target that is being removed, and their lineages."""
    lock_token_lineage(tx.session)
    query = select(m.ApiToken).where(
        m.ApiToken.role == "agent",
        m.ApiToken.fabric == fabric,
        m.ApiToken.target == target,
        col(m.ApiToken.revoked_at).is_(None),
    )
    revoke_lineages(tx, list(tx.session.exec(query)))


def tokens_exist(uow: UnitOfWork) -> bool:
    """Whether any token was ever created (then the API is closed to anonymous callers)."""
    with uow.transaction(read_only=True) as tx:
        return tx.session.exec(select(m.ApiToken.id).limit(1)).first() is not None


def authenticate(uow: UnitOfWork, *, secret: str) -> Principal | None:
    """The principal of a valid (known, unexpired, unrevoked) token secret, else None.

    A secret that cannot be a token is refused without a database query, and the lookup is a
    read-only transaction: a flood of bad tokens never takes the database's write lock.
    """
    if not TOKEN_SHAPE.fullmatch(secret):
        return None
    return authenticate_hash(uow, secret_sha256=hash_secret(secret))


def authenticate_hash(uow: UnitOfWork, *, secret_sha256: str) -> Principal | None:
    """`authenticate` by the stored hash of a secret (a UFM API session keeps only that)."""
    with uow.transaction(read_only=True) as tx:
        row = tx.session.exec(_TOKEN, params={"secret": secret_sha256}).first()
        if row is None or not _usable(row, tx.now):
            return None
        if row.tenant is not None and not _tenant_active(tx.session, row.tenant):
            # Offboarding revokes the tenant's tokens; this also refuses those of tenants
            # offboarded before it did.
            return None
        if row.role == "agent" and not _target_exists(tx.session, row.fabric, row.target):
            return None  # its target was removed (and the token revoked with it)
        return principal_of(row)


def _tenant_active(session: Session, name: str) -> bool:
    status = session.exec(_TENANT_STATUS, params={"name": name}).first()
    return status == "active"


def _target_exists(session: Session, fabric: str | None, target: str | None) -> bool:
    found = session.exec(_TARGET, params={"fabric": fabric, "target": target}).first()
    return found is not None


# Built once: every authenticated request runs them.
_TOKEN = select(m.ApiToken).where(m.ApiToken.secret_sha256 == bindparam("secret"))
_TENANT_STATUS = select(m.Tenant.status).where(m.Tenant.name == bindparam("name"))
_TARGET = (
    select(m.DeployTarget.id)
    .join(m.Fabric, col(m.Fabric.id) == col(m.DeployTarget.fabric_id))
    .where(m.Fabric.name == bindparam("fabric"), m.DeployTarget.name == bindparam("target"))
)
