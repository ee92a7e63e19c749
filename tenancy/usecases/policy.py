"""Use cases for the policy document: read it, change it verified, read its versions.

A change is verified like any other: the new version is written in the change's transaction,
every fabric is verified whole under it (each under its lock) and the node quotas of every
tenant are checked; if any fabric would not hold or any quota is exceeded the change is refused
with the counterexamples of all of them (409) and nothing is written. On success each fabric's
digest state is rebuilt (the policy version is part of the digest) and gets an audited
``policy.update`` entry and a snapshot history row naming the version.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func
from sqlmodel import col, select

from policies.errors import (
    ConflictError,
    InvalidValueError,
    IsolationViolationError,
    NotFoundError,
)
from policies.policy import DEFAULT_POLICY, Policy
from tenancy import models as m
from tenancy.gate.verification import commit_gate, ensure_isolated
from tenancy.record import audit_log
from tenancy.record.policy_store import (
    current_policy,
    newest_version,
    policy_from_document,
    policy_of_row,
    remember_policy,
)
from tenancy.schemas import Page
from tenancy.schemas.policy import VERSION_MEMBERS, PolicyDocument, PolicyView
from tenancy.store.locks import lock_fabrics, lock_policy
from tenancy.store.pagination import decode_cursor, next_cursor
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases.quotas import ensure_all_within_quota

POLICY_TARGET = "policy"


def policy_view(policy: Policy, row: m.PolicyVersion | None = None) -> PolicyView:
    """The API shape of a version: its document, fingerprint and origin (none for version 0)."""
    return PolicyView.model_validate(
        {
            "version": policy.version,
            "fingerprint": policy.fingerprint,
            "created_at": None if row is None else row.created_at,
            "created_by": None if row is None else row.created_by,
            **policy.document(),
        }
    )


def get_policy(uow: UnitOfWork) -> PolicyView:
    """The policy in force: the newest version, or the built-in default (version 0)."""
    with uow.transaction(read_only=True) as tx:
        row = newest_version(tx.session)
        return policy_view(DEFAULT_POLICY if row is None else policy_of_row(row), row)


def get_policy_version(uow: UnitOfWork, *, version: int) -> PolicyView:
    """One version; 0 is the built-in default. `NotFoundError` for a version never written."""
    if version == 0:
        return policy_view(DEFAULT_POLICY)
    with uow.transaction(read_only=True) as tx:
        row = tx.session.get(m.PolicyVersion, version)
        if row is None:
            raise NotFoundError(
                f"policy version {version} does not exist", resource="policy-version"
            )
        return policy_view(policy_of_row(row), row)


def list_policy_versions(uow: UnitOfWork, *, limit: int, cursor: str | None) -> Page[PolicyView]:
    """The stored versions, oldest first (version 0, the default, is not stored nor listed)."""
    after = _cursor_version(decode_cursor(cursor))
    with uow.transaction(read_only=True) as tx:
        total = tx.session.exec(select(func.count()).select_from(m.PolicyVersion)).one()
        query = select(m.PolicyVersion).where(col(m.PolicyVersion.version) > after)
        rows = list(tx.session.exec(query.order_by(col(m.PolicyVersion.version)).limit(limit + 1)))
        views = [policy_view(policy_of_row(row), row) for row in rows[:limit]]
        keys = [str(view.version) for view in views]
        return Page(data=views, count=total, next=next_cursor(keys, limit, len(rows) > limit))


def _cursor_version(after: str | None) -> int:
    """The version a cursor resumes after (numbers, not text: version 10 follows 9)."""
    if after is None:
        return 0
    if not (after.isascii() and after.isdigit() and len(after) <= 10):
        raise InvalidValueError("cursor is not valid", parameter="cursor")
    return int(after)


def put_policy(uow: UnitOfWork, *, document: PolicyDocument) -> PolicyView:
    """Make `document` the policy in force, verified on every fabric; a no-op if it changes nothing.

    Fields the document omits take the default's values. The same rules as the policy in force
    (equal fingerprint) write nothing and answer the current version.

    Raises:
        InvalidValueError: a kind names a QoS class that does not exist (422).
        IsolationViolationError: a fabric would not hold under the new policy, or a tenant would
            be over its quota (409, with every counterexample); nothing was changed.
    """
    with uow.transaction() as tx:
        lock_policy(tx.session)  # first: fabrics listed next are all there are until commit
        fabrics = list(tx.session.exec(select(m.Fabric).order_by(col(m.Fabric.id))))
        lock_fabrics(tx.session, fabrics)  # before the policy is read: changes wait for this one
        current, row = current_policy(tx.session), newest_version(tx.session)
        _check_read_as(document, policy_view(current, row))
        proposed = policy_from_document(_given(document), version=current.version + 1)
        _check_classes(tx, proposed)
        if proposed.fingerprint == current.fingerprint:
            return policy_view(current, row)
        row = _store(tx, proposed)
        _verify_everything(tx, fabrics, proposed, f"{POLICY_TARGET}/versions/{proposed.version}")
        return policy_view(proposed, row)


def _given(document: PolicyDocument) -> dict[str, Any]:
    """The rules the client wrote, omissions left out (they take the default's values)."""
    return document.model_dump(mode="json", exclude_unset=True, exclude=set(VERSION_MEMBERS))


def _check_read_as(document: PolicyDocument, in_force: PolicyView) -> None:
    """Accept a document as GET answered it: its version in force, its read-only members as is.

    Raises:
        ConflictError: `version` is not the version in force (409): read it again.
        InvalidValueError: a read-only member differs from the version in force (422).
    """
    if document.version is not None and document.version != in_force.version:
        raise ConflictError(
            f"the document was read as policy version {document.version}, but version "
            f"{in_force.version} is in force: GET /v1/policy again and reapply the change",
            policy_version=in_force.version,
        )
    for name in sorted((VERSION_MEMBERS - {"version"}) & document.model_fields_set):
        if getattr(document, name) != getattr(in_force, name):
            raise InvalidValueError(
                f"'{name}' is read-only: send it as GET /v1/policy answers it, or leave it out",
                pointer=f"/{name}",
            )


def _check_classes(tx: Tx, policy: Policy) -> None:
    """Every class a kind names must exist: a typo would lock the kind out of every class."""
    known = set(tx.session.exec(select(m.QosClass.name)))
    for kind in ("internal", "external"):
        for name in policy.for_tenant_kind(kind).qos_classes or ():
            if name not in known:
                raise InvalidValueError(
                    f"policy kind '{kind}' names QoS class '{name}', which does not exist",
                    pointer=f"/kinds/{kind}/qos_classes",
                    qos_class=name,
                )


def _store(tx: Tx, policy: Policy) -> m.PolicyVersion:
    """Write `policy` as the newest version and make it the one this transaction verifies."""
    row = m.PolicyVersion(
        version=policy.version,
        document=json.dumps(policy.document(), sort_keys=True, separators=(",", ":")),
        fingerprint=policy.fingerprint,
        created_at=tx.now,
        created_by=tx.principal.name,
    )
    tx.session.add(row)
    tx.session.flush()  # the primary key refuses a concurrent writer of the same version
    remember_policy(tx.session, policy)
    return row


def _verify_everything(tx: Tx, fabrics: list[m.Fabric], policy: Policy, target: str) -> None:
    """Gate every fabric and check every quota; refuse with the counterexamples of both.

    A dry run's gate only records (its view reports each fabric's verdict); a quota refusal
    then verifies the fabrics itself, so that 409 too names every counterexample.
    """
    refused = _gate_every_fabric(tx, fabrics, target)
    try:
        ensure_all_within_quota(tx, policy)
    except IsolationViolationError as quota:
        raise _refusal(refused or _verify_each(tx, fabrics), quota) from None
    if refused:
        raise _refusal(refused)


Refused = list[tuple[m.Fabric, IsolationViolationError]]


def _gate_every_fabric(tx: Tx, fabrics: list[m.Fabric], target: str) -> Refused:
    """Verify and audit every fabric whole; the fabrics that refused, with their refusals."""
    refused: Refused = []
    for fabric in fabrics:
        try:
            commit_gate(tx, fabric, "policy.update", target)
        except IsolationViolationError as error:
            refused.append((fabric, error))
    if not fabrics:
        audit_log.record(tx, "policy.update", target)
    return refused


def _verify_each(tx: Tx, fabrics: list[m.Fabric]) -> Refused:
    """The fabrics whose pending state does not verify (the gate's refusal for each)."""
    refused: Refused = []
    for fabric in fabrics:
        try:
            ensure_isolated(tx, fabric)
        except IsolationViolationError as error:
            refused.append((fabric, error))
    return refused


def _refusal(
    refused: Refused, quota: IsolationViolationError | None = None
) -> IsolationViolationError:
    """One 409 for every fabric the policy would break and every quota it would exceed.

    Each fabric's counterexamples name their fabric; quota ones hold across all fabrics.
    """
    examples = [
        {**example, "fabric": fabric.name}
        for fabric, error in refused
        for example in error.extensions.get("counterexamples", [])
    ]
    over = [] if quota is None else list(quota.extensions.get("counterexamples", []))
    names = ", ".join(f"'{fabric.name}'" for fabric, _ in refused) or "none"
    return IsolationViolationError(
        f"the policy would not hold on fabric(s) {names} ({len(examples)} counterexample(s)) "
        f"and would exceed {len(over)} node quota(s); nothing was changed",
        counterexamples=examples + over,
        fabrics=[
            {"fabric": fabric.name, "snapshot_digest": error.extensions.get("snapshot_digest")}
            for fabric, error in refused
        ],
    )
