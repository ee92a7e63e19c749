"""The incremental v2 digest's state (policies/digest): one row per fabric, one per group.

The commit gate keeps both in step with every change in the change's own transaction: a change
replaces the hashes of the groups it touched and adds the difference to the fabric's LtHash state,
so the current digest is one row away and a change costs what it touches.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, LargeBinary
from sqlmodel import Field, SQLModel

from tenancy.models.columns import ts_column, utcnow


class FabricDigest(SQLModel, table=True):
    """A fabric's current v2 digest, its LtHash16 state, and the last full re-verification.

    `holds` is the verdict of the committed state (always true: the gate refuses the rest); the
    incremental gate relies on it, and without a row the gate verifies the whole fabric. The
    `checked_*` columns record the last full re-verification; `alarm` is set when it did not
    reproduce the committed digest or verdict, and cleared by one that did.
    """

    __tablename__ = "fabric_digest"
    fabric_id: int = Field(foreign_key="fabric.id", primary_key=True)
    digest: str = Field(max_length=71)
    state: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    holds: bool
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    checked_at: datetime | None = Field(default=None, sa_column=ts_column(nullable=True))
    checked_digest: str | None = Field(default=None, max_length=71)
    alarm: str | None = Field(default=None, max_length=2000)


class DigestGroup(SQLModel, table=True):
    """The SHA-256 of one digest group of a fabric (``fabric``, ``node:<n>``, ``owner:<o>``)."""

    __tablename__ = "digest_group"
    fabric_id: int = Field(foreign_key="fabric.id", primary_key=True)
    key: str = Field(primary_key=True, max_length=200)
    hash: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
