"""What every technology's snapshot shares: nodes with their holders, and active grants."""

from __future__ import annotations

from sqlalchemy import select
from sqlmodel import Session, col

from policies.model import Grant, Node, NodeRole, Owner
from tenancy import models as m
from tenancy.db import fetch_all


def nodes_of(session: Session, fabric: m.Fabric) -> tuple[Node, ...]:
    rows = fetch_all(
        session,
        select(col(m.Node.name), col(m.Node.role), col(m.Tenant.name), col(m.Service.name))
        .where(col(m.Node.fabric_id) == fabric.id)
        .outerjoin(m.NodeAssignment, col(m.NodeAssignment.node_id) == m.Node.id)
        .outerjoin(m.Allocation, col(m.Allocation.id) == m.NodeAssignment.allocation_id)
        .outerjoin(m.Tenant, col(m.Tenant.id) == m.Allocation.tenant_id)
        .outerjoin(m.Service, col(m.Service.id) == m.NodeAssignment.service_id),
    )
    return tuple(
        Node(name, NodeRole(role), _owners(tenant, service)) for name, role, tenant, service in rows
    )


def _owners(tenant: str | None, service: str | None) -> tuple[Owner, ...]:
    if tenant is not None:
        return (Owner.tenant(tenant),)
    if service is not None:
        return (Owner.service(service),)
    return ()


def grants_of(session: Session, fabric: m.Fabric) -> tuple[Grant, ...]:
    rows = fetch_all(
        session,
        select(col(m.Tenant.name), col(m.Service.name))
        .select_from(m.Grant)
        .join(m.Tenant, col(m.Tenant.id) == m.Grant.tenant_id)
        .join(m.Service, col(m.Service.id) == m.Grant.service_id)
        .where(col(m.Grant.fabric_id) == fabric.id, col(m.Grant.revoked_at).is_(None)),
    )
    return tuple(sorted(Grant(tenant, service) for tenant, service in rows))
