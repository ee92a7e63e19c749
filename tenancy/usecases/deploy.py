"""Deploy targets, their reports and drain-before-reuse.

The sync status is tenancy/usecases/deploy_sync.py.

A target is a host that enforces a fabric's artifacts (an OpenSM node, a RoCE leaf). Its agent
reports every cycle's outcome; a report that changes the target's state is stored and audited as
a deploy receipt (action ``deploy.<state>``, target ``fabrics/F/targets/T@<digest>``), a repeat
only moves its last-seen time. An ``applied`` report (or a ``rolled_back`` one, for the snapshot
it restored) records what the target enforces, and draining nodes and quarantined identifiers
whose release every target now enforces turn free (tenancy/usecases/drains.py). On RoCE an
applied phase 1 removed access only (`policies.roce.rollout`): the leaf holds no snapshot whole
yet.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from policies.errors import ConflictError, InvalidValueError
from policies.model import FabricKind
from policies.roce.model import SwitchRole
from policies.roce.rollout import ACCESS_REMOVALS
from tenancy import models as m
from tenancy.record import audit_log
from tenancy.record.snapshot_log import mark_fetched, newest_with
from tenancy.schemas import (
    Page,
    PortMismatch,
    ReportCreate,
    ReportView,
    TargetCreate,
    TargetView,
)
from tenancy.store.locks import lock_fabric
from tenancy.store.lookups import fabric_named, target_named, target_row
from tenancy.store.pagination import page_rows
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases.drains import finish_target_drains
from tenancy.usecases.tokens import revoke_agent_tokens

# What a target of each kind deploys to: OpenSM reads InfiniBand partitions, a SONiC leaf its
# part of a RoCE fabric (CONFIG_DB and FRR).
_TARGET_FABRIC_KIND = {"opensm": FabricKind.INFINIBAND, "sonic": FabricKind.ROCE}
# States after which the target holds a known snapshot's files: the one it installed (applied,
# or installed awaiting a restart), or the one a rollback restored.
_HOLDING = {"applied": "digest", "restart_required": "digest", "rolled_back": "observed_digest"}


def put_target(
    uow: UnitOfWork, *, fabric_name: str, name: str, spec: TargetCreate
) -> tuple[TargetView, bool]:
    """Register target `name` on the fabric (idempotent); True when it was created.

    Raises:
        InvalidValueError: the body's read-only `name` is not `name` (422).
        ConflictError: the kind does not deploy this fabric's technology, the name is
            registered with another kind, or a 'sonic' target's name is not a leaf with a VTEP
            in the fabric's topology.
    """
    if spec.name is not None and spec.name != name:
        raise InvalidValueError(
            f"'name' is '{spec.name[:80]}' but the path names target '{name}'", pointer="/name"
        )
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        if _TARGET_FABRIC_KIND[spec.kind] != fabric.kind:
            raise ConflictError(
                f"a '{spec.kind}' target deploys {_TARGET_FABRIC_KIND[spec.kind]} fabrics; "
                f"fabric '{fabric.name}' is {fabric.kind}",
                fabric=fabric.name,
                kind=spec.kind,
            )
        if spec.kind == "sonic":
            _require_vtep_leaf(tx.session, fabric, name)
        existing = target_row(tx.session, fabric, name)
        if existing is not None:
            if existing.kind != spec.kind:
                raise ConflictError(
                    f"target '{name}' is registered as '{existing.kind}'", target=name
                )
            return target_view(existing), False
        row = m.DeployTarget(fabric_id=m.pk(fabric), name=name, kind=spec.kind, created_at=tx.now)
        tx.session.add(row)
        audit_log.record(tx, "target.register", f"fabrics/{fabric.name}/targets/{name}")
        tx.session.flush()
        return target_view(row), True


def _require_vtep_leaf(session: Session, fabric: m.Fabric, name: str) -> None:
    """A SONiC target deploys one leaf's files: its name must be a present leaf with a VTEP."""
    query = select(m.RoceSwitch).where(
        m.RoceSwitch.fabric_id == m.pk(fabric), m.RoceSwitch.name == name
    )
    switch = session.exec(query).first()
    if switch is None or switch.absent:
        why = "is not a switch of its topology"
    elif switch.role != SwitchRole.LEAF.value:
        why = f"is a {switch.role}, not a leaf"
    elif switch.vtep is None:
        why = "is a leaf without a VTEP"
    else:
        return
    raise ConflictError(
        f"a 'sonic' target is named after a leaf with a VTEP: '{name}' of fabric "
        f"'{fabric.name}' {why}",
        fabric=fabric.name,
        target=name,
    )


