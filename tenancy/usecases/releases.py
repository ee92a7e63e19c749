"""Ending what a tenant holds: one allocation (release), or everything (offboarding).

A release is half of the mutations a busy fabric sees, so its writes are prepared Core
statements (rows the session already holds are refreshed after them): the assignments go, the
nodes turn free (or draining), the usage intervals end and, with the tenant's last allocation on
the fabric, its segment is released (quarantined: tenancy/record/quarantine.py). The callers
hold the fabric's lock and verify the result (`commit_gate`).
"""

from __future__ import annotations

from sqlalchemy import bindparam, delete, union, update
from sqlalchemy import select as core_select
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import col, select

from policies.errors import NotFoundError
from tenancy import models as m
from tenancy.gate.change_check import ChangeScope
from tenancy.gate.verification import commit_gate
from tenancy.models.columns import UtcDateTime
from tenancy.record.node_states import release_nodes
from tenancy.record.partitions import drop_node_memberships, drop_tenant_partitions
from tenancy.record.quarantine import release_segment, release_unused
from tenancy.store.db import fetch_all, forget_loaded
from tenancy.store.locks import lock_fabrics
from tenancy.store.lookups import fabric_with_id
from tenancy.store.uow import Tx
from tenancy.usecases import usage
from tenancy.usecases.peerings import end_tenant_peerings, open_peering_fabric_ids


def release_held(tx: Tx, tenant: m.Tenant, allocation: m.Allocation) -> None:
    """End one allocation of `tenant`; the caller holds the lock of the allocation's fabric.

    Raises:
        NotFoundError: the allocation was released meanwhile (checked and marked by one
            statement, under the lock).
    """
    tx.session.flush()  # Core statements: this transaction's pending changes first
    connection = tx.session.connection()
    values = {"allocation": allocation.id, "now": tx.now}
    if connection.execute(_MARK_RELEASED, values).first() is None:
        raise NotFoundError(f"allocation '{allocation.id}' was released meanwhile")
    set_committed_value(allocation, "released_at", tx.now)
    taken = connection.execute(_TAKE_ASSIGNMENTS, {"allocation": allocation.id})
    node_ids = [node_id for (node_id,) in taken]
    forget_loaded(tx.session, m.NodeAssignment, node_ids)
    release_nodes(tx.session, allocation.fabric_id, node_ids)  # allocated -> free or draining
    drop_node_memberships(tx, allocation.fabric_id, m.pk(tenant), node_ids)
    usage.close_allocation_intervals(tx, allocation.id)
    release_unused(tx, allocation.fabric_id, tenant_id=m.pk(tenant))


def release_tenant_everywhere(tx: Tx, tenant: m.Tenant) -> None:
    """End a tenant's peerings, release its allocations and grants (offboarding); verify.

    The caller holds the tenant's lock exclusively (`tenancy.store.locks.lock_tenant`): no
    allocation, grant or peering request of the tenant is in flight, so the fabrics found here are
    all it holds anything on. Each peering ends as `DELETE .../peerings/{id}` would (its own
    verified, audited ``peering.end``), before the release.
    """
    touched = {
        row[0]
        for row in fetch_all(
            tx.session,
            union(
                core_select(col(m.Allocation.fabric_id)).where(
                    col(m.Allocation.tenant_id) == tenant.id
                ),
                core_select(col(m.Grant.fabric_id)).where(col(m.Grant.tenant_id) == tenant.id),
                core_select(col(m.Partition.fabric_id)).where(
                    col(m.Partition.tenant_id) == tenant.id
                ),
            ),
        )
    }
    fabrics = [fabric_with_id(tx.session, fabric_id) for fabric_id in sorted(touched)]
    peered = [fabric_with_id(tx.session, f) for f in open_peering_fabric_ids(tx.session, tenant)]
    lock_fabrics(tx.session, fabrics + peered)  # all at once: the lock order is by id
    end_tenant_peerings(tx, tenant)
    _release_everything(tx, tenant)
    for fabric in fabrics:
        scope = ChangeScope.tenant(tenant.name)
        commit_gate(tx, fabric, "tenant.release", f"tenants/{tenant.name}", scope)


def _release_everything(tx: Tx, tenant: m.Tenant) -> None:
    for allocation in list(
        tx.session.exec(
            select(m.Allocation).where(
                m.Allocation.tenant_id == tenant.id, col(m.Allocation.released_at).is_(None)
            )
        )
    ):
        release_held(tx, tenant, allocation)
    for grant in tx.session.exec(
        select(m.Grant).where(m.Grant.tenant_id == tenant.id, col(m.Grant.revoked_at).is_(None))
    ):
        grant.revoked_at = tx.now
        tx.session.add(grant)
        usage.close_grant_interval(tx, grant.id)
    usage.close_tenant_intervals(tx, tenant)  # offboarding: anything still open ends now
    drop_tenant_partitions(tx, m.pk(tenant))
    held = select(m.Segment).where(m.Segment.tenant_id == tenant.id, m.Segment.state == "active")
    for segment in list(tx.session.exec(held)):
        release_segment(tx, segment)
    tx.session.flush()


# Built once: a release is a handful of prepared statements.
_TAKE_ASSIGNMENTS = (
    delete(m.NodeAssignment)
    .where(col(m.NodeAssignment.allocation_id) == bindparam("allocation"))
    .returning(col(m.NodeAssignment.node_id))
)
_MARK_RELEASED = (
    update(m.Allocation)
    .where(col(m.Allocation.id) == bindparam("allocation"), col(m.Allocation.released_at).is_(None))
    .values(released_at=bindparam("now", type_=UtcDateTime()))
    .returning(col(m.Allocation.id))
)
