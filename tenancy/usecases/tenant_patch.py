"""PATCH /v1/tenants/{tenant}: an operator changes a tenant's quota, class or account.

Verified like any change: the tenant's new facts are checked against the policy (a QoS class
its kind may not hold, a quota below what it holds: 409 with counterexamples), each fabric where
it holds something is verified and audited (its facts are in the tenant's digest group), and
the tenant's open usage intervals are restated from now on when its class or billing account
changes (intervals copy both at opening time, so billing splits at the change).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, union
from sqlalchemy import select as core_select
from sqlmodel import col, select

from policies.errors import ConflictError
from policies.policy import Policy, TenantKind
from policies.verdict import Counterexample, Rule
from tenancy import models as m
from tenancy.gate.change_check import ChangeScope
from tenancy.gate.verification import commit_gate
from tenancy.record import audit_log
from tenancy.record.policy_store import current_policy
from tenancy.record.snapshot.peerings import accepted_peering_fabrics
from tenancy.schemas import TenantView
from tenancy.schemas.tenants import TenantPatch
from tenancy.store.locks import lock_fabrics, lock_tenant
from tenancy.store.lookups import qos_class_named
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases.quotas import policy_refusal, tenant_quota_violations
from tenancy.usecases.tenants import tenant_view


def patch_tenant(uow: UnitOfWork, *, name: str, spec: TenantPatch) -> TenantView:
    """Change the members `spec` gives; verified, audited (``tenant.update``), all or nothing.

    A patch that changes nothing writes nothing and answers the tenant as it is.

    Raises:
        NotFoundError: no tenant or QoS class has this name.
        ConflictError: the tenant is offboarded.
        IsolationViolationError: the new class or quota breaks the policy, or a fabric would
            not hold (409 with counterexamples); nothing was changed.
    """
    with uow.transaction() as tx:
        return patch_tenant_in(tx, name=name, spec=spec)


def patch_tenant_in(tx: Tx, *, name: str, spec: TenantPatch) -> TenantView:
    """`patch_tenant` inside the caller's transaction."""
    # Exclusive: allocations of the tenant (they hold the row shared) count its nodes against
    # the quota before or after this change, never beside it.
    tenant = lock_tenant(tx.session, name, exclusive=True)
    if tenant.status != "active":
        raise ConflictError(f"tenant '{name}' is {tenant.status}", tenant=name)
    changes = _changes(tx, tenant, spec)
    qos_name = _qos_name(tx, tenant)
    if not changes:
        return tenant_view(tenant, qos_name)
    fabrics = _fabrics_of(tx, tenant)
    lock_fabrics(tx.session, fabrics)
    policy = current_policy(tx.session)  # after the fabric locks: the policy may not move
    qos_name = spec.qos_class or qos_name
    if "qos_class_id" in changes or "billing_account" in changes:
        _restate_usage(tx, tenant, qos_name, changes.get("billing_account"))
    for field, value in changes.items():
        setattr(tenant, field, value)
    tx.session.add(tenant)
    tx.session.flush()
    _ensure_policy_allows(tx, policy, tenant, qos_name if "qos_class_id" in changes else None)
    _gate(tx, tenant, fabrics)
    return tenant_view(tenant, qos_name)


def _changes(tx: Tx, tenant: m.Tenant, spec: TenantPatch) -> dict[str, Any]:
    """The row's columns the patch changes, with their new values."""
    given = spec.model_fields_set
    changes: dict[str, Any] = {}
    if "max_nodes" in given and spec.max_nodes != tenant.max_nodes:
        changes["max_nodes"] = spec.max_nodes
    if spec.qos_class is not None:
        qos = qos_class_named(tx.session, spec.qos_class)  # NotFoundError for an unknown one
        if qos.id != tenant.qos_class_id:
            changes["qos_class_id"] = m.pk(qos)
    account = spec.billing_account
    if account is not None and account != (tenant.billing_account or tenant.name):
        changes["billing_account"] = account
    return changes


def _qos_name(tx: Tx, tenant: m.Tenant) -> str:
    qos = tx.session.get(m.QosClass, tenant.qos_class_id)
    assert qos is not None  # a foreign key guarantees it
    return qos.name


def _ensure_policy_allows(tx: Tx, policy: Policy, tenant: m.Tenant, new_class: str | None) -> None:
    """Refuse a class the kind may not hold and a quota below what the tenant holds, at once.

    A new class is refused whether or not the tenant holds anything yet; one 409 carries the
    counterexamples of both rules.
    """
    violations = [] if new_class is None else _class_violations(policy, tenant, new_class)
    violations += tenant_quota_violations(tx, tenant)
    if violations:
        rules = sorted({c.rule.value for c in violations})
        raise policy_refusal(
            f"the change breaks the policy ({', '.join(rules)}); nothing was changed", violations
        )


def _class_violations(policy: Policy, tenant: m.Tenant, qos_name: str) -> list[Counterexample]:
    allowed = policy.for_tenant_kind(tenant.kind).qos_classes
    if allowed is None or qos_name in allowed:
        return []
    kind = TenantKind(tenant.kind).value
    listed = ", ".join(repr(name) for name in sorted(allowed)) or "no class"
    return [
        Counterexample(
            Rule.POLICY_QOS_CLASS,
            f"tenant:{tenant.name} ({kind}) would hold QoS class {qos_name!r}; "
            f"{kind} tenants may hold {listed}",
        )
    ]


def _fabrics_of(tx: Tx, tenant: m.Tenant) -> list[m.Fabric]:
    """Where the tenant holds a segment, a grant or an accepted peering, in id (lock) order."""
    held = union(
        core_select(col(m.Segment.fabric_id)).where(
            col(m.Segment.tenant_id) == m.pk(tenant), col(m.Segment.state) == "active"
        ),
        core_select(col(m.Grant.fabric_id)).where(
            col(m.Grant.tenant_id) == m.pk(tenant), col(m.Grant.revoked_at).is_(None)
        ),
        accepted_peering_fabrics(m.pk(tenant)),
    )
    query = select(m.Fabric).where(col(m.Fabric.id).in_(held)).order_by(col(m.Fabric.id))
    return list(tx.session.exec(query))


def _gate(tx: Tx, tenant: m.Tenant, fabrics: list[m.Fabric]) -> None:
    """Verify and audit each fabric where the tenant holds something (or audit the change once)."""
    target = f"tenants/{tenant.name}"
    for fabric in fabrics:
        commit_gate(tx, fabric, "tenant.update", target, ChangeScope.tenant(tenant.name))
    if not fabrics:
        audit_log.record(tx, "tenant.update", target)


def _restate_usage(tx: Tx, tenant: m.Tenant, qos_name: str, account: str | None) -> None:
    """End the tenant's open usage intervals now and open their like with the new names."""
    tx.session.flush()
    open_rows = list(
        tx.session.exec(
            select(m.UsageInterval).where(
                m.UsageInterval.tenant_id == tenant.id, col(m.UsageInterval.ended_at).is_(None)
            )
        )
    )
    if not open_rows:
        return
    copies = [
        row.model_dump(exclude={"id", "ended_at"})
        | {
            "qos_class": qos_name,
            "billing_account": account or row.billing_account,
            "started_at": tx.now,
        }
        for row in open_rows
    ]
    for row in open_rows:
        row.ended_at = tx.now
        tx.session.add(row)
    tx.session.flush()
    tx.session.connection().execute(insert(m.UsageInterval), copies)
