"""Isolation proofs: issue, store and list DSSE-signed in-toto Statements.

Issuing verifies the fabric, renders its artifacts, states the tenant's endpoints, ownership,
segments and reachable set, its accepted peerings as intended edges (a tenant view names those
peers and no other tenant: `policies.evidence.peering_claims`) and the policy in force (version,
fingerprint, the tenant's kind and its isolation; on dedicated leaves the topology of the
tenant's leaves, see `policies.evidence.policy_claims`), signs the Statement with the service's
active key and stores the envelope. It is recorded in the audit log (``proof.issue``) but
changes no managed state. The files it names are retained with their snapshot, which the proof
pins (`snapshot_history.retain_for_proof`), so a verifier can fetch them by digest after the
fabric moved on.

Each proof has a view (`policies.evidence.proofs`, "Views"), stored with it: ``full`` for
operators and auditors, ``tenant`` for a tenant's roles, which then read only tenant views, so a
tenant never reads a proof naming the other tenants that share a service with it.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any, cast

from sqlmodel import col, select

from policies.errors import IsolationViolationError, NotFoundError
from policies.evidence.claims import claims_for
from policies.evidence.proofs import FULL_VIEW, View, build_statement, sign_envelope
from policies.verdict import Verdict
from tenancy import models as m
from tenancy.gate.verification import render_fabric
from tenancy.record import audit_log
from tenancy.record.snapshot import load_snapshot
from tenancy.schemas import DSSEEnvelope, Page, ProofCreated, ProofView
from tenancy.store.locks import lock_active_tenant
from tenancy.store.lookups import fabric_named
from tenancy.store.pagination import page_rows
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.technology import verify_snapshot
from tenancy.usecases import signing_keys, snapshot_history

ENGINE = "isofabric"


def engine_version() -> str:
    """The installed isofabric version a proof names as its engine (``0+unknown`` if none)."""
    try:
        return version(ENGINE)
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def rfc3339(moment: datetime) -> str:
    """`moment` in UTC as RFC 3339 with a ``Z`` suffix, as proofs and their listing show times."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def issue(
    uow: UnitOfWork, *, tenant_name: str, fabric_name: str, view: View = FULL_VIEW
) -> ProofCreated:
    """Verify, render and sign a proof of the tenant's isolation on the fabric; store it.

    Args:
        uow: The unit of work.
        tenant_name: The tenant the proof is about.
        fabric_name: The fabric it is isolated on.
        view: ``full`` (operators, auditors) or ``tenant`` (a tenant's roles: other tenants'
            ports are counted, not named).

    Raises:
        ConflictError: the tenant is offboarded (it is issued nothing more), or the fabric does
            not verify (`IsolationViolationError`).
    """
    with uow.transaction() as tx:
        # Under the tenant's lock, like everything given to a tenant.
        tenant = lock_active_tenant(tx.session, tenant_name)
        fabric = fabric_named(tx.session, fabric_name)
        snapshot = load_snapshot(tx.session, fabric)
        verdict = verify_snapshot(snapshot)
        if not verdict.holds:
            raise IsolationViolationError(
                f"fabric '{fabric.name}' does not verify; no isolation proof is issued",
                snapshot_digest=verdict.snapshot_digest,
            )
        _, files = render_fabric(tx, fabric)
        subjects, claims = claims_for(snapshot, tenant.name, files, view, tenant.kind)
        predicate = _predicate(tx, fabric, tenant.name, verdict) | claims
        statement = build_statement(subjects, predicate)
        envelope = sign_envelope(statement, signing_keys.signing_key(tx))
        proof = _store(tx, tenant.name, fabric, envelope, view, verdict.snapshot_digest)
        snapshot_history.retain_for_proof(tx, fabric, verdict.snapshot_digest, files)
        audit_log.record(  # last: the audit log's lock comes after the fabric's
            tx,
            "proof.issue",
            f"tenants/{tenant.name}/isolation-proofs/{proof.id}",
            fabric=fabric.name,
            digest_after=verdict.snapshot_digest,
        )
        return ProofCreated(id=proof.id, view=view, envelope=DSSEEnvelope.model_validate(envelope))


def _store(
    tx: Tx, tenant: str, fabric: m.Fabric, envelope: dict[str, Any], view: View, digest: str
) -> m.Proof:
    """Add the proof's row; its `snapshot_digest` pins the snapshot its subjects come from."""
    proof = m.Proof(
        id=str(uuid.uuid4()),
        tenant=tenant,
        fabric=fabric.name,
        created_at=tx.now,
        envelope=json.dumps(envelope, sort_keys=True),
        view=view,
        snapshot_digest=digest,
    )
    tx.session.add(proof)
    return proof


def _predicate(tx: Tx, fabric: m.Fabric, tenant: str, verdict: Verdict) -> dict[str, Any]:
    return {
        "fabric": fabric.name,
        "kind": str(fabric.kind),
        "tenant": tenant,
        "snapshot_digest": verdict.snapshot_digest,
        "rules": [rule.value for rule in verdict.rules],
        "verdict": {"holds": verdict.holds},
        "engine": {"name": ENGINE, "version": engine_version()},
        "time": rfc3339(tx.now),
    }


def _view(row: m.Proof) -> ProofView:
    return ProofView(
        id=row.id,
        tenant=row.tenant,
        fabric=row.fabric,
        created_at=rfc3339(row.created_at),
        view=cast(View, row.view),
        envelope=DSSEEnvelope.model_validate_json(row.envelope),
    )


def list_proofs(
    uow: UnitOfWork,
    *,
    tenant: str | None,
    fabric: str | None,
    since: datetime | None,
    limit: int,
    cursor: str | None,
    view: View | None = None,
) -> Page[ProofView]:
    """Stored proofs in id order, filtered (`view`: only proofs of that view), in a page."""
    with uow.transaction(read_only=True) as tx:
        query = select(m.Proof)
        if tenant is not None:
            query = query.where(m.Proof.tenant == tenant)
        if view is not None:
            query = query.where(m.Proof.view == view)
        if fabric is not None:
            query = query.where(m.Proof.fabric == fabric)
        if since is not None:
            query = query.where(col(m.Proof.created_at) >= since)
        page, total, following = page_rows(tx.session, query, col(m.Proof.id), limit, cursor)
        return Page(data=[_view(row) for row in page], count=total, next=following)


def get_proof(
    uow: UnitOfWork, *, proof_id: str, tenant: str | None, view: View | None = None
) -> ProofView:
    """One stored proof; one of another tenant than `tenant` or view than `view` is a 404."""
    with uow.transaction(read_only=True) as tx:
        row = tx.session.get(m.Proof, proof_id)
        if row is None or tenant not in (None, row.tenant) or view not in (None, row.view):
            raise NotFoundError(f"proof '{proof_id}' does not exist", resource="proof")
        return _view(row)
