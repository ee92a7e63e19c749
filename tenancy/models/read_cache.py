"""The read cache shared by replicas: verdicts and rendered files kept in the database."""

from __future__ import annotations

from sqlalchemy import Column, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel


class CachedRead(SQLModel, table=True):
    """One file of a read-cache entry: a verdict's JSON or a rendered artifact (PostgreSQL).

    Keyed as the in-process entry is (tenancy/store/read_cache.py `ReadKey`): fabric, the digest of
    the snapshot it was computed from, the fingerprint of code and render inputs; `name` is the
    file's path. `content` is zlib-compressed, and `sealed` when the inputs are secret (AES-GCM,
    tenancy/record/read_cache_store.py). Rows are a cache: deleting any of them loses nothing.
    """

    __tablename__ = "cached_read"
    __table_args__ = (UniqueConstraint("fabric_id", "digest", "inputs", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    fabric_id: int = Field(foreign_key="fabric.id")
    # Opaque to the cache: whatever the snapshot log records (a v2 digest today).
    digest: str = Field(max_length=255)
    inputs: str = Field(max_length=64)
    name: str = Field(max_length=255)
    sha256: str = Field(max_length=64)
    sealed: bool
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
