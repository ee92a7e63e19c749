"""Snapshot history: every committed, verified state of a fabric, and the artifacts kept for some.

The rows come from `tenancy.record.snapshot_log`, written in every change's transaction: digest,
time and audit index, a few dozen bytes per change. Artifact bytes are kept only for snapshots a
deploy agent fetched (the signed manifest retains them, so the agent's by-digest downloads match
what was signed) or an isolation proof names (`retain_for_proof`: a verifier fetches the proof's
subjects by digest), and only for the most recent `Settings.snapshot_retain` of those plus the
pinned ones: each target's current ones, and the `Settings.proof_retain` snapshots most recently
named by a proof (ranked apart, so proofs never shorten the agents' window). Unchanged files are
stored once (content-addressed, zlib-compressed), since files carry no snapshot digest. A file
that holds secrets (opensm.conf) is stored sealed (tenancy/store/sealing.py) under a key derived
from the fabric's render inputs, which are not in the database; once those inputs change it no
longer opens, and is served again only while it is the current state's (rendered anew).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from sqlalchemy import delete, func
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, col, select

from policies.artifacts import Artifact, holds_secrets
from policies.errors import InvalidValueError, NotFoundError, NotRetainedError
from policies.evidence.manifest import sign_manifest
from tenancy import models as m
from tenancy.gate import cached_reads
from tenancy.record import snapshot_log
from tenancy.record.snapshot_log import latest, newest_with
from tenancy.schemas import DSSEEnvelope, Page, SnapshotView
from tenancy.store import epoch, key_store, sealing
from tenancy.store.locks import lock_fabric
from tenancy.store.lookups import fabric_named
from tenancy.store.pagination import decode_cursor, next_cursor
from tenancy.store.uow import Tx, UnitOfWork


def list_snapshots(
    uow: UnitOfWork, *, fabric_name: str, limit: int, cursor: str | None
) -> Page[SnapshotView]:
    """A page of the fabric's history, newest first."""
    after = decode_cursor(cursor)
    with uow.transaction(read_only=True) as tx:
        fabric_id = m.pk(fabric_named(tx.session, fabric_name))
        query = select(m.SnapshotRecord).where(m.SnapshotRecord.fabric_id == fabric_id)
        total = tx.session.exec(select(func.count()).select_from(query.subquery())).one()
        if after is not None:
            query = query.where(col(m.SnapshotRecord.id) < _cursor_id(after))
        rows = list(
            tx.session.exec(query.order_by(col(m.SnapshotRecord.id).desc()).limit(limit + 1))
        )
        page = rows[:limit]
        views = _views(tx.session, fabric_id, page)
        keys = [str(row.id) for row in page]
        return Page(data=views, count=int(total), next=next_cursor(keys, limit, len(rows) > limit))


def _cursor_id(after: str) -> int:
    """The history row id a cursor resumes after: ASCII digits that fit a BIGINT, else a 422."""
    if not (after.isascii() and after.isdigit() and len(after) <= 18):
        raise InvalidValueError("cursor is not valid", parameter="cursor")
    return int(after)


def _views(
    session: Session, fabric_id: int, rows: Sequence[m.SnapshotRecord]
) -> list[SnapshotView]:
    newest = latest(session, fabric_id)
    retained = set(_retained_digests(session, fabric_id))
    targets = session.exec(select(m.DeployTarget).where(m.DeployTarget.fabric_id == fabric_id))
    deployed: dict[str, list[str]] = {}
    for target in targets:
        if target.deployed is not None:
            deployed.setdefault(target.deployed, []).append(target.name)
    return [
        SnapshotView(
            digest=row.digest,
            created_at=row.created_at,
            audit_index=row.audit_index,
            current=newest is not None and row.id == newest.id,
            retained=row.digest in retained or (newest is not None and row.id == newest.id),
            deployed_to=sorted(deployed.get(row.digest, [])),
            policy_version=row.policy_version,
        )
        for row in rows
    ]


def _retained_digests(session: Session, fabric_id: int) -> list[str]:
    """Digests with kept artifact bytes, most recently retained first."""
    query = (
        select(m.SnapshotFile.digest, func.max(m.SnapshotFile.id))
        .where(m.SnapshotFile.fabric_id == fabric_id)
        .group_by(col(m.SnapshotFile.digest))
        .order_by(func.max(m.SnapshotFile.id).desc())
    )
    return [digest for digest, _ in session.exec(query)]


