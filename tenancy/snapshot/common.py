"""What every technology's snapshot shares: nodes with their holders, and active grants."""

from __future__ import annotations

from sqlalchemy import Select, select
from sqlmodel import Session, col

from policies.model import Grant, Node, NodeRole, Owner
from tenancy import models as m
from tenancy.db import fetch_all

# The typed row of `holders_query`: node id, name, role, holding tenant, holding service, state.
HoldersSelect = Select[int | None, str, str, str, str, str]


def holders_query(fabric_id: int) -> HoldersSelect:
    """Every node of the fabric with the tenant or service that holds it (NULL when free).

    The one node-to-owner join: snapshots read it whole, the node listing filters and pages it.
    """
    return (
        select(
            col(m.Node.id),
            col(m.Node.name),
            col(m.Node.role),
            col(m.Tenant.name),
            col(m.Service.name),
            col(m.Node.state),
        )
        .outerjoin(m.NodeAssignment, col(m.NodeAssignment.node_id) == col(m.Node.id))
        .outerjoin(m.Allocation, col(m.Allocation.id) == col(m.NodeAssignment.allocation_id))
        .outerjoin(m.Tenant, col(m.Tenant.id) == col(m.Allocation.tenant_id))
        .outerjoin(m.Service, col(m.Service.id) == col(m.NodeAssignment.service_id))
        .where(col(m.Node.fabric_id) == fabric_id)
    )


def nodes_of(session: Session, fabric: m.Fabric) -> tuple[Node, ...]:
    """The fabric's nodes as engine values, each with its holder (if any) as owner."""
    rows = fetch_all(session, holders_query(m.pk(fabric)))
    return tuple(
        Node(name, NodeRole(role), _owners(tenant, service))
        for _, name, role, tenant, service, _state in rows
    )


def _owners(tenant: str | None, service: str | None) -> tuple[Owner, ...]:
    if tenant is not None:
        return (Owner.tenant(tenant),)
    if service is not None:
        return (Owner.service(service),)
    return ()


def grants_of(session: Session, fabric: m.Fabric) -> tuple[Grant, ...]:
    """The fabric's unrevoked grants as (tenant, service) engine values, sorted."""
    rows = fetch_all(
        session,
        select(col(m.Tenant.name), col(m.Service.name))
        .select_from(m.Grant)
        .join(m.Tenant, col(m.Tenant.id) == m.Grant.tenant_id)
        .join(m.Service, col(m.Service.id) == m.Grant.service_id)
        .where(col(m.Grant.fabric_id) == fabric.id, col(m.Grant.revoked_at).is_(None)),
    )
    return tuple(sorted(Grant(tenant, service) for tenant, service in rows))