def delete_target(uow: UnitOfWork, *, fabric_name: str, name: str) -> list[str]:
    """Forget a target and revoke its agent tokens; returns the nodes whose drain this completes.

    Its reports stay, under its name: they are deploy receipts. On RoCE the drains of hosts
    cabled to its leaf go on waiting (`finish_target_drains`).
    """
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        row = target_named(tx.session, fabric, name)
        tx.session.exec(
            update(m.DeploymentReport)
            .where(col(m.DeploymentReport.target_id) == row.id)
            .values(target_id=None)
        )
        tx.session.delete(row)
        tx.session.flush()
        audit_log.record(tx, "target.delete", f"fabrics/{fabric.name}/targets/{name}")
        revoke_agent_tokens(tx, fabric=fabric.name, target=name)
        return finish_target_drains(tx, fabric)


def list_targets(
    uow: UnitOfWork, *, fabric_name: str, limit: int, cursor: str | None
) -> Page[TargetView]:
    """A page of the fabric's targets by name, with what each last reported."""
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        query = select(m.DeployTarget).where(m.DeployTarget.fabric_id == fabric.id)
        rows, total, following = page_rows(
            tx.session, query, col(m.DeployTarget.name), limit, cursor
        )
        return Page(data=[target_view(t) for t in rows], count=total, next=following)


def get_target(uow: UnitOfWork, *, fabric_name: str, name: str) -> TargetView:
    """One target; `NotFoundError` if the fabric has no target of that name."""
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        return target_view(target_named(tx.session, fabric, name))


def target_view(row: m.DeployTarget) -> TargetView:
    """The API shape of a target."""
    return TargetView(
        name=row.name,
        kind=row.kind,
        created_at=row.created_at,
        state=row.state,
        role=row.role,
        deployed=row.deployed,
        digest=row.digest,
        observed_digest=row.observed_digest,
        mismatches=_mismatches(row.mismatches),
        detail=row.detail,
        reported_at=row.reported_at,
        last_seen_at=row.last_seen_at,
    )


def _mismatches(text: str) -> list[PortMismatch]:
    return [PortMismatch.model_validate(item) for item in json.loads(text)]


def _mismatch_text(report: ReportCreate) -> str:
    return json.dumps([item.model_dump() for item in report.mismatches], separators=(",", ":"))


# --- reports ------------------------------------------------------------------------------------


def post_report(
    uow: UnitOfWork, *, fabric_name: str, target_name: str, report: ReportCreate
) -> ReportView:
    """Record an agent's report; only a change of the target's state is stored and audited.

    A change is a new state, digest, observed digest, role or mismatch list. The returned
    view's `changed_state` says which it was (a repeat returns the last stored report).

    Raises:
        NotFoundError: unknown fabric or target.
        InvalidValueError: an applied report without a digest; a phase or `covers` from an
            OpenSM target.
    """
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        target = target_named(tx.session, fabric, target_name)
        if report.phase is not None and target.kind != "sonic":
            why = f"target '{target.name}' is '{target.kind}': only a RoCE leaf deploys in phases"
            raise InvalidValueError(why, pointer="/phase")
        if report.covers is not None and target.kind != "sonic":
            why = f"target '{target.name}' is '{target.kind}': only a RoCE leaf covers parts"
            raise InvalidValueError(why, pointer="/covers")
        target.last_seen_at = tx.now
        tx.session.add(target)
        last = _last_report(tx.session, m.pk(target))
        repeat = last is not None and _repeats(target, last, report)
        row = last if repeat and last is not None else _store_report(tx, fabric, target, report)
        # A repeat changes no state, but its snapshot may have recurred since (allocate, then
        # release): what it enforces is re-read, so a drain waiting on it can finish.
        _apply_to_target(tx, target, report, changed=not repeat)
        finish_target_drains(tx, fabric)
        return report_view(row, changed_state=not repeat)


def _repeats(target: m.DeployTarget, last: m.DeploymentReport, report: ReportCreate) -> bool:
    return (
        last.phase == report.phase
        and target.state == report.state
        and target.digest == report.digest
        and target.observed_digest == report.observed_digest
        and target.covers == _covers_text(report)
        and target.role == report.role
        and target.mismatches == _mismatch_text(report)
    )


def _store_report(
    tx: Tx, fabric: m.Fabric, target: m.DeployTarget, report: ReportCreate
) -> m.DeploymentReport:
    where = f"fabrics/{fabric.name}/targets/{target.name}@{report.digest or 'none'}"
    entry = audit_log.record(tx, f"deploy.{report.state}", where, fabric=fabric.name)
    row = m.DeploymentReport(
        fabric_id=m.pk(fabric),
        target_id=m.pk(target),
        target=target.name,
        received_at=tx.now,
        principal=tx.principal.name,
        state=report.state,
        role=report.role,
        digest=report.digest,
        observed_digest=report.observed_digest,
        mismatches=_mismatch_text(report),
        detail=report.detail,
        durations=json.dumps(report.durations, separators=(",", ":"), sort_keys=True),
        ports_read=report.ports_read,
        phase=report.phase,
        audit_index=entry.index,
    )
    tx.session.add(row)
    tx.session.flush()
    return row


