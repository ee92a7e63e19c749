"""Verification and artifacts for a fabric, and the verify-before-commit guard.

Every mutating use case calls `ensure_isolated` on each fabric it touched before its transaction
commits: a refused change raises and rolls back whole. (Removals cannot add reachability, but
they are verified too, so every committed state is a verified one.)
"""

from __future__ import annotations

from sqlmodel import col, select

from policies.artifacts import Artifact, manifest
from policies.errors import IsolationViolationError, NotFoundError
from policies.infiniband import IbSnapshot, unobserved_memberships
from policies.infiniband.model import format_guid, format_pkey
from policies.model import FabricKind, Owner
from policies.verdict import Counterexample, Endpoint, ReachabilityEdge, Verdict
from tenancy import models as m
from tenancy.gate.change_batch import ChangeBatch, active_batch
from tenancy.gate.change_check import ChangeScope, check_change
from tenancy.record import audit_log, snapshot_log
from tenancy.record.node_states import stamp_drains
from tenancy.record.quarantine import stamp_segments
from tenancy.record.snapshot import Snapshot, load_snapshot
from tenancy.record.virtual_guids import stamp_virtual_guids
from tenancy.schemas import (
    ArtifactsView,
    CounterexampleView,
    EdgeView,
    EndpointView,
    FabricReachabilityView,
    TenantReachabilityView,
    UnobservedView,
    VerificationView,
)
from tenancy.store.lookups import fabric_named, tenant_named
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.technology import render_snapshot, technology_of, verify_snapshot


def _refusal(detail: str, verdict: Verdict, kind: str) -> IsolationViolationError:
    return IsolationViolationError(
        detail,
        snapshot_digest=verdict.snapshot_digest,
        counterexamples=[
            counterexample_view(c, kind).model_dump(mode="json") for c in verdict.counterexamples
        ],
    )


def ensure_isolated(tx: Tx, fabric: m.Fabric, scope: ChangeScope | None = None) -> Verdict:
    """Verify the transaction's pending state; raise `IsolationViolationError` unless isolated.

    With a `scope`, only what the change touched is verified (tenancy/gate/change_check.py).
    """
    verdict = check_change(tx, fabric, scope)
    if not verdict.holds:
        raise _refusal(
            f"the change would break isolation on fabric '{fabric.name}' "
            f"({len(verdict.counterexamples)} counterexample(s)); nothing was changed",
            verdict,
            fabric.kind,
        )
    return verdict


def commit_gate(
    tx: Tx, fabric: m.Fabric, action: str, target: str, scope: ChangeScope | None = None
) -> None:
    """Verify the pending change (`ensure_isolated`), then audit it with the verified digest.

    `scope` names the owners and nodes the change touched; without one the whole fabric is
    verified (changes to the topology, the fabric or QoS classes). Both happen in the change's
    own transaction, so a refused change leaves no audit entry. The snapshot log gets the new
    digest, and nodes this change started draining learn the snapshot that removes their
    previous owner (deploy targets must apply it before they are free), as identifiers it took
    or released learn theirs (tenancy/record/quarantine.py). Inside a change set
    (tenancy/gate/change_batch.py) the entry is appended now and verified with the others at the
    end.

    Raises:
        IsolationViolationError: the pending state is not isolated; the caller's transaction
            rolls back whole.
    """
    batch = active_batch(tx)
    if batch is not None:
        batch.add(fabric, scope, audit_log.record(tx, action, target, fabric=fabric.name))
        return
    verdict = ensure_isolated(tx, fabric, scope)
    entry = audit_log.record(
        tx, action, target, fabric=fabric.name, digest_after=verdict.snapshot_digest
    )
    _log_snapshot(tx, fabric, entry)


def close_batch(tx: Tx, batch: ChangeBatch) -> None:
    """Verify each fabric a change set touched once, then give its entries the verified digest."""
    for changes in batch.fabrics.values():
        verdict = ensure_isolated(tx, changes.fabric, changes.scope)
        before = changes.entries[0].digest_before
        for entry in changes.entries:
            audit_log.restate(entry, digest_before=before, digest_after=verdict.snapshot_digest)
            before = verdict.snapshot_digest
            tx.session.add(entry)
        _log_snapshot(tx, changes.fabric, changes.entries[-1])


def _log_snapshot(tx: Tx, fabric: m.Fabric, entry: m.AuditEntry) -> None:
    snapshot = snapshot_log.record(tx, fabric, entry)
    stamp_drains(tx.session, m.pk(fabric), m.pk(snapshot))
    stamp_segments(tx.session, m.pk(fabric), m.pk(snapshot))
    stamp_virtual_guids(tx.session, m.pk(fabric), m.pk(snapshot))


def digest_changed(tx: Tx, fabric: m.Fabric) -> bool:
    """Whether the transaction's pending state of `fabric` differs from its last recorded one."""
    newest = snapshot_log.latest(tx.session, m.pk(fabric))
    current = load_snapshot(tx.session, fabric).digest
    return newest is None or newest.digest != current


def verify_fabric(uow: UnitOfWork, *, fabric_name: str) -> VerificationView:
    """The fabric's current verdict with counterexamples and the reachability relation."""
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        snapshot = load_snapshot(tx.session, fabric)
        return verdict_view(verify_snapshot(snapshot), fabric.kind, snapshot)


