"""Cached reads of a fabric's verdict and artifacts: computed once per committed state.

Every committed change of a fabric goes through the commit gate, which logs the new digest
(tenancy/record/snapshot_log.py); so one indexed query names the current state, and a read whose
entry is in the read cache (tenancy/store/read_cache.py) neither loads the snapshot nor verifies nor
renders. On PostgreSQL a miss in memory looks in the store the replicas share
(tenancy/record/read_cache_store.py). A miss computes as tenancy/gate/verification.py does (the
uncached reference, which the CLI keeps using) and keeps the result, in memory and in the shared
store, under the digest of the snapshot it computed, never under the digest it looked up: a change
that commits meanwhile makes that entry unused, not wrong. A fabric with no logged state yet is
computed on every read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from sqlmodel import col, select

from policies.artifacts import Artifact
from policies.errors import IsolationViolationError, NotFoundError
from policies.model import Owner
from policies.verdict import Verdict
from tenancy import models as m
from tenancy.gate.verification import counterexample_view, verdict_view
from tenancy.record import read_cache_store, snapshot_log
from tenancy.record.snapshot import load_snapshot
from tenancy.schemas import (
    ArtifactsView,
    FabricReachabilityView,
    TenantReachabilityView,
    VerificationView,
)
from tenancy.store import sealing
from tenancy.store.lookups import fabric_named, tenant_named
from tenancy.store.read_cache import VERDICT_NAME, CachedFile, Entry, ReadKey, fingerprint
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.technology import RenderInputs, render_inputs, render_with, verify_snapshot


@dataclass(frozen=True, slots=True)
class ArtifactRead:
    """One current artifact and the digest of the verified snapshot it was rendered from."""

    file: CachedFile
    snapshot_digest: str


@dataclass(frozen=True, slots=True)
class _Computed:
    """A miss's result: entries by fingerprint, and the refusal to render, if any."""

    fabric_id: int
    digest: str
    entries: dict[str, Entry]
    seals: dict[str, bytes] = dataclasses.field(default_factory=dict)
    refusal: IsolationViolationError | None = None


def verification_json(uow: UnitOfWork, *, fabric_name: str) -> CachedFile:
    """The fabric's current verdict as the JSON document of `VerificationView`, and its sha256.

    The bytes are those `verification.verify_fabric`'s view serialises to (by alias), made once
    per state: serve them as they are.

    Raises:
        NotFoundError: no fabric has this name.
    """
    entry, alarm = _verdict(uow, fabric_name)
    document = entry.files[0]
    if alarm is None:
        return document
    # Rare (tenancy/gate/full_check.py): the stored body says "alarm": null; this answer must not.
    body = json.loads(document.content)
    body["alarm"] = alarm
    return CachedFile.of(document.path, json.dumps(body, separators=(",", ":")).encode())


def list_artifacts(uow: UnitOfWork, *, fabric_name: str) -> ArtifactsView:
    """The manifest of the fabric's current artifacts: path, sha256 and size of each file.

    Raises:
        NotFoundError: no fabric has this name.
        IsolationViolationError: the fabric does not verify, so nothing is rendered.
        KeyUnavailableError: the OpenSM secret is missing (InfiniBand, 503).
    """
    entry = _artifacts(uow, fabric_name)
    files = [{"path": f.path, "sha256": f.sha256, "bytes": len(f.content)} for f in entry.files]
    return ArtifactsView.model_validate(
        {"fabric": fabric_name, "snapshot_digest": entry.digest, "files": files}
    )


def get_artifact(uow: UnitOfWork, *, fabric_name: str, path: str) -> ArtifactRead:
    """One current rendered file and the digest of the snapshot it was rendered from.

    Raises:
        NotFoundError: no fabric has this name, or the fabric has no such file.
        IsolationViolationError: the fabric does not verify, so nothing is rendered.
        KeyUnavailableError: the OpenSM secret is missing (InfiniBand, 503).
    """
    entry = _artifacts(uow, fabric_name)
    found = entry.file(path)
    if found is None:
        raise NotFoundError(f"fabric '{fabric_name}' has no artifact '{path}'", resource="artifact")
    return ArtifactRead(found, entry.digest)