def _apply_to_target(
    tx: Tx, target: m.DeployTarget, report: ReportCreate, *, changed: bool
) -> None:
    if changed:
        target.reported_at = tx.now
    target.state, target.role, target.digest = report.state, report.role, report.digest
    target.observed_digest = report.observed_digest
    target.mismatches, target.detail = _mismatch_text(report), report.detail
    held = _held_digest(report)
    if held is not None:
        target.deployed = held
        target.applied_snapshot_id = _snapshot_id(tx.session, target.fabric_id, held)
    if report.state == "applied" and report.phase is not None:
        target.phase, target.phase_digest = report.phase, report.digest
    if report.observed_digest is not None and _reads_back_enforcement(target, report):
        observed = _snapshot_id(tx.session, target.fabric_id, report.observed_digest)
        target.observed_snapshot_id = observed
    _note_coverage(target, report)
    _note_reported(tx, target, report)
    tx.session.add(target)
    tx.session.flush()


def _note_reported(tx: Tx, target: m.DeployTarget, report: ReportCreate) -> None:
    """Any snapshot a report names, installed or not, may be on the target from now on.

    Its identifiers are then quarantined at their release (tenancy/record/quarantine.py).
    """
    named = sorted({d for d in (report.digest, report.observed_digest) if d is not None})
    rows = [newest_with(tx.session, target.fabric_id, digest) for digest in named]
    mark_fetched(tx.session, rows, tx.now)


def _covers_text(report: ReportCreate) -> str | None:
    return ",".join(report.covers) if report.covers is not None else None


def _note_coverage(target: m.DeployTarget, report: ReportCreate) -> None:
    """A leaf: what its agent covers, and the last snapshot whose frr.conf it read back."""
    if target.kind != "sonic":
        return
    target.covers = _covers_text(report)
    covers_frr = report.covers is None or "frr" in report.covers
    if covers_frr and report.observed_digest is not None:
        target.frr_digest = report.observed_digest


def _reads_back_enforcement(target: m.DeployTarget, report: ReportCreate) -> bool:
    """Whether the report's read-back shows what the target enforces.

    An OpenSM master's does (a standby enforces nothing); a leaf's after a whole snapshot does,
    after phase 1 not (it is only part of one).
    """
    if target.kind == "sonic":
        return report.phase != ACCESS_REMOVALS
    return report.role == "master"


def _snapshot_id(session: Session, fabric_id: int, digest: str) -> int | None:
    row = newest_with(session, fabric_id, digest)
    return row.id if row is not None else None


def _held_digest(report: ReportCreate) -> str | None:
    """The snapshot whose files the target holds after this report, if the report says so.

    An applied phase 1 removed access only: the target holds no snapshot's files whole.
    """
    if report.state == "applied" and report.phase == ACCESS_REMOVALS:
        return None
    field = _HOLDING.get(report.state)
    return getattr(report, field) if field is not None else None


def _last_report(session: Session, target_id: int) -> m.DeploymentReport | None:
    query = select(m.DeploymentReport).where(m.DeploymentReport.target_id == target_id)
    return session.exec(query.order_by(col(m.DeploymentReport.id).desc())).first()


def report_view(row: m.DeploymentReport, *, changed_state: bool = True) -> ReportView:
    """The API shape of a stored report."""
    durations: dict[str, Any] = json.loads(row.durations)
    return ReportView(
        id=m.pk(row),
        target=row.target,
        received_at=row.received_at,
        principal=row.principal,
        state=row.state,
        role=row.role,
        digest=row.digest,
        observed_digest=row.observed_digest,
        mismatches=_mismatches(row.mismatches),
        detail=row.detail,
        durations={k: float(v) for k, v in durations.items()},
        ports_read=row.ports_read,
        phase=row.phase,
        audit_index=row.audit_index,
        changed_state=changed_state,
    )


def list_deployments(
    uow: UnitOfWork, *, fabric_name: str, limit: int, cursor: str | None
) -> Page[ReportView]:
    """The fabric's stored reports (state changes), oldest first."""
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        query = select(m.DeploymentReport).where(m.DeploymentReport.fabric_id == fabric.id)
        rows, total, following = page_rows(
            tx.session, query, col(m.DeploymentReport.id), limit, cursor
        )
        views = [report_view(r) for r in rows]
        return Page(data=views, count=total, next=following)
