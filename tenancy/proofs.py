"""Isolation proofs (issue 5): issue, store and list DSSE-signed in-toto Statements.

Issuing verifies the fabric, renders its artifacts, states the tenant's endpoints, ownership,
segments and reachable set, signs the Statement with the service's active key and stores the
envelope. It is recorded in the audit log (``proof.issue``) but changes no managed state.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from sqlmodel import col, select

from policies.errors import IsolationViolationError, NotFoundError
from policies.evidence.claims import claims_for
from policies.evidence.proofs import build_statement, sign_envelope
from policies.verdict import Verdict
from tenancy import audit_log, signing_keys
from tenancy import models as m
from tenancy.lookups import fabric_named, tenant_named
from tenancy.pagination import page_rows
from tenancy.schemas import DSSEEnvelope, Page, ProofCreated, ProofView
from tenancy.snapshot import load_snapshot
from tenancy.technology import verify_snapshot
from tenancy.uow import Tx, UnitOfWork
from tenancy.verification import render_fabric

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


def issue(uow: UnitOfWork, *, tenant_name: str, fabric_name: str) -> ProofCreated:
    """Verify, render and sign a proof of the tenant's isolation on the fabric; store it."""
    with uow.transaction() as tx:
        tenant = tenant_named(tx.session, tenant_name)
        fabric = fabric_named(tx.session, fabric_name)
        snapshot = load_snapshot(tx.session, fabric)
        verdict = verify_snapshot(snapshot)
        if not verdict.holds:
            raise IsolationViolationError(
                f"fabric '{fabric.name}' does not verify; no isolation proof is issued",
                snapshot_digest=verdict.snapshot_digest,
            )
        _, files = render_fabric(tx, fabric)
        subjects, claims = claims_for(snapshot, tenant.name, files)
        predicate = _predicate(tx, fabric, tenant.name, verdict) | claims
        statement = build_statement(subjects, predicate)
        envelope = sign_envelope(statement, signing_keys.signing_key(tx.session, _origin(tx)))
        proof = m.Proof(
            id=str(uuid.uuid4()),
            tenant=tenant.name,
            fabric=fabric.name,
            created_at=tx.now,
            envelope=json.dumps(envelope, sort_keys=True),
        )
        tx.session.add(proof)
        audit_log.record(
            tx,
            "proof.issue",
            f"tenants/{tenant.name}/isolation-proofs/{proof.id}",
            fabric=fabric.name,
            digest_after=verdict.snapshot_digest,
        )
        return ProofCreated(id=proof.id, envelope=DSSEEnvelope.model_validate(envelope))


def _origin(tx: Tx) -> str:
    return tx.settings.audit_origin


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
) -> Page[ProofView]:
    """Stored proofs in id order, filtered, in the list envelope."""
    with uow.transaction() as tx:
        query = select(m.Proof)
        if tenant is not None:
            query = query.where(m.Proof.tenant == tenant)
        if fabric is not None:
            query = query.where(m.Proof.fabric == fabric)
        if since is not None:
            query = query.where(col(m.Proof.created_at) >= since)
        page, total, following = page_rows(tx.session, query, col(m.Proof.id), limit, cursor)
        return Page(data=[_view(row) for row in page], count=total, next=following)


def get_proof(uow: UnitOfWork, *, proof_id: str, tenant: str | None) -> ProofView:
    """One stored proof; a proof of another tenant than `tenant` (if given) is a 404."""
    with uow.transaction() as tx:
        row = tx.session.get(m.Proof, proof_id)
        if row is None or (tenant is not None and row.tenant != tenant):
            raise NotFoundError(f"proof '{proof_id}' does not exist", resource="proof")
        return _view(row)