def segment_label(segment: int, kind: str) -> str:
    """P_Keys as ``0x0101``; RoCE VNIs as decimal strings (``"50001"``)."""
    return technology_of(kind).segment_label(segment)


def verdict_view(
    verdict: Verdict, kind: str = FabricKind.INFINIBAND, snapshot: Snapshot | None = None
) -> VerificationView:
    """The API shape of a verdict, segments labelled for `kind` (P_Keys in hex, VNIs decimal).

    With the verified `snapshot`, an InfiniBand verdict lists its virtual GUIDs' memberships as
    ``unobserved``: never as holding.
    """
    return VerificationView(
        holds=verdict.holds,
        snapshot_digest=verdict.snapshot_digest,
        counterexamples=[counterexample_view(c, kind) for c in verdict.counterexamples],
        reachability=[edge_view(e, kind) for e in verdict.reachability],
        rules=[rule.value for rule in verdict.rules],
        unobserved=_unobserved(snapshot),
    )


def _unobserved(snapshot: Snapshot | None) -> list[UnobservedView]:
    if not isinstance(snapshot, IbSnapshot):
        return []
    return [
        UnobservedView(
            guid=format_guid(u.guid),
            partition=format_pkey(u.pkey),
            name=u.partition,
            tenant=u.tenant,
            membership="full" if u.full else "limited",
        )
        for u in unobserved_memberships(snapshot)
    ]


def edge_view(edge: ReachabilityEdge, kind: str) -> EdgeView:
    """The API shape of a reachability edge, its segment labelled for `kind`."""
    return EdgeView(
        source=str(edge.source),
        target=str(edge.target),
        segment=segment_label(edge.segment, kind),
        allowed=edge.allowed,
    )


def counterexample_view(example: Counterexample, kind: str) -> CounterexampleView:
    """The API shape of a counterexample; `partition` carries its segment (P_Key or VNI label)."""
    segment = example.segment
    return CounterexampleView(
        rule=example.rule.value,
        message=example.message,
        partition=segment_label(segment, kind) if segment is not None else None,
        a=_endpoint_view(example.a),
        b=_endpoint_view(example.b),
    )


def _endpoint_view(endpoint: Endpoint | None) -> EndpointView | None:
    if endpoint is None:
        return None
    guid = format_guid(endpoint.guid) if endpoint.port is None else None
    return EndpointView(
        guid=guid, node=endpoint.node, owner=str(endpoint.owner), port=endpoint.port
    )


def render_fabric(tx: Tx, fabric: m.Fabric) -> tuple[Snapshot, tuple[Artifact, ...]]:
    """Render the artifacts of a verified snapshot; a snapshot that does not verify is refused."""
    snapshot = load_snapshot(tx.session, fabric)
    verdict = verify_snapshot(snapshot)
    if not verdict.holds:
        raise _refusal(
            f"fabric '{fabric.name}' does not verify; refusing to render artifacts",
            verdict,
            fabric.kind,
        )
    return snapshot, render_snapshot(tx, fabric, snapshot)


def list_artifacts(uow: UnitOfWork, *, fabric_name: str) -> ArtifactsView:
    """The manifest of the fabric's artifacts: path, sha256 and size of each file."""
    with uow.transaction(read_only=True) as tx:
        snapshot, files = render_fabric(tx, fabric_named(tx.session, fabric_name))
    return ArtifactsView.model_validate(manifest(fabric_name, snapshot.digest, files))


def get_artifact(uow: UnitOfWork, *, fabric_name: str, path: str) -> tuple[Artifact, str]:
    """One rendered file and the digest of the snapshot it was rendered from."""
    with uow.transaction(read_only=True) as tx:
        snapshot, files = render_fabric(tx, fabric_named(tx.session, fabric_name))
    for artifact in files:
        if artifact.path == path:
            return artifact, snapshot.digest
    raise NotFoundError(f"fabric '{fabric_name}' has no artifact '{path}'", resource="artifact")


def tenant_reachability(uow: UnitOfWork, *, tenant_name: str) -> TenantReachabilityView:
    """The tenant's reachability on each fabric where it holds an active segment.

    Per fabric: the reachability edges that involve the tenant and whether the verdict holds.
    """
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        fabric_ids = select(m.Segment.fabric_id).where(
            m.Segment.tenant_id == tenant.id, m.Segment.state == "active"
        )
        fabrics = tx.session.exec(
            select(m.Fabric).where(col(m.Fabric.id).in_(fabric_ids)).order_by(col(m.Fabric.name))
        ).all()
        owner = str(Owner.tenant(tenant.name))
        views = []
        for fabric in fabrics:
            view = verdict_view(verify_snapshot(load_snapshot(tx.session, fabric)), fabric.kind)
            edges = [e for e in view.reachability if owner in (e.source, e.target)]
            views.append(
                FabricReachabilityView(
                    fabric=fabric.name,
                    holds=view.holds,
                    snapshot_digest=view.snapshot_digest,
                    edges=edges,
                )
            )
        return TenantReachabilityView(tenant=tenant.name, fabrics=views)
