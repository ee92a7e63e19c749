"""Use cases for operator-owned shared services (e.g. storage) and the grants that open them.

On InfiniBand a service has its own partition: service ports are full members, and the ports of
every granted tenant become limited members (docs/facts/infiniband.md §1.3), so granted tenants
reach the service but still not each other.
"""

from __future__ import annotations

from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from policies.errors import ConflictError, NotFoundError
from policies.model import NodeRole, Owner
from tenancy import models as m
from tenancy.gate.change_check import ChangeScope
from tenancy.gate.verification import commit_gate
from tenancy.schemas import GrantCreate, GrantView, Page, ServiceCreate, ServiceView
from tenancy.store.db import fetch_all
from tenancy.store.history import GrantState, in_state, is_in_state
from tenancy.store.locks import lock_active_tenant, lock_fabric
from tenancy.store.lookups import fabric_named, node_named, service_named, tenant_named
from tenancy.store.pagination import page_rows
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases import usage
from tenancy.usecases.allocations import assign_nodes, ensure_segment, segment_view
from tenancy.usecases.grant_records import record_grant


def create_service(uow: UnitOfWork, *, fabric_name: str, spec: ServiceCreate) -> ServiceView:
    """Create a shared service on free storage or compute nodes, with its own partition."""
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        if tx.session.exec(
            select(m.Service).where(m.Service.fabric_id == fabric.id, m.Service.name == spec.name)
        ).first():
            raise ConflictError(f"service '{spec.name}' already exists on '{fabric_name}'")
        nodes = [node_named(tx.session, fabric, name) for name in spec.nodes]
        for node in nodes:
            _check_service_node(tx.session, node)
        service = m.Service(fabric_id=m.pk(fabric), name=spec.name, created_at=tx.now)
        tx.session.add(service)
        tx.session.flush()
        assign_nodes(tx.session, nodes, service_id=m.pk(service))
        ensure_segment(tx, fabric, service_id=m.pk(service))
        target = f"fabrics/{fabric.name}/services/{service.name}"
        scope = ChangeScope.of([Owner.service(service.name)])
        commit_gate(tx, fabric, "service.create", target, scope)
        return _service_view(tx.session, service, fabric)


def _check_service_node(session: Session, node: m.Node) -> None:
    if node.role == NodeRole.MANAGEMENT.value:
        raise ConflictError(f"node '{node.name}' is a management node", node=node.name)
    if session.get(m.NodeAssignment, node.id) is not None:
        raise ConflictError(f"node '{node.name}' is already held", node=node.name)


def _service_view(session: Session, service: m.Service, fabric: m.Fabric) -> ServiceView:
    rows = fetch_all(
        session,
        core_select(col(m.Node.name))
        .join(m.NodeAssignment, col(m.NodeAssignment.node_id) == col(m.Node.id))
        .where(col(m.NodeAssignment.service_id) == service.id),
    )
    segment = segment_view(session, fabric, service_id=m.pk(service))
    return ServiceView(
        name=service.name,
        fabric=fabric.name,
        nodes=sorted(r[0] for r in rows),
        segment=segment,
        created_at=service.created_at,
    )


def list_services(
    uow: UnitOfWork, *, fabric_name: str, limit: int, cursor: str | None
) -> Page[ServiceView]:
    """The fabric's shared services by name, each with its nodes and segment."""
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        query = select(m.Service).where(m.Service.fabric_id == fabric.id)
        rows, total, after = page_rows(tx.session, query, col(m.Service.name), limit, cursor)
        return Page(
            data=[_service_view(tx.session, s, fabric) for s in rows], count=total, next=after
        )


def get_service(uow: UnitOfWork, *, fabric_name: str, name: str) -> ServiceView:
    """One shared service with its nodes and segment; `NotFoundError` if the fabric has none."""
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        return _service_view(tx.session, service_named(tx.session, fabric, name), fabric)


# --- grants ------------------------------------------------------------------------------------


def grant_service(uow: UnitOfWork, *, tenant_name: str, spec: GrantCreate) -> GrantView:
    """Let a tenant reach a shared service; verified before commit (P_Key budget included)."""
    with uow.transaction() as tx:
        return grant_service_in(tx, tenant_name=tenant_name, spec=spec)