def signed_manifest(uow: UnitOfWork, *, fabric_name: str) -> DSSEEnvelope:
    """The current artifacts' manifest as a DSSE envelope signed with the service's key.

    The snapshot's artifact bytes are retained on first use (and again if they changed under
    the same digest: the management keys in opensm.conf are settings, not state), so the files
    the manifest binds stay downloadable by digest (`snapshot_artifact`) after the fabric moves on.
    The files come from the read cache (tenancy/gate/cached_reads.py): an agent polling an unchanged
    fabric renders nothing.

    The snapshot is marked fetched before it is served (`snapshot_log.mark_fetched`): from then
    on a target may hold its identifiers, which their release therefore quarantines. A release
    that committed between the rendering and the mark could not see it, so a snapshot the
    fabric moved on from meanwhile is rendered again (a few times, then served as it is).

    Raises:
        KeyUnavailableError: the signing key is not installed (503).
        IsolationViolationError: the fabric does not verify, so nothing is rendered.
    """
    for _ in range(_MANIFEST_ATTEMPTS - 1):
        envelope, settled = _signed_current(uow, fabric_name)
        if settled:
            return envelope
    return _signed_current(uow, fabric_name)[0]


# A fabric changing under every rendering of its manifest is served a slightly stale one: the
# agent's next cycle catches up, as it would have without the re-rendering.
_MANIFEST_ATTEMPTS = 3


def _signed_current(uow: UnitOfWork, fabric_name: str) -> tuple[DSSEEnvelope, bool]:
    """The current state's signed manifest, and whether it was still current once marked."""
    digest, files = cached_reads.current_artifacts(uow, fabric_name=fabric_name)
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        _, key = key_store.signer(tx.session, tx.settings)
        newest = newest_with(tx.session, m.pk(fabric), digest)
        sequence = newest.audit_index if newest is not None else 0
        current = epoch.current_epoch(tx.session, tx.settings)
        envelope = sign_manifest(fabric.name, digest, files, key, sequence=sequence, epoch=current)
        kept = _kept_shas(tx.session, m.pk(fabric), digest)
        marked = newest is None or newest.fetched_at is not None
    settled = True
    if kept != {f.path: f.sha256 for f in files} or not marked:
        with uow.transaction() as tx:
            locked = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
            _retain(tx, locked, digest, files)
            settled = _mark(tx, m.pk(locked), digest)
    return DSSEEnvelope.model_validate(envelope), settled


def _mark(tx: Tx, fabric_id: int, digest: str) -> bool:
    """Mark snapshot `digest` fetched; whether it is still the fabric's current one.

    The caller holds the fabric's lock: no release commits between the check and the mark.
    """
    row = newest_with(tx.session, fabric_id, digest)
    snapshot_log.mark_fetched(tx.session, [row], tx.now)
    current = snapshot_log.latest(tx.session, fabric_id)
    return row is None or current is None or current.id == row.id


def _files_of(session: Session, fabric_id: int, digest: str) -> list[m.SnapshotFile]:
    query = select(m.SnapshotFile).where(
        m.SnapshotFile.fabric_id == fabric_id, m.SnapshotFile.digest == digest
    )
    return list(session.exec(query))


def _kept_shas(session: Session, fabric_id: int, digest: str) -> dict[str, str]:
    return {row.path: row.sha256 for row in _files_of(session, fabric_id, digest)}


def _retain(tx: Tx, fabric: m.Fabric, digest: str, files: Sequence[Artifact]) -> None:
    """Keep the snapshot's files (and prune older ones), unless they are kept already."""
    fabric_id = m.pk(fabric)
    if _kept_shas(tx.session, fabric_id, digest) == {f.path: f.sha256 for f in files}:
        return  # a concurrent fetch kept them first
    replaced = _files_of(tx.session, fabric_id, digest)  # the same state, other settings (keys)
    for row in replaced:
        tx.session.delete(row)
    tx.session.flush()
    _drop_unused_blobs(tx.session, {row.sha256 for row in replaced})
    seal = _seal_for(tx, fabric, files)
    for artifact in files:
        if holds_secrets(artifact.path) and seal is None:
            continue  # never in clear: not retained, served while current (`snapshot_files`)
        _store_blob(tx.session, artifact, seal)
        tx.session.add(
            m.SnapshotFile(
                fabric_id=fabric_id,
                digest=digest,
                path=artifact.path,
                sha256=artifact.sha256,
                retained_at=tx.now,
            )
        )
    tx.session.flush()
    _prune(tx, fabric)


