"""The read cache shared by replicas: entries kept in PostgreSQL (table cached_read).

Replicas behind a load balancer see the same committed states, so the first one to compute a
state's verdict or files stores the bytes and the others load them (one query and a
decompression) instead of loading, verifying and rendering the fabric once each. On SQLite the
service is one process, and the in-process cache (tenancy/store/read_cache.py) is the whole cache.

Files rendered from secret inputs are sealed (tenancy/store/sealing.py) under a key derived from
those very inputs: opensm.conf carries the subnet manager keys, which a database reader must not
learn (tenancy/record/subnet_manager.py), and such a reader holds neither the keys nor the
OpenSM secret.
Only the current state of a fabric is kept: storing it drops the fabric's other states. Storing
is best effort: a read never fails because the cache could not be written.
"""

from __future__ import annotations

import dataclasses
import logging
import zlib

from sqlalchemy import delete, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select

from policies.errors import ConflictError
from tenancy import models as m
from tenancy.record import snapshot_log
from tenancy.store import sealing
from tenancy.store.read_cache import CachedFile, Entry, ReadKey
from tenancy.store.uow import UnitOfWork

log = logging.getLogger("isofabric")

# A read that stores waits at most this long for a lock (another replica storing the same
# state); then it gives up, and the state is stored by a later read.
_LOCK_TIMEOUT = "1s"


def shared(uow: UnitOfWork) -> bool:
    """Whether the database is shared by replicas (PostgreSQL), so that entries are kept in it."""
    return uow.engine.dialect.name == "postgresql"


def load(session: Session, key: ReadKey, seal: bytes | None) -> Entry | None:
    """The stored entry of `key`, every file checked against its sha256; None if any is amiss.

    A file that does not open (sealed under other inputs, altered) or whose bytes do not hash
    to the stored sha256 makes the entry a miss: the reader computes it again.
    """
    query = select(m.CachedRead).where(
        m.CachedRead.fabric_id == key.fabric_id,
        m.CachedRead.digest == key.digest,
        m.CachedRead.inputs == key.inputs,
    )
    files = []
    for row in session.exec(query.order_by(col(m.CachedRead.name))):
        content = _opened(row, seal)
        file = CachedFile.of(row.name, content) if content is not None else None
        if file is None or file.sha256 != row.sha256:
            log.warning("read cache: stored file %s of fabric %s is unusable", row.name, key)
            return None
        files.append(file)
    return Entry(key.digest, tuple(files)) if files else None


def store(uow: UnitOfWork, key: ReadKey, entry: Entry, seal: bytes | None) -> None:
    """Keep `entry` for the other replicas if `key` names the fabric's current state.

    A state that is no longer current is not stored (nor are the current one's rows dropped
    for it); storing the current one drops the fabric's rows of every other state. Failures are
    logged, never raised: the entry stays in this replica's memory all the same.
    """
    try:
        # A separate write transaction, even inside a keyed request: no Idempotency-Key claim.
        with dataclasses.replace(uow, first_write=None).transaction() as tx:
            tx.session.execute(text(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'"))
            newest = snapshot_log.latest(tx.session, key.fabric_id)
            if newest is None or newest.digest != key.digest:
                return
            _replace_rows(tx.session, key, entry, seal)
    except (SQLAlchemyError, ConflictError) as error:
        log.warning("read cache: could not store %s: %s", key, error)


def _replace_rows(session: Session, key: ReadKey, entry: Entry, seal: bytes | None) -> None:
    others = col(m.CachedRead.fabric_id) == key.fabric_id, col(m.CachedRead.digest) != key.digest
    session.execute(delete(m.CachedRead).where(*others))
    rows = [
        {
            "fabric_id": key.fabric_id,
            "digest": key.digest,
            "inputs": key.inputs,
            "name": file.path,
            "sha256": file.sha256,
            "sealed": seal is not None,
            "content": _sealed(key, file, seal),
        }
        for file in entry.files
    ]
    # Another replica may be storing the same state: its rows are the same files.
    session.execute(insert(m.CachedRead).values(rows).on_conflict_do_nothing())


def _sealed(key: ReadKey, file: CachedFile, seal: bytes | None) -> bytes:
    compressed = zlib.compress(file.content, 6)
    if seal is None:
        return compressed
    return sealing.seal(seal, compressed, _bound(key, file.path))


def _opened(row: m.CachedRead, seal: bytes | None) -> bytes | None:
    content = row.content
    if row.sealed != (seal is not None):
        return None
    if seal is not None:
        key = ReadKey(row.fabric_id, row.digest, row.inputs)
        opened = sealing.unseal(seal, content, _bound(key, row.name))
        if opened is None:
            return None
        content = opened
    try:
        return zlib.decompress(content)
    except zlib.error:
        return None


def _bound(key: ReadKey, name: str) -> bytes:
    """What a sealed file is bound to: a row moved to another fabric, state or name won't open."""
    return f"{key.fabric_id}\0{key.digest}\0{key.inputs}\0{name}".encode()
