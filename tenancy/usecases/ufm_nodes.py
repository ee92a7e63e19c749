"""The UFM-compatible API's node rules: a port of a free node allocates it, releases end it.

A scheduler puts ports in partitions; isofabric gives nodes to tenants. A port of a free compute
node added to a tenant's partition allocates the node to the tenant (an allocation whose origin
is the orchestrator, so the audit log and usage records say who asked). Where the policy says
`release_on_last_removal`, such an allocation ends when none of its ports is left in the tenant's
additional partitions (a Slurm epilog's removal), so that nodes are not held, nor billed, for
ever. A port someone else holds, or of a node that is not a compute node, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from policies.errors import ConflictError, IsofabricError
from policies.model import NodeRole
from tenancy import models as m
from tenancy.record.policy_store import current_policy
from tenancy.schemas import AllocationCreate
from tenancy.schemas.ufm import guid_text
from tenancy.store.uow import Tx
from tenancy.usecases import allocations
from tenancy.usecases.ufm_views import FacadeScope

ORIGIN = "orchestrator"


@dataclass(frozen=True, slots=True)
class PortHolder:
    """A port's node, the node's role, and the tenant or service holding it (None: free)."""

    node: str
    role: str
    tenant_id: int | None
    service_id: int | None


def ports(session: Session, fabric_name: str, guids: list[str]) -> dict[str, PortHolder]:
    """The fabric's ports among `guids`: their node, its role and who holds it."""
    if not guids:
        return {}
    query = (
        core_select(
            col(m.Port.guid), col(m.Node.name), col(m.Node.role),
            col(m.Allocation.tenant_id), col(m.NodeAssignment.service_id),
        )
        .join(m.Node, col(m.Node.id) == col(m.Port.node_id))
        .join(m.Fabric, col(m.Fabric.id) == col(m.Port.fabric_id))
        .join(m.NodeAssignment, col(m.NodeAssignment.node_id) == col(m.Node.id), isouter=True)
        .join(
            m.Allocation,
            col(m.Allocation.id) == col(m.NodeAssignment.allocation_id),
            isouter=True,
        )
        .where(col(m.Fabric.name) == fabric_name, col(m.Port.guid).in_(guids))
    )  # fmt: skip
    found = session.execute(query).all()
    return {guid: PortHolder(node, role, t, s) for guid, node, role, t, s in found}


def allocate_free_nodes(tx: Tx, scope: FacadeScope, tenant: m.Tenant, guids: list[str]) -> bool:
    """Allocate to the tenant the free compute nodes among the ports; whether it did any.

    Refuses a port someone else holds, and a port of a node that is not a compute node.
    """
    free: list[str] = []
    for guid, holder in ports(tx.session, scope.fabric, guids).items():
        if holder.tenant_id == tenant.id:
            continue
        if holder.tenant_id is not None or holder.service_id is not None:
            raise _held_refusal(tx, scope, guid, holder)
        if holder.role != NodeRole.COMPUTE:
            raise ConflictError(
                f"port {guid_text(int(guid, 16))} is on a {holder.role} node: only compute "
                "nodes are given to tenants",
                guid=guid_text(int(guid, 16)),
                reason="node-role",
            )
        free.append(holder.node)
    if not free:
        return False
    spec = AllocationCreate(fabric=scope.fabric, nodes=sorted(set(free)))
    allocations.allocate_in(tx, tenant_name=tenant.name, spec=spec, origin=ORIGIN)
    return True


def _held_refusal(tx: Tx, scope: FacadeScope, guid: str, holder: PortHolder) -> ConflictError:
    """A port someone else holds; the holder is named only to a fabric-wide caller."""
    shown = guid_text(int(guid, 16))
    if scope.tenant is None and holder.tenant_id is not None:
        owner = tx.session.get(m.Tenant, holder.tenant_id)
        named = f"tenant '{owner.name}'" if owner else "another tenant"
        return ConflictError(
            f"port {shown} is on node '{holder.node}', held by {named}",
            guid=shown, owner=named, reason="foreign-guid",
        )  # fmt: skip
    return ConflictError(
        f"port {shown} is on a node this token's tenant does not hold",
        guid=shown,
        reason="foreign-guid",
    )


def tenant_ports(session: Session, fabric_name: str, tenant: m.Tenant) -> dict[str, str]:
    """The tenant's port GUIDs on the fabric -> the allocation holding the node."""
    query = (
        select(m.Port.guid, m.Allocation.id)
        .join(m.NodeAssignment, col(m.NodeAssignment.node_id) == col(m.Port.node_id))
        .join(m.Allocation, col(m.Allocation.id) == col(m.NodeAssignment.allocation_id))
        .join(m.Fabric, col(m.Fabric.id) == col(m.Port.fabric_id))
        .where(m.Fabric.name == fabric_name, m.Allocation.tenant_id == tenant.id)
    )
    return dict(session.exec(query).all())


def release_from_default(
    tx: Tx, scope: FacadeScope, tenant: m.Tenant, leaving: set[str], refusal: IsofabricError
) -> bool:
    """Ports leaving the default partition: their nodes' allocations end (whether any did).

    Only where the policy releases on last removal, and only allocations the orchestrator made
    with no port left in an additional partition; otherwise `refusal` is raised. A GUID that
    is not a port of the tenant's is no member: a no-op.
    """
    own = tenant_ports(tx.session, scope.fabric, tenant)
    leaving = {g for g in leaving if g in own}
    if not leaving:
        return False
    releasable = _releasable(tx.session, scope, tenant, leaving)
    if not releases(tx, tenant) or any(own[g] not in releasable for g in leaving):
        raise refusal
    return _release(tx, tenant, releasable)


def release_if_last(tx: Tx, scope: FacadeScope, tenant: m.Tenant, left: set[str]) -> bool:
    """Release what the orchestrator allocated once no port of it is in an additional partition."""
    if not left or not releases(tx, tenant):
        return False
    return _release(tx, tenant, _releasable(tx.session, scope, tenant, left))


def releases(tx: Tx, tenant: m.Tenant) -> bool:
    """Whether the policy of the tenant's kind says `release_on_last_removal`."""
    return current_policy(tx.session).for_tenant_kind(tenant.kind).release_on_last_removal


def _releasable(session: Session, scope: FacadeScope, tenant: m.Tenant, left: set[str]) -> set[str]:
    """Open orchestrator allocations holding a port of `left`, with no port in a partition."""
    own = tenant_ports(session, scope.fabric, tenant)
    touched = {own[g] for g in left if g in own}
    if not touched:
        return set()
    origins = dict(
        session.exec(
            select(m.Allocation.id, m.Allocation.origin).where(col(m.Allocation.id).in_(touched))
        ).all()
    )
    in_partitions = _guids_in_partitions(session, tenant)
    return {
        allocation
        for allocation in touched
        if origins.get(allocation) == ORIGIN
        and not any(a == allocation and g in in_partitions for g, a in own.items())
    }


def _guids_in_partitions(session: Session, tenant: m.Tenant) -> set[str]:
    session.flush()
    query = (
        select(m.PartitionMember.guid)
        .join(m.Partition, col(m.Partition.id) == col(m.PartitionMember.partition_id))
        .where(m.Partition.tenant_id == tenant.id)
    )
    return set(session.exec(query))


def _release(tx: Tx, tenant: m.Tenant, allocation_ids: set[str]) -> bool:
    for allocation_id in sorted(allocation_ids):
        allocations.release_allocation_in(tx, tenant_name=tenant.name, allocation_id=allocation_id)
    return bool(allocation_ids)