def retain_for_proof(tx: Tx, fabric: m.Fabric, digest: str, files: Sequence[Artifact]) -> None:
    """Keep the files of snapshot `digest`, which a proof issued in `tx` names as its subjects.

    Stored as for a signed manifest (a file that holds secrets sealed, or not at all); the
    proof's row (`Proof.snapshot_digest`, added to `tx` first) pins the snapshot against pruning
    while it is among the fabric's `Settings.proof_retain` most recently proven ones. Takes the
    fabric's lock, which the lock order allows after the tenant's.
    """
    _retain(tx, lock_fabric(tx.session, fabric), digest, files)


def _seal_for(tx: Tx, fabric: m.Fabric, files: Sequence[Artifact]) -> bytes | None:
    """The key sealing `files`' secret ones; None if none holds a secret (or nothing seals)."""
    if not any(holds_secrets(artifact.path) for artifact in files):
        return None
    return cached_reads.artifact_seal(tx, fabric)


def _store_blob(session: Session, artifact: Artifact, seal: bytes | None) -> None:
    """Store the file's bytes once; another fabric's snapshot may be storing the same ones now.

    A file that holds secrets is sealed with `seal`, bound to its sha256. INSERT … ON CONFLICT
    DO NOTHING (PostgreSQL and SQLite): two transactions that both find the blob missing must not
    make one of them fail on the primary key.
    """
    dialect = session.get_bind().dialect.name
    insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
    content, sealed = zlib.compress(artifact.content, 6), False
    if seal is not None and holds_secrets(artifact.path):
        content, sealed = sealing.seal(seal, content, artifact.sha256.encode()), True
    values = {
        "sha256": artifact.sha256,
        "size": len(artifact.content),
        "content": content,
        "sealed": sealed,
    }
    session.execute(insert(m.ArtifactBlob).values(**values).on_conflict_do_nothing())


def _prune(tx: Tx, fabric: m.Fabric) -> None:
    """Drop retained snapshots beyond the most recent `snapshot_retain`, except pinned ones.

    The snapshots proofs pin are ranked apart: a burst of proofs never pushes out the snapshots
    kept for agents, and an agent's fetches never push out a proof's evidence.
    """
    session, fabric_id = tx.session, m.pk(fabric)
    proven = set(_proven_digests(session, fabric.name, tx.settings.proof_retain))
    ranked = [d for d in _retained_digests(session, fabric_id) if d not in proven]
    targets = session.exec(select(m.DeployTarget).where(m.DeployTarget.fabric_id == fabric_id))
    pinned = {d for t in targets for d in (t.deployed, t.digest, t.frr_digest) if d is not None}
    stale = [d for d in ranked[tx.settings.snapshot_retain :] if d not in pinned]
    if not stale:
        return
    rows = col(m.SnapshotFile.fabric_id) == fabric_id, col(m.SnapshotFile.digest).in_(stale)
    dropped = set(session.exec(select(m.SnapshotFile.sha256).where(*rows)))
    session.exec(delete(m.SnapshotFile).where(*rows))
    _drop_unused_blobs(session, dropped)


def _proven_digests(session: Session, fabric_name: str, keep: int) -> list[str]:
    """The `keep` snapshots of the fabric most recently named by an issued proof."""
    newest = func.max(m.Proof.created_at)
    query = (
        select(m.Proof.snapshot_digest, newest)
        .where(m.Proof.fabric == fabric_name, col(m.Proof.snapshot_digest).is_not(None))
        .group_by(col(m.Proof.snapshot_digest))
        .order_by(newest.desc(), col(m.Proof.snapshot_digest).desc())
        .limit(keep)
    )
    return [digest for digest, _ in session.exec(query) if digest is not None]


def _drop_unused_blobs(session: Session, shas: set[str]) -> None:
    """Delete the blobs among `shas` that no retained file uses any more."""
    if shas:
        used = select(m.SnapshotFile.sha256)
        unused = col(m.ArtifactBlob.sha256).in_(shas), col(m.ArtifactBlob.sha256).not_in(used)
        session.exec(delete(m.ArtifactBlob).where(*unused))


def snapshot_artifact(uow: UnitOfWork, *, fabric_name: str, digest: str, path: str) -> Artifact:
    """One file of snapshot `digest`: from the kept bytes, or rendered if it is the current one.

    Raises:
        NotFoundError: the fabric never had that snapshot, or the snapshot has no such file.
        NotRetainedError: the snapshot existed but its bytes were pruned (410).
    """
    return snapshot_files(uow, fabric_name=fabric_name, digest=digest, paths=[path])[0]


