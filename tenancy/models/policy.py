"""The policy document's versions: each PUT that changes the rules adds one."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from tenancy.models.columns import ts_column, utcnow


class PolicyVersion(SQLModel, table=True):
    """One version of the internal/external operation policy; the newest one is in force.

    Versions count from 1 (0 is the built-in default, which has no row). `document` is the
    policy's canonical JSON (`policies.policy.Policy.document`), `fingerprint` its sha256: equal
    rules have equal fingerprints, so a PUT that changes nothing adds no version. Rows are never
    updated nor deleted: auditors read which rules held when.
    """

    __tablename__ = "policy_version"
    version: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    document: str
    fingerprint: str = Field(max_length=71)
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    created_by: str = Field(max_length=128)