def grant_service_in(tx: Tx, *, tenant_name: str, spec: GrantCreate) -> GrantView:
    """`grant_service` inside the caller's transaction (a change set's operation)."""
    # The tenant's lock first (lock order): an offboarding cannot commit in between and
    # leave the tenant with a grant it never saw.
    tenant = lock_active_tenant(tx.session, tenant_name)
    fabric = lock_fabric(tx.session, fabric_named(tx.session, spec.fabric))
    service = service_named(tx.session, fabric, spec.service)
    if tx.session.exec(
        select(m.Grant).where(
            m.Grant.tenant_id == tenant.id,
            m.Grant.service_id == service.id,
            col(m.Grant.revoked_at).is_(None),
        )
    ).first():
        raise ConflictError(f"tenant '{tenant_name}' already has a grant for '{spec.service}'")
    return _grant_view(tx.session, record_grant(tx, tenant, fabric, service))


def _grant_view(session: Session, grant: m.Grant) -> GrantView:
    tenant = session.get(m.Tenant, grant.tenant_id)
    fabric = session.get(m.Fabric, grant.fabric_id)
    service = session.get(m.Service, grant.service_id)
    assert tenant is not None and fabric is not None and service is not None
    segment = segment_view(session, fabric, service_id=m.pk(service))
    return GrantView(
        id=grant.id,
        tenant=tenant.name,
        fabric=fabric.name,
        service=service.name,
        segment=segment,
        created_at=grant.created_at,
        revoked_at=grant.revoked_at,
    )


def list_grants(
    uow: UnitOfWork,
    *,
    tenant_name: str,
    limit: int,
    cursor: str | None,
    state: GrantState = "active",
) -> Page[GrantView]:
    """The tenant's grants in `state` (default: not revoked) in id order, with the segment."""
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        query = select(m.Grant).where(m.Grant.tenant_id == tenant.id)
        query = in_state(query, m.Grant.revoked_at, state)
        rows, total, after = page_rows(tx.session, query, col(m.Grant.id), limit, cursor)
        return Page(data=[_grant_view(tx.session, g) for g in rows], count=total, next=after)


def _grant_of(
    session: Session, tenant: m.Tenant, grant_id: str, state: GrantState = "active"
) -> m.Grant:
    grant = session.get(m.Grant, grant_id)
    if grant is None or grant.tenant_id != tenant.id or not is_in_state(grant.revoked_at, state):
        raise NotFoundError(f"tenant '{tenant.name}' has no grant '{grant_id}'", resource="grant")
    return grant


def get_grant(
    uow: UnitOfWork, *, tenant_name: str, grant_id: str, state: GrantState = "active"
) -> GrantView:
    """One of the tenant's grants in `state`; another state or another tenant's is a 404."""
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        return _grant_view(tx.session, _grant_of(tx.session, tenant, grant_id, state))


def revoke_grant(uow: UnitOfWork, *, tenant_name: str, grant_id: str) -> None:
    """Withdraw a grant: the tenant's ports leave the service partition."""
    with uow.transaction() as tx:
        revoke_grant_in(tx, tenant_name=tenant_name, grant_id=grant_id)


def revoke_grant_in(tx: Tx, *, tenant_name: str, grant_id: str) -> None:
    """`revoke_grant` inside the caller's transaction (a change set's operation)."""
    grant = _grant_of(tx.session, tenant_named(tx.session, tenant_name), grant_id)
    fabric = tx.session.get(m.Fabric, grant.fabric_id)
    assert fabric is not None  # a foreign key guarantees it
    lock_fabric(tx.session, fabric)
    tx.session.refresh(grant)  # it may have been revoked while we waited
    if grant.revoked_at is not None:
        raise NotFoundError(f"grant '{grant_id}' was revoked meanwhile", resource="grant")
    grant.revoked_at = tx.now
    tx.session.add(grant)
    usage.close_grant_interval(tx, grant.id)
    target = f"tenants/{tenant_name}/grants/{grant.id}"
    commit_gate(tx, fabric, "grant.delete", target, ChangeScope.tenant(tenant_name))