def snapshot_files(
    uow: UnitOfWork, *, fabric_name: str, digest: str, paths: Sequence[str]
) -> list[Artifact]:
    """Files `paths` of snapshot `digest`, in that order, read at once (`snapshot_artifact`).

    From the kept bytes; a file kept sealed under other render inputs (or not kept, as a file
    that holds secrets may be) only while `digest` is the current state, rendered anew.

    Raises:
        NotFoundError: the fabric never had that snapshot, or the snapshot lacks one of them.
        NotRetainedError: the snapshot existed but its bytes were pruned (410).
        KeyUnavailableError: a sealed file is asked for and the OpenSM secret is missing (503).
    """
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        found = _kept_contents(tx, fabric, digest, paths)
        if found or _any_kept(tx.session, m.pk(fabric), digest):
            _refuse_absent(fabric_name, paths, found)
            kept = [Artifact(path, c) for path in paths if (c := found.get(path)) is not None]
            if len(kept) == len(paths):
                return kept
        elif newest_with(tx.session, m.pk(fabric), digest) is None:
            raise NotFoundError(
                f"fabric '{fabric_name}' has no snapshot {digest}",
                resource="snapshot",
                digest=digest,
            )
    return _current_files(uow, fabric_name, digest, paths)


def _current_files(
    uow: UnitOfWork, fabric_name: str, digest: str, paths: Sequence[str]
) -> list[Artifact]:
    """`paths` rendered from the current state if `digest` is it; else they are not retained."""
    current, files = cached_reads.current_artifacts(uow, fabric_name=fabric_name)
    if current != digest:
        raise NotRetainedError(
            f"the artifacts of snapshot {digest} of fabric '{fabric_name}' are no longer "
            "retained (ISOFABRIC_SNAPSHOT_RETAIN, ISOFABRIC_PROOF_RETAIN)",
            resource="snapshot",
            digest=digest,
        )
    return [_named(files, fabric_name, path) for path in paths]


def _kept_contents(
    tx: Tx, fabric: m.Fabric, digest: str, paths: Sequence[str]
) -> dict[str, bytes | None]:
    """The kept bytes of each of `paths` the snapshot retained; None for one that does not open."""
    found: dict[str, bytes | None] = {}
    seal: bytes | None = None
    for row in _files_at(tx.session, m.pk(fabric), digest, paths):
        blob = tx.session.get(m.ArtifactBlob, row.sha256)
        if blob is not None and blob.sealed and seal is None:
            seal = cached_reads.artifact_seal(tx, fabric)
        found[row.path] = _opened(blob, seal) if blob is not None else None
    return found


def _opened(blob: m.ArtifactBlob, seal: bytes | None) -> bytes | None:
    content: bytes | None = blob.content
    if blob.sealed:
        content = sealing.unseal(seal, blob.content, blob.sha256.encode()) if seal else None
    return zlib.decompress(content) if content is not None else None


def _refuse_absent(fabric_name: str, paths: Sequence[str], found: dict[str, bytes | None]) -> None:
    """404 for a path a retained snapshot lacks; a file that holds secrets may be unretained."""
    for path in paths:
        if path not in found and not holds_secrets(path):
            raise NotFoundError(
                f"fabric '{fabric_name}' has no artifact '{path}'", resource="artifact"
            )


def _files_at(
    session: Session, fabric_id: int, digest: str, paths: Sequence[str]
) -> list[m.SnapshotFile]:
    query = select(m.SnapshotFile).where(
        m.SnapshotFile.fabric_id == fabric_id,
        m.SnapshotFile.digest == digest,
        col(m.SnapshotFile.path).in_(paths),
    )
    return list(session.exec(query))


def _any_kept(session: Session, fabric_id: int, digest: str) -> bool:
    query = select(m.SnapshotFile.id).where(
        m.SnapshotFile.fabric_id == fabric_id, m.SnapshotFile.digest == digest
    )
    return session.exec(query.limit(1)).first() is not None


def _named(files: Sequence[Artifact], fabric_name: str, path: str) -> Artifact:
    for artifact in files:
        if artifact.path == path:
            return artifact
    raise NotFoundError(f"fabric '{fabric_name}' has no artifact '{path}'", resource="artifact")