def current_artifacts(uow: UnitOfWork, *, fabric_name: str) -> tuple[str, tuple[Artifact, ...]]:
    """The digest of the fabric's current verified state and its files, sorted by path.

    What `verification.render_fabric` returns (the digest for the snapshot), from the cache: for
    the signed manifest and the current state's by-digest downloads
    (tenancy/usecases/snapshot_history.py).

    Raises:
        NotFoundError: no fabric has this name.
        IsolationViolationError: the fabric does not verify, so nothing is rendered.
        KeyUnavailableError: the OpenSM secret is missing (InfiniBand, 503).
    """
    entry = _artifacts(uow, fabric_name)
    return entry.digest, tuple(Artifact(f.path, f.content) for f in entry.files)


def tenant_reachability(uow: UnitOfWork, *, tenant_name: str) -> TenantReachabilityView:
    """The tenant's edges and the verdict on each fabric where it holds an active segment.

    Raises:
        NotFoundError: no tenant has this name.
    """
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        fabric_ids = select(m.Segment.fabric_id).where(
            m.Segment.tenant_id == tenant.id, m.Segment.state == "active"
        )
        query = select(m.Fabric.name).where(col(m.Fabric.id).in_(fabric_ids))
        names = list(tx.session.exec(query.order_by(col(m.Fabric.name))))
    owner = str(Owner.tenant(tenant.name))
    return TenantReachabilityView(
        tenant=tenant.name, fabrics=[_tenant_edges(uow, name, owner) for name in names]
    )


def _tenant_edges(uow: UnitOfWork, fabric_name: str, owner: str) -> FabricReachabilityView:
    body = _verdict(uow, fabric_name)[0].files[0].content
    view = VerificationView.model_validate_json(body)
    return FabricReachabilityView(
        fabric=fabric_name,
        holds=view.holds,
        snapshot_digest=view.snapshot_digest,
        edges=[e for e in view.reachability if owner in (e.source, e.target)],
    )


def _verdict(uow: UnitOfWork, fabric_name: str) -> tuple[Entry, str | None]:
    """The verdict's entry, and the fabric's standing full re-verification alarm (if any)."""
    wanted = _verdict_fingerprint()
    with uow.transaction(read_only=True) as tx:
        fabric, digest = _current(tx, fabric_name)
        state = tx.session.get(m.FabricDigest, m.pk(fabric))
        alarm = state.alarm if state is not None else None
        key = _key(fabric, digest, wanted)
        entry = _cached(uow, tx, key, None)
    if entry is not None:
        return entry, alarm
    return _miss(uow, key, wanted, lambda: _compute(uow, fabric_name, None)), alarm


def cached_verdict(
    uow: UnitOfWork, tx: Tx, fabric: m.Fabric, digest: str | None
) -> CachedFile | None:
    """The verdict document of the fabric's state `digest` if one was computed, else None.

    From memory or the replicas' shared store, never computed here: for readers that must stay
    cheap (the /metrics scrape, tenancy/usecases/monitoring.py).
    """
    entry = _cached(uow, tx, _key(fabric, digest, _verdict_fingerprint()), None)
    return entry.files[0] if entry is not None else None


def _artifacts(uow: UnitOfWork, fabric_name: str) -> Entry:
    with uow.transaction(read_only=True) as tx:
        fabric, digest = _current(tx, fabric_name)
        inputs = render_inputs(tx, fabric)
        wanted = _artifacts_fingerprint(inputs)
        key = _key(fabric, digest, wanted)
        entry = _cached(uow, tx, key, _seal(inputs))
    if entry is not None:
        return entry
    return _miss(uow, key, wanted, lambda: _compute(uow, fabric_name, inputs))


@cache
def _verdict_fingerprint() -> str:
    return fingerprint("verdict")


def verdict_fingerprint() -> str:
    """The `ReadKey.inputs` of every verdict entry (this code's; verdicts have no other input)."""
    return _verdict_fingerprint()


def artifact_seal(tx: Tx, fabric: m.Fabric) -> bytes | None:
    """The key that seals the fabric's files rendered from secrets wherever they are kept.

    The read cache's (here) and retained snapshot files' (tenancy/usecases/snapshot_history.py):
    derived from the fabric's current render inputs (tenancy/store/sealing.py); None when it has
    none (nothing secret is rendered then).

    Raises:
        KeyUnavailableError: the OpenSM secret is missing (InfiniBand, 503).
    """
    return _seal(render_inputs(tx, fabric))


def _artifacts_fingerprint(inputs: RenderInputs) -> str:
    return fingerprint("artifacts", _encoded(inputs))


def _seal(inputs: RenderInputs) -> bytes | None:
    """The key sealing files rendered from `inputs` in the shared store; None if none is set.

    Every render input is a setting or a secret (the OpenSM keys): any set one seals the files.
    """
    return None if inputs == RenderInputs() else sealing.seal_key(_encoded(inputs))


