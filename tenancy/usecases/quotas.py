"""Node quotas: the nodes a tenant holds across all fabrics, against its quota.

A quota is the tenant's own `max_nodes` or else its kind's in the policy (`effective_quota`).
It is not a per-fabric rule (a fabric's verdict depends on that fabric only), so the service
counts and checks it: an allocation counts its tenant's nodes with indexed statements (cost
proportional to what the tenant holds, never to the fabric), a policy change counts every
tenant's in one grouped statement. A refusal is a 409 with ``policy-quota`` counterexamples.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import bindparam, func
from sqlalchemy import select as core_select
from sqlmodel import Session, col

from policies.errors import IsolationViolationError
from policies.model import FabricKind
from policies.policy import Policy, TenantFacts, TenantKind
from policies.policy_rules import effective_quota, quota_violations
from policies.verdict import Counterexample
from tenancy import models as m
from tenancy.record.policy_store import current_policy, tenant_facts
from tenancy.store.locks import lock_tenant_quota
from tenancy.store.uow import Tx


def facts_of(tenant: m.Tenant) -> TenantFacts:
    """What the quota rule needs about `tenant` (its class does not matter to it)."""
    return TenantFacts(tenant.name, TenantKind(tenant.kind), None, tenant.max_nodes)


def has_quota(policy: Policy, tenant: m.Tenant) -> bool:
    """Whether the tenant's own quota or its kind's limits the nodes it may hold."""
    return effective_quota(policy, facts_of(tenant)) is not None


def guard_quota(tx: Tx, tenant: m.Tenant) -> None:
    """Before the fabric locks: serialise the tenant's quota-limited changes across fabrics.

    Two allocations of one tenant on two fabrics hold different fabric locks; each would count
    without the other's nodes and both could pass. Taken only when a quota applies.
    """
    if has_quota(current_policy(tx.session), tenant):
        lock_tenant_quota(tx.session, tenant)


def held_nodes(session: Session, tenant: m.Tenant) -> int:
    """The nodes `tenant` holds on all fabrics together, this transaction's included."""
    session.flush()
    found = session.connection().execute(_HELD_BY_TENANT, {"tenant": m.pk(tenant)}).scalar()
    return int(found or 0)


def all_held_nodes(session: Session) -> dict[str, int]:
    """Tenant name -> nodes it holds on all fabrics together (tenants holding none absent)."""
    session.flush()
    return {name: int(count) for name, count in session.connection().execute(_HELD_BY_NAME)}


def ensure_tenant_within_quota(tx: Tx, tenant: m.Tenant) -> None:
    """Refuse (409) when `tenant` would hold more nodes than its quota; no count without one.

    Raises:
        IsolationViolationError: the tenant is over its quota (``policy-quota``).
    """
    refuse_over_quota(tenant_quota_violations(tx, tenant))


def tenant_quota_violations(tx: Tx, tenant: m.Tenant) -> list[Counterexample]:
    """The ``policy-quota`` counterexample of `tenant` if it holds more than its quota, or none."""
    policy = current_policy(tx.session)
    if not has_quota(policy, tenant):
        return []
    held = {tenant.name: held_nodes(tx.session, tenant)}
    return list(quota_violations(policy, [facts_of(tenant)], held))


def ensure_all_within_quota(tx: Tx, policy: Policy) -> None:
    """Refuse (409) when any tenant holds more nodes than `policy` lets it.

    Raises:
        IsolationViolationError: a tenant is over its quota (``policy-quota``).
    """
    held = all_held_nodes(tx.session)
    refuse_over_quota(quota_violations(policy, tenant_facts(tx.session, held), held))


def refuse_over_quota(violations: Iterable[Counterexample]) -> None:
    """Raise the 409 of quota counterexamples, if there are any."""
    found = list(violations)
    if found:
        raise policy_refusal(
            f"the change would exceed {len(found)} node quota(s) across all fabrics; "
            "nothing was changed",
            found,
        )


def policy_refusal(detail: str, violations: list[Counterexample]) -> IsolationViolationError:
    """A refused change's 409 for policy counterexamples about no one fabric (quota, class).

    The same shape as a fabric's refusal: the counterexamples as the verification shows them.
    """
    from tenancy.gate.verification import counterexample_view  # the gate's module reads ours

    return IsolationViolationError(
        detail,
        counterexamples=[
            # No segment in these: the technology only labels segments.
            counterexample_view(c, FabricKind.INFINIBAND).model_dump(mode="json")
            for c in violations
        ],
    )


# Built once: every quota-limited allocation counts its tenant's nodes.
_HELD = (
    core_select(func.count())
    .select_from(m.NodeAssignment)
    .join(m.Allocation, col(m.Allocation.id) == col(m.NodeAssignment.allocation_id))
)
_HELD_BY_TENANT = _HELD.where(col(m.Allocation.tenant_id) == bindparam("tenant"))
_HELD_BY_NAME = (
    core_select(col(m.Tenant.name), func.count())
    .select_from(m.NodeAssignment)
    .join(m.Allocation, col(m.Allocation.id) == col(m.NodeAssignment.allocation_id))
    .join(m.Tenant, col(m.Tenant.id) == col(m.Allocation.tenant_id))
    .group_by(col(m.Tenant.name))
)
