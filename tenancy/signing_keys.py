"""The service's Ed25519 signing keys (table ``signing_key``): one active, retired ones published.

The audit log's checkpoints and the isolation proofs are signed with the same active key, so
every replica signs with one key kept in the database. Rotation creates a new active key under a
new name (signed notes look keys up by name) and marks the previous one ``retired``; retired keys
stay published so that everything they signed remains verifiable.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import func
from sqlmodel import Session, col, select

from policies.evidence.audit_log import load_public_key
from policies.evidence.proofs import key_id, public_jwk
from tenancy import audit_log
from tenancy import models as m
from tenancy.schemas import PublicJWK, SigningKeysView, SigningKeyView
from tenancy.uow import UnitOfWork


def signing_key(session: Session, origin: str) -> Ed25519PrivateKey:
    """The active key, created on first use when there is none."""
    return audit_log.active_key(session, origin)[1]


def create(uow: UnitOfWork) -> SigningKeyView:
    """Create the active key unless one exists; returns its published form."""
    with uow.transaction() as tx:
        audit_log.active_key(tx.session, tx.settings.audit_origin)
        row = tx.session.exec(select(m.SigningKey).where(m.SigningKey.status == "active")).one()
        return published(row)


def rotate(uow: UnitOfWork) -> SigningKeyView:
    """Make a new active key and retire the current one (it stays published)."""
    with uow.transaction() as tx:
        origin = tx.settings.audit_origin
        for row in tx.session.exec(select(m.SigningKey).where(m.SigningKey.status == "active")):
            row.status = "retired"
            tx.session.add(row)
        count = tx.session.exec(select(func.count()).select_from(m.SigningKey)).one()
        new = audit_log._new_key(origin if count == 0 else f"{origin}.r{count + 1}")
        new.created_at = tx.now
        tx.session.add(new)
        tx.session.flush()
        # Rotation is a mutation like any other: the entry also grows the log, so the next
        # checkpoint is a new one, signed by the key now active (never the retired one).
        audit_log.record(tx, "keys.rotate", f"keys/{new.name}")
        return published(new)


def published(row: m.SigningKey) -> SigningKeyView:
    """``{"keyid", "name", "pem", "jwk", "status"}`` of a stored key (public parts only)."""
    public = load_public_key(row.public_pem)
    return SigningKeyView(
        keyid=key_id(public),
        name=row.name,
        pem=row.public_pem,
        jwk=PublicJWK.model_validate(public_jwk(public)),
        status=row.status,
    )


def list_keys(uow: UnitOfWork) -> SigningKeysView:
    """Every key, oldest first, in its published form; creates the active key if none exists."""
    with uow.transaction() as tx:
        audit_log.active_key(tx.session, tx.settings.audit_origin)
        rows = tx.session.exec(select(m.SigningKey).order_by(col(m.SigningKey.id)))
        return SigningKeysView(keys=[published(row) for row in rows])
