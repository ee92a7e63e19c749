"""Default grants: services a tenant's kind gets on its first allocation on a fabric.

The policy names them per kind (`TenantKindPolicy.default_grants`). On a tenant's first
allocation on a fabric (it held no other there), each named service that exists on that fabric,
whose visibility admits the tenant's kind and that the tenant is not granted yet, is granted in the
allocation's transaction: verified and audited like any grant (``grant.create``), with its usage
interval. A service the fabric lacks is skipped: policies name services across fabrics.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import bindparam, exists
from sqlalchemy import select as core_select
from sqlmodel import col, select

from policies.policy import Policy, TenantKind
from tenancy import models as m
from tenancy.record.policy_store import current_policy
from tenancy.store.uow import Tx
from tenancy.usecases.grant_records import record_grant


def pending_defaults(tx: Tx, tenant: m.Tenant, fabric: m.Fabric) -> tuple[str, ...]:
    """The default grants an allocation about to be made would bring (before it is written).

    Nothing unless the kind has default grants and the tenant holds no allocation on the
    fabric yet; read after the fabric's lock.
    """
    names = current_policy(tx.session).for_tenant_kind(tenant.kind).default_grants
    if not names:
        return ()
    values = {"tenant": m.pk(tenant), "fabric": m.pk(fabric)}
    held = tx.session.connection().execute(_HOLDS_ALLOCATION, values).scalar()
    return () if held else names


def grant_defaults(tx: Tx, tenant: m.Tenant, fabric: m.Fabric, names: Collection[str]) -> None:
    """Grant the tenant each service of `names` the fabric has and the policy lets it see."""
    if not names:
        return
    policy = current_policy(tx.session)
    for service in _grantable(tx, tenant, fabric, names, policy):
        record_grant(tx, tenant, fabric, service)


def _grantable(
    tx: Tx, tenant: m.Tenant, fabric: m.Fabric, names: Collection[str], policy: Policy
) -> list[m.Service]:
    """The fabric's services of `names` not granted to the tenant yet and visible to its kind."""
    granted = select(m.Grant.service_id).where(
        m.Grant.tenant_id == tenant.id, col(m.Grant.revoked_at).is_(None)
    )
    query = (
        select(m.Service)
        .where(
            m.Service.fabric_id == fabric.id,
            col(m.Service.name).in_(sorted(names)),
            col(m.Service.id).not_in(granted),
        )
        .order_by(col(m.Service.name))
    )
    kind = TenantKind(tenant.kind)
    return [s for s in tx.session.exec(query) if policy.visibility(s.name).admits(kind)]


# Built once: the first-allocation check runs on every allocation whose kind has defaults.
_HOLDS_ALLOCATION = core_select(
    exists().where(
        col(m.Allocation.tenant_id) == bindparam("tenant"),
        col(m.Allocation.fabric_id) == bindparam("fabric"),
        col(m.Allocation.released_at).is_(None),
    )
)
