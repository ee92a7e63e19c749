"""A tenant's share of a fabric's identifier pool: what its tenant roles may make it hold.

When a tenant role's request takes a new value (today: a tenant-admin accepting a peering, whose
partition's P_Key comes from the fabric's range), each tenant the value would count for must hold
less than its share: `TenantKindPolicy.pool_share` of the pool's size, the policy's
`max_pool_share_percent` of its kind. A tenant holds every value of the pool that is its own or
a peering's it is party to (either side: both consented), active or quarantined, since a
quarantined value is denied to others too. Operators are not bound (they may give a tenant
more), but what they give counts against the tenant's later takes. A tenant or service taking
back its own quarantined value takes nothing new and is never refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from sqlalchemy import Select, bindparam, func, or_
from sqlalchemy import select as core_select
from sqlmodel import col

from policies.authz import TENANT_ROLES, Role
from policies.errors import PoolShareExceededError
from tenancy import models as m
from tenancy.record.policy_store import current_policy
from tenancy.store.uow import Tx


class PoolRange(Protocol):
    """What a share is computed from: a pool's kind and range (tenancy/record/pools.py Pool)."""

    @property
    def kind(self) -> str:
        """The pool's uniqueness scope (``pkey``, ``vlan``, ``vni``, ...)."""
        ...

    @property
    def first(self) -> int:
        """The pool's first value."""
        ...

    @property
    def last(self) -> int:
        """The pool's last value."""
        ...

    @property
    def label(self) -> str:
        """What messages call a value (``P_Key``, ``VLAN``, ...)."""
        ...


# Roles whose takes the share bounds: a tenant's own, and schedulers acting for tenants on
# the UFM-compatible API (operators are not bound).
SHARE_BOUND_ROLES = TENANT_ROLES | {Role.ORCHESTRATOR}


def check_share(
    tx: Tx, fabric: m.Fabric, pool: PoolRange, owner: Mapping[str, int | str | None]
) -> None:
    """Refuse a tenant role's (or an orchestrator's) take of a value a tenant holds its share of.

    `owner` is the new value's owner columns (``tenant_id``, ``service_id``, ``peering_id``);
    a peering's value counts for both of its tenants.

    Raises:
        PoolShareExceededError: a tenant it counts for already holds its share (409).
    """
    if tx.principal.role not in SHARE_BOUND_ROLES:
        return
    for tenant_id in _tenants_of(tx, owner):
        tenant = tx.session.get(m.Tenant, tenant_id)
        assert tenant is not None  # a foreign key guarantees it
        rules = current_policy(tx.session).for_tenant_kind(tenant.kind)
        limit = rules.pool_share(pool.last - pool.first + 1)
        if held_of_pool(tx, m.pk(fabric), pool, tenant_id) >= limit:
            raise _refusal(fabric, pool, tenant, limit, rules.max_pool_share_percent)


def held_of_pool(tx: Tx, fabric_id: int, pool: PoolRange, tenant_id: int) -> int:
    """How many values of the pool the tenant holds: its own and its peerings', both states."""
    values = {"fabric": fabric_id, "kind": pool.kind, "first": pool.first, "last": pool.last}
    row = tx.session.connection().execute(_HELD, values | {"tenant": tenant_id}).one()
    return int(row[0])


def _tenants_of(tx: Tx, owner: Mapping[str, int | str | None]) -> list[int]:
    """The tenants a new value of `owner` counts for (none for a service)."""
    tenant_id, peering_id = owner.get("tenant_id"), owner.get("peering_id")
    if isinstance(tenant_id, int):
        return [tenant_id]
    if isinstance(peering_id, str):
        peering = tx.session.get(m.Peering, peering_id)
        assert peering is not None  # the caller took it for this peering
        return [peering.requester_id, peering.peer_id]
    return []


def _refusal(
    fabric: m.Fabric, pool: PoolRange, tenant: m.Tenant, limit: int, percent: int
) -> PoolShareExceededError:
    return PoolShareExceededError(
        f"tenant '{tenant.name}' already holds its share of fabric '{fabric.name}''s "
        f"{pool.label}s: {limit} ({percent} % of {pool.last - pool.first + 1}, the policy's "
        f"max_pool_share_percent for {tenant.kind} tenants; released ones count until every "
        "deploy target has read back their release); nothing was changed",
        tenant=tenant.name,
        fabric=fabric.name,
        pool=pool.kind,
        limit=limit,
    )


def _held_statement() -> Select[Any]:
    """`held_of_pool`'s count, built once: the tenant's values and its peerings' in the range."""
    peerings = core_select(col(m.Peering.id)).where(
        or_(
            col(m.Peering.requester_id) == bindparam("tenant"),
            col(m.Peering.peer_id) == bindparam("tenant"),
        )
    )
    return (
        core_select(func.count())
        .select_from(m.Segment)
        .where(
            col(m.Segment.fabric_id) == bindparam("fabric"),
            col(m.Segment.kind) == bindparam("kind"),
            col(m.Segment.value).between(bindparam("first"), bindparam("last")),
            or_(
                col(m.Segment.tenant_id) == bindparam("tenant"),
                col(m.Segment.peering_id).in_(peerings),
            ),
        )
    )


_HELD = _held_statement()
