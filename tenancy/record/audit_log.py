"""The tamper-evident audit log: one entry per mutation, in the same transaction as the change.

Entries are the leaves of an RFC 9162 Merkle tree (leaf = SHA-256(0x00 || RFC 8785 JSON of the
entry)); signed checkpoints (C2SP signed notes, Ed25519) commit to the tree's size and root, so
an auditor who keeps one can later prove that no entry up to it was edited or removed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert
from sqlalchemy import select as core_select
from sqlalchemy.orm import make_transient_to_detached, object_session
from sqlmodel import Session, col, select

from policies.errors import ConflictError, InvalidValueError, NotFoundError
from policies.evidence.audit_log import LogReport, load_public_key, parse_export, verify_log
from policies.evidence.keyring import KeyringEntry, keyring_keys, retirements
from policies.evidence.merkle import consistency_proof, entry_leaf_hash, inclusion_proof, root_hash
from policies.evidence.signed_note import checkpoint_text, sign_note
from tenancy import models as m
from tenancy.record import audit_seal, audit_tail
from tenancy.schemas import (
    AuditEntryView,
    CheckpointView,
    ConsistencyProofView,
    InclusionProofView,
    Page,
)
from tenancy.store import key_store
from tenancy.store.db import fetch_all
from tenancy.store.pagination import decode_cursor, next_cursor
from tenancy.store.settings import Settings
from tenancy.store.uow import Tx, UnitOfWork

AUDIT_LOCK = audit_tail.AUDIT_LOCK  # appends take the next index under it


def entry_document(entry: m.AuditEntry) -> dict[str, Any]:
    """The entry as hashed and exported: RFC 3339 UTC time, nulls kept."""
    return {
        "index": entry.index,
        "time": entry.time.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "principal": entry.principal,
        "role": entry.role,
        "action": entry.action,
        "target": entry.target,
        "request_id": entry.request_id,
        "fabric": entry.fabric,
        "digest_before": entry.digest_before,
        "digest_after": entry.digest_after,
    }


def record(
    tx: Tx,
    action: str,
    target: str,
    *,
    fabric: str | None = None,
    digest_after: str | None = None,
) -> m.AuditEntry:
    """Append one entry for a mutation; it commits or rolls back with the change itself.

    One Core insert (no flush of the session); the log's tail is read once per transaction.
    """
    tail = audit_tail.tail(tx, fabric)
    index, time = tail.next_position(tx.now)
    entry = m.AuditEntry(
        index=index,
        time=time,
        principal=tx.principal.name,
        role=tx.principal.role,
        action=action,
        target=target,
        request_id=tx.request_id,
        fabric=fabric,
        digest_before=tail.last_digest(tx.session, fabric),
        digest_after=digest_after,
        leaf_hash="",
    )
    entry.leaf_hash = entry_leaf_hash(entry_document(entry)).hex()
    entry.seal = audit_seal.seal(tx.session, tx.settings, index, entry.leaf_hash)
    tx.session.connection().execute(_INSERT_ENTRY, entry.model_dump())
    # The row is written: the session tracks the entry as loaded, so that `restate` updates it.
    make_transient_to_detached(entry)
    tx.session.add(entry)
    tail.appended(entry)
    return entry


_INSERT_ENTRY = insert(m.AuditEntry)  # built once: an append is one prepared statement


def restate(entry: m.AuditEntry, *, digest_before: str | None, digest_after: str) -> None:
    """Set the digests of an entry appended earlier in this transaction, and rehash its leaf.

    A change set appends one entry per operation as it runs but verifies once at the end: the
    entries learn the verified digest then (nothing is committed before).
    """
    entry.digest_before, entry.digest_after = digest_before, digest_after
    entry.leaf_hash = entry_leaf_hash(entry_document(entry)).hex()
    session = object_session(entry)
    if session is not None:
        entry.seal = audit_seal.reseal(session, entry.index, entry.leaf_hash)
        audit_tail.restated(session, entry)


def entries(session: Session) -> list[m.AuditEntry]:
    """The whole log in index order (the order of the Merkle tree's leaves)."""
    return list(session.exec(select(m.AuditEntry).order_by(col(m.AuditEntry.index))))


def list_entries(uow: UnitOfWork, *, limit: int, cursor: str | None) -> Page[AuditEntryView]:
    """A page of entries in index order, in the list envelope."""
    after = decode_cursor(cursor)
    with uow.transaction(read_only=True) as tx:
        query = select(m.AuditEntry).order_by(col(m.AuditEntry.index))
        if after is not None:
            query = query.where(m.AuditEntry.index > _index(after))
        rows = list(tx.session.exec(query.limit(limit + 1)))
        total = fetch_all(tx.session, core_select(func.count()).select_from(m.AuditEntry))[0][0]
    page = rows[:limit]
    return Page(
        data=[AuditEntryView.model_validate(entry_document(e)) for e in page],
        count=int(total),
        next=next_cursor([str(e.index) for e in page], limit, len(rows) > limit),
    )


def _index(text_value: str) -> int:
    # ASCII digits that fit a 64-bit column: "²" passes isdigit() but not int(), and a longer
    # number overflows the driver (both were 500s).
    if not (text_value.isascii() and text_value.isdigit() and len(text_value) <= 18):
        raise InvalidValueError("cursor is not valid", parameter="cursor")
    return int(text_value)


# --- signing key and checkpoints ---------------------------------------------------------------


def leaf_hashes(session: Session) -> list[bytes]:
    """The stored leaf hashes in index order: what checkpoints and proofs are computed over."""
    rows = fetch_all(
        session, core_select(col(m.AuditEntry.leaf_hash)).order_by(col(m.AuditEntry.index))
    )
    return [bytes.fromhex(row[0]) for row in rows]


def checkpoint(uow: UnitOfWork) -> CheckpointView:
    """A signed checkpoint of the whole log, stored so that later verifications can use it.

    The stored checkpoint of the current size is read without the write lock (a GET must not
    wait for a writer); only when a new one is due does a write transaction sign and store it.

    Raises:
        KeyUnavailableError: a new checkpoint is due and the signing key is not installed (503);
            the service never creates one here (`isofabric keys create` does).
    """
    with uow.transaction(read_only=True) as tx:
        size = fetch_all(tx.session, core_select(func.count()).select_from(m.AuditEntry))[0][0]
        stored = tx.session.get(m.AuditCheckpoint, size)
    if stored is None:
        stored = _store_checkpoint(uow)
    return CheckpointView(
        origin=uow.settings.audit_origin,
        size=stored.size,
        root_hash=stored.root_hash,
        note=stored.note,
    )


def _store_checkpoint(uow: UnitOfWork) -> m.AuditCheckpoint:
    """Sign and store the checkpoint of the log as it is now (unless one already exists).

    Two replicas asked at once may both find none and both sign the same size: the size is the
    primary key, so the second insert fails (`ConflictError`) and is simply done again, which
    then reads the first one's checkpoint (one stored checkpoint per size, never a
    409 or 500 for the loser). The log may have grown meanwhile: then it signs the new size.
    """
    for _attempt in range(CHECKPOINT_ATTEMPTS - 1):
        try:
            return _sign_and_store(uow)
        except ConflictError:
            continue
    return _sign_and_store(uow)


# A conflict needs a concurrent checkpoint of the same size; three in a row would take writers
# appending faster than a checkpoint is signed, while replicas race for each size.
CHECKPOINT_ATTEMPTS = 3


def _sign_and_store(uow: UnitOfWork) -> m.AuditCheckpoint:
    origin = uow.settings.audit_origin
    with uow.transaction() as tx:
        hashes = leaf_hashes(tx.session)
        stored = tx.session.get(m.AuditCheckpoint, len(hashes))
        if stored is None:
            name, key = key_store.signer(tx.session, tx.settings)
            root = root_hash(hashes)
            note = sign_note(checkpoint_text(origin, len(hashes), root), name, key)
            stored = m.AuditCheckpoint(
                size=len(hashes), root_hash=_b64(root), note=note, created_at=tx.now
            )
            tx.session.add(stored)
        return stored


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def inclusion(uow: UnitOfWork, *, index: int, size: int) -> InclusionProofView:
    """The RFC 9162 inclusion proof of entry `index` in the tree of the first `size` entries."""
    with uow.transaction(read_only=True) as tx:
        hashes = leaf_hashes(tx.session)
    _check_size(size, len(hashes))
    if not 0 <= index < size:
        raise InvalidValueError(f"index must be in 0..{size - 1}", parameter="index")
    return InclusionProofView(
        index=index,
        size=size,
        leaf_hash=_b64(hashes[index]),
        path=[_b64(h) for h in inclusion_proof(hashes[:size], index)],
    )


def consistency(uow: UnitOfWork, *, first: int, second: int) -> ConsistencyProofView:
    """The RFC 9162 consistency proof between the trees of `first` and `second` entries."""
    with uow.transaction(read_only=True) as tx:
        hashes = leaf_hashes(tx.session)
    _check_size(second, len(hashes))
    if not 0 < first <= second:
        raise InvalidValueError("first must be in 1..second", parameter="first")
    return ConsistencyProofView(
        first=first,
        second=second,
        first_root=_b64(root_hash(hashes[:first])),
        second_root=_b64(root_hash(hashes[:second])),
        path=[_b64(h) for h in consistency_proof(hashes[:second], first)],
    )


def _check_size(size: int, available: int) -> None:
    if not 0 < size <= available:
        raise NotFoundError(
            f"the log has {available} entries; no tree of size {size}", resource="audit-tree"
        )


def stored_checkpoints(session: Session) -> Sequence[m.AuditCheckpoint]:
    """Every signed checkpoint the service has issued, smallest tree first."""
    return list(session.exec(select(m.AuditCheckpoint).order_by(col(m.AuditCheckpoint.size))))


# --- export and verification --------------------------------------------------------------------


def export_lines(uow: UnitOfWork) -> list[str]:
    """The log as JSON Lines: each entry document plus its stored `leaf_hash` (hex) and `seal`."""
    with uow.transaction(read_only=True) as tx:
        rows = entries(tx.session)
    return [json.dumps(_stored(e), sort_keys=True) for e in rows]


def _stored(entry: m.AuditEntry) -> dict[str, Any]:
    """The entry as verification reads it: the hashed document, its leaf hash and its seal."""
    return {**entry_document(entry), "leaf_hash": entry.leaf_hash, "seal": entry.seal}


def verify(
    uow: UnitOfWork,
    *,
    log_text: str | None = None,
    kept: str | None = None,
    key_pem: str | None = None,
    keyring: Path | None = None,
) -> LogReport:
    """Verify the database's log (or an exported one) against the checkpoints.

    The checkpoints are every stored one and, if given, one the auditor kept (`kept`).
    Signatures are checked only with keys given from outside the database, which anyone able to
    change rows could fill with their own: one public key (`key_pem`), or else the keyring file
    (`keyring`, default the settings' keyring), which holds every key that signed the history.

    Raises:
        InvalidValueError: neither a key nor a readable keyring was given.
    """
    pinned = load_public_key(key_pem) if key_pem is not None else None
    ring = _keyring(uow.settings, keyring) if pinned is None else _optional_keyring(uow, keyring)
    trusted = keyring_keys(ring) if pinned is None else {}
    with uow.transaction(read_only=True) as tx:
        documents = (
            [_stored(e) for e in entries(tx.session)]
            if log_text is None
            else parse_export(log_text)
        )
        notes = [c.note for c in stored_checkpoints(tx.session)]
        expected = _audited_rows(tx.session) if log_text is None else 0
    if pinned is not None:
        # One pinned key vouches for whatever name a note gives it: the key ID in each
        # signature line still binds name and key, so only the pinned key's holder can sign.
        trusted = dict.fromkeys(_signer_names([*notes, kept or ""]), pinned)
    return verify_log(
        documents,
        notes,
        trusted,
        kept,
        expected_entries=expected,
        retired=retirements(ring),
        every_key=pinned is None,
    )


def _optional_keyring(uow: UnitOfWork, path: Path | None) -> list[KeyringEntry]:
    """The keyring's entries if there is one: a pinned key is still bounded by its retirement."""
    try:
        return _keyring(uow.settings, path)
    except InvalidValueError:
        return []


def _keyring(settings: Settings, path: Path | None) -> list[KeyringEntry]:
    """The keyring's entries: `path`, or the settings' keyring file."""
    path = path or settings.keyring_path
    if path is None or not path.is_file():
        raise InvalidValueError(
            f"no keyring{f' at {path}' if path else ''}: pass --keyring FILE (the keyring "
            "`isofabric keys create` wrote, as you keep it) or --key PEM; the keys in the "
            "database are never trusted"
        )
    return key_store.read_keyring(path)


def _signer_names(notes: list[str]) -> set[str]:
    """The key names on the signature lines (``— <name> <signature>``) of signed notes."""
    return {
        line.split(" ")[1]
        for note in notes
        for line in note.splitlines()
        if line.startswith("\u2014 ") and len(line.split(" ")) == 3
    }


def _audited_rows(session: Session) -> int:
    """Rows that each took an audited mutation to create: an emptied log cannot hide them."""
    tables = (m.Fabric, m.Tenant)
    return sum(int(session.exec(select(func.count()).select_from(t)).one()) for t in tables)