def _encoded(inputs: RenderInputs) -> bytes:
    # Every field of every input, whatever its repr: a rotated key must change the encoding.
    return repr(dataclasses.astuple(inputs)).encode()


def _current(tx: Tx, fabric_name: str) -> tuple[m.Fabric, str | None]:
    """The fabric and the digest of its committed state: one indexed query, whatever its size.

    Raises:
        NotFoundError: no fabric has this name.
    """
    query = select(m.Fabric, snapshot_log.newest_digest()).where(m.Fabric.name == fabric_name)
    row = tx.session.exec(query).first()
    if row is None:
        return fabric_named(tx.session, fabric_name), None  # raises the one "no such fabric"
    return row


def _key(fabric: m.Fabric, digest: str | None, inputs: str) -> ReadKey | None:
    """The entry's key; None before the fabric's first logged change (nothing is kept then)."""
    return None if digest is None else ReadKey(m.pk(fabric), digest, inputs)


def _cached(uow: UnitOfWork, tx: Tx, key: ReadKey | None, seal: bytes | None) -> Entry | None:
    """The entry of `key` from memory, else from the replicas' shared store (kept in memory)."""
    if key is None:
        return None
    entry = uow.reads.get(key)
    if entry is None and read_cache_store.shared(uow):
        entry = read_cache_store.load(tx.session, key, seal)
        if entry is not None:
            uow.reads.put(key, entry)
    return entry


def _miss(
    uow: UnitOfWork, key: ReadKey | None, wanted: str, compute: Callable[[], _Computed]
) -> Entry:
    """Compute once for concurrent misses of `key`, keep every entry made, return `wanted`'s.

    Without a key (no logged state) nothing is kept: the next read computes again.

    Raises:
        IsolationViolationError: the fabric does not verify (its verdict is kept all the same).
    """
    if key is None:
        return _wanted(compute(), wanted)
    with uow.reads.single_flight(key):
        entry = uow.reads.get(key)
        if entry is not None:
            return entry
        computed = compute()
        _keep(uow, computed)
        return _wanted(computed, wanted)


def _keep(uow: UnitOfWork, computed: _Computed) -> None:
    """Keep every entry computed in memory and, for the other replicas, in the shared store."""
    for inputs, made in computed.entries.items():
        key = ReadKey(computed.fabric_id, computed.digest, inputs)
        uow.reads.put(key, made)
        if read_cache_store.shared(uow):
            read_cache_store.store(uow, key, made, computed.seals.get(inputs))


def _wanted(computed: _Computed, wanted: str) -> Entry:
    if computed.refusal is not None:
        raise computed.refusal
    return computed.entries[wanted]


def _compute(uow: UnitOfWork, fabric_name: str, inputs: RenderInputs | None) -> _Computed:
    """Load, verify and, given render `inputs`, render: what `render_fabric` does, kept whole.

    The verdict's entry is made in any case, the artifacts' only for a snapshot that verifies.
    """
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        snapshot = load_snapshot(tx.session, fabric)
        verdict = verify_snapshot(snapshot)
        view = verdict_view(verdict, fabric.kind, snapshot)
        body = view.model_dump_json(by_alias=True).encode()
        verdict_file = CachedFile.of(VERDICT_NAME, body)
        entries = {_verdict_fingerprint(): Entry(snapshot.digest, (verdict_file,))}
        computed = _Computed(m.pk(fabric), snapshot.digest, entries)
        if inputs is None:
            return computed
        if not verdict.holds:
            return dataclasses.replace(computed, refusal=_refusal(fabric, verdict))
        files = render_with(snapshot, inputs)
    made = tuple(CachedFile.of(f.path, f.content) for f in files)
    entries[_artifacts_fingerprint(inputs)] = Entry(snapshot.digest, made)
    seal = _seal(inputs)
    if seal is not None:
        computed.seals[_artifacts_fingerprint(inputs)] = seal
    return computed


def _refusal(fabric: m.Fabric, verdict: Verdict) -> IsolationViolationError:
    """What `verification.render_fabric` raises for a snapshot that does not verify."""
    return IsolationViolationError(
        f"fabric '{fabric.name}' does not verify; refusing to render artifacts",
        snapshot_digest=verdict.snapshot_digest,
        counterexamples=[
            counterexample_view(c, fabric.kind).model_dump(mode="json")
            for c in verdict.counterexamples
        ],
    )
