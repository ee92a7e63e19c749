"""Evidence and access: audit log, signing keys, tokens, proofs, usage, idempotency keys."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from tenancy.models.columns import ts_column, utcnow


class AuditEntry(SQLModel, table=True):
    """One mutation, appended in the same transaction as the change.

    The entries, in `index` order from 0, are the leaves of the RFC 9162 Merkle tree (leaf = hash
    of the entry's RFC 8785 canonical JSON); the service never updates or deletes one.
    """

    __tablename__ = "audit_entry"
    # A change reads its fabric's previous digest: the newest entry of that fabric.
    __table_args__ = (Index("ix_audit_entry_fabric_index", "fabric", "index"),)
    index: int = Field(primary_key=True)
    time: datetime = Field(sa_column=ts_column())
    principal: str = Field(max_length=128)
    role: str = Field(max_length=32)
    action: str = Field(max_length=64)
    target: str = Field(max_length=512)
    request_id: str | None = Field(default=None, max_length=64)
    fabric: str | None = Field(default=None, max_length=63, index=True)
    digest_before: str | None = Field(default=None, max_length=71)
    digest_after: str | None = Field(default=None, max_length=71)
    leaf_hash: str = Field(max_length=64)
    # "<key name> <signature>" over the index and leaf hash (tenancy/record/audit_seal.py); not
    # part of the leaf: it is what finds an entry edited together with its leaf hash.
    seal: str | None = None


class AuditCheckpoint(SQLModel, table=True):
    """A signed tree head (C2SP signed note) over the first `size` entries."""

    __tablename__ = "audit_checkpoint"
    size: int = Field(primary_key=True)
    root_hash: str = Field(max_length=44)
    note: str
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class SigningKey(SQLModel, table=True):
    """The public halves of the service's Ed25519 keys; one is active, retired ones published.

    The private half is never stored here (it is in the key file, tenancy/store/key_store.py):
    whoever can change rows must not be able to sign.
    """

    __tablename__ = "signing_key"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=128)
    public_pem: str
    status: str = Field(default="active", max_length=16)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    # On a retired key: the key transition statement (DSSE envelope, JSON) its rotation signed
    # with it and its successor (policies/evidence/key_transition.py).
    transition: str | None = None
    # On a retired key: its bounds, {"at", "epoch", "log_size"} (policies/evidence/retirement.py).
    retirement: str | None = None


class DeployEpoch(SQLModel, table=True):
    """A manifest epoch declared after a database restore (`isofabric db restore|restored`).

    The epoch also lives in a file beside the key files (tenancy/store/epoch.py): a restore
    brings this table back to an older state, the file keeps the highest epoch declared.
    """

    __tablename__ = "deploy_epoch"
    epoch: int = Field(primary_key=True)
    declared_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class ApiToken(SQLModel, table=True):
    """An API token: only the SHA-256 of its secret is stored; the secret is shown once.

    `parent_id` is the token that minted it (null for the admin token, open mode and the CLI):
    a child expires no later than its parent and is revoked with it.
    """

    __tablename__ = "api_token"
    id: str = Field(primary_key=True, max_length=36)
    name: str = Field(max_length=63)
    role: str = Field(max_length=32)
    tenant: str | None = Field(default=None, max_length=63, index=True)
    secret_sha256: str = Field(max_length=64, unique=True, index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    expires_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    revoked_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    parent_id: str | None = Field(
        default=None, foreign_key="api_token.id", index=True, max_length=36
    )
    # The agent role: the one fabric and deploy target the token acts for; the orchestrator
    # role: its fabric (no target).
    fabric: str | None = Field(default=None, max_length=63)
    target: str | None = Field(default=None, max_length=63)


class Proof(SQLModel, table=True):
    """A signed isolation proof: a DSSE envelope over an in-toto Statement.

    `view` is whom it was issued for: ``full`` (operators, auditors) or ``tenant`` (other tenants
    counted, not named); a tenant's roles read only ``tenant`` ones. `snapshot_digest` is the
    snapshot the proof's subjects were rendered from (its predicate's): the row pins that
    snapshot's retained files (tenancy/usecases/snapshot_history.py); None only for a proof whose
    envelope named none when the column was added.
    """

    __tablename__ = "proof"
    __table_args__ = (Index("ix_proof_fabric_snapshot_digest", "fabric", "snapshot_digest"),)
    id: str = Field(primary_key=True, max_length=36)
    tenant: str = Field(max_length=63, index=True)
    fabric: str = Field(max_length=63, index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    envelope: str
    view: str = Field(default="full", max_length=8)
    snapshot_digest: str | None = Field(default=None, max_length=71)


class UsageInterval(SQLModel, table=True):
    """What a tenant held and when, the input of usage metering.

    One row per node of an allocation (with its port count) or per grant, opened and closed in the
    same transaction as the change.

    Names (QoS class, billing account, resource) are copied at opening time, so metering needs no
    joins and later renames cannot rewrite history; ``ended_at`` is null while it is held.
    """

    __tablename__ = "usage_interval"
    id: int | None = Field(default=None, primary_key=True)
    tenant_id: int = Field(foreign_key="tenant.id", index=True)
    fabric_id: int = Field(foreign_key="fabric.id", index=True)
    billing_account: str = Field(max_length=64)
    qos_class: str = Field(max_length=63)
    resource_type: str = Field(max_length=16)  # node, service
    resource: str = Field(max_length=63)
    ports: int = 0
    allocation_id: str | None = Field(default=None, foreign_key="allocation.id", index=True)
    grant_id: str | None = Field(default=None, foreign_key="grant.id", index=True)
    started_at: datetime = Field(sa_column=ts_column())
    ended_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))


class IdempotencyRecord(SQLModel, table=True):
    """A keyed POST and its first response, replayed to its retries (tenancy/record/idempotency.py).

    One per (principal, method, path, key). `status` is null while the request that claimed the
    key has no recorded response (its claim commits with its change). `fingerprint` is the
    SHA-256 of the request (media type, query, canonical body). `body` never holds a secret:
    the secret member is dropped and `secret_withheld` set, and such a response is not replayed.
    """

    __tablename__ = "idempotency_record"
    __table_args__ = (
        UniqueConstraint("principal", "method", "path", "key"),
        Index("ix_idempotency_record_created_at", "created_at"),  # the purge of expired rows
    )
    id: int | None = Field(default=None, primary_key=True)
    principal: str = Field(max_length=128)
    method: str = Field(max_length=8)
    path: str = Field(max_length=512)
    key: str = Field(max_length=255)
    fingerprint: str = Field(max_length=64)
    status: int | None = None
    body: bytes | None = None
    headers: str | None = None  # JSON object of the replayed headers (Content-Type, Location)
    secret_withheld: bool = False
    created_at: datetime = Field(sa_column=ts_column())
