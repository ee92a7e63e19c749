"""What every technology's snapshot shares: nodes with their holders, and active grants."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, Select, select, union
from sqlmodel import Session, col

from policies.model import Grant, Node, NodeRole, Owner, OwnerKind
from tenancy import models as m
from tenancy.db import fetch_all


@dataclass(frozen=True, slots=True)
class Context:
    """The owners (and nodes) a scoped snapshot holds in full: everything they hold and reach."""

    tenants: frozenset[str] = field(default_factory=frozenset)
    services: frozenset[str] = field(default_factory=frozenset)
    nodes: frozenset[str] = field(default_factory=frozenset)

    def owners(self) -> frozenset[Owner]:
        """The context's tenants and services as owners."""
        return frozenset(
            [Owner.tenant(t) for t in self.tenants] + [Owner.service(s) for s in self.services]
        )

    def holds(self, owner: Owner) -> bool:
        """Whether `owner` is in the context."""
        names = self.tenants if owner.kind is OwnerKind.TENANT else self.services
        return owner.name in names


# The typed row of `holders_query`: node id, name, role, holding tenant, holding service, state.
HoldersSelect = Select[int | None, str, str, str, str, str]


def holders_query(fabric_id: int, node_ids: Collection[int] | None = None) -> HoldersSelect:
    """Every node of the fabric (or those of `node_ids`) with the tenant or service holding it.

    The one node-to-owner join: snapshots read it whole, the node listing filters and pages it.
    Holders are NULL when the node is free.
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
        .where(
            col(m.Node.fabric_id) == fabric_id
            if node_ids is None
            else col(m.Node.id).in_(node_ids)  # by primary key: no scan of the fabric's nodes
        )
    )


def nodes_of(
    session: Session, fabric: m.Fabric, context: Context | None = None
) -> tuple[Node, ...]:
    """The fabric's nodes (or the context's) as engine values, each with its holder as owner.

    Sorted by name, so that a scoped snapshot lists its nodes in the whole one's order.
    """
    return tuple(node for _, node in node_rows(session, fabric, context))


def node_rows(
    session: Session, fabric: m.Fabric, context: Context | None = None
) -> list[tuple[int, Node]]:
    """(node id, engine node) pairs of the fabric or the context, sorted by node name."""
    # A context's nodes are found by id through the indexed owner paths: a filter on the
    # outer-joined names would scan every node of the fabric.
    ids = None if context is None else _context_node_ids(session, fabric, context)
    rows = fetch_all(session, holders_query(m.pk(fabric), ids))
    return sorted(
        (
            (node_id or 0, Node(name, NodeRole(role), _owners(tenant, service)))
            for node_id, name, role, tenant, service, _state in rows
        ),
        key=lambda row: row[1].name,
    )


def _context_node_ids(session: Session, fabric: m.Fabric, context: Context) -> list[int]:
    """Ids of the nodes the context's tenants and services hold, and of its named nodes."""
    parts: list[Select[Any]] = []
    if context.tenants:
        parts.append(
            select(col(m.NodeAssignment.node_id))
            .join(m.Allocation, col(m.Allocation.id) == col(m.NodeAssignment.allocation_id))
            .join(m.Tenant, col(m.Tenant.id) == col(m.Allocation.tenant_id))
            .where(col(m.Tenant.name).in_(context.tenants))
            .where(col(m.Allocation.fabric_id) == fabric.id)
        )
    if context.services:
        parts.append(
            select(col(m.NodeAssignment.node_id))
            .join(m.Service, col(m.Service.id) == col(m.NodeAssignment.service_id))
            .where(col(m.Service.name).in_(context.services))
            .where(col(m.Service.fabric_id) == fabric.id)
        )
    if context.nodes:
        parts.append(
            select(col(m.Node.id)).where(
                col(m.Node.fabric_id) == fabric.id, col(m.Node.name).in_(context.nodes)
            )
        )
    if not parts:
        return []
    return [node_id for (node_id,) in fetch_all(session, union(*parts))]


def _owners(tenant: str | None, service: str | None) -> tuple[Owner, ...]:
    if tenant is not None:
        return (Owner.tenant(tenant),)
    if service is not None:
        return (Owner.service(service),)
    return ()


def grants_of(
    session: Session, fabric: m.Fabric, context: Context | None = None
) -> tuple[Grant, ...]:
    """The fabric's unrevoked grants (between the context's owners, if given), sorted."""
    query = _grants_query(fabric)
    if context is not None:
        query = query.where(
            col(m.Tenant.name).in_(context.tenants), col(m.Service.name).in_(context.services)
        )
    rows = fetch_all(session, query)
    return tuple(sorted(Grant(tenant, service) for tenant, service in rows))


def _grants_query(fabric: m.Fabric) -> Select[str, str]:
    return (
        select(col(m.Tenant.name), col(m.Service.name))
        .select_from(m.Grant)
        .join(m.Tenant, col(m.Tenant.id) == m.Grant.tenant_id)
        .join(m.Service, col(m.Service.id) == m.Grant.service_id)
        .where(col(m.Grant.fabric_id) == fabric.id, col(m.Grant.revoked_at).is_(None))
    )


def widen(
    session: Session, fabric: m.Fabric, owners: Collection[Owner], nodes: Collection[str] = ()
) -> Context:
    """The context a change of `owners` and `nodes` needs to be verified on its own.

    Every rule's counterexample that a change can create names a touched owner or node, and its
    other side is within reach of it: the holders of touched nodes, tenants granted a touched
    service, and services granted to any of those tenants (their partitions or VRFs hold the
    tenants' ports or route targets). Nodes and grants beyond that are untouched and verified.
    """
    tenants = {o.name for o in owners if o.kind is OwnerKind.TENANT}
    services = {o.name for o in owners if o.kind is OwnerKind.SERVICE}
    for _, node in node_rows(session, fabric, Context(nodes=frozenset(nodes))):
        tenants.update(o.name for o in node.owners if o.kind is OwnerKind.TENANT)
        services.update(o.name for o in node.owners if o.kind is OwnerKind.SERVICE)
    touching = _touching(tenants, services, m.Grant.tenant_id, m.Grant.service_id)
    grants = fetch_all(session, _grants_query(fabric).where(touching))
    tenants.update(t for t, s in grants if s in services)
    grants = fetch_all(session, _grants_query(fabric).where(col(m.Tenant.name).in_(tenants)))
    services.update(s for _, s in grants)
    return Context(frozenset(tenants), frozenset(services), frozenset(nodes))


def _touching(
    tenants: Collection[str], services: Collection[str], tenant_id: Any, service_id: Any
) -> ColumnElement[bool]:
    """Rows whose tenant or service id belongs to the named owners (by the owner indexes).

    Two subqueries joined by a UNION, not an OR, so that each can use its index.
    """
    by_tenant = select(col(m.Tenant.id)).where(col(m.Tenant.name).in_(tenants))
    by_service = select(col(m.Service.id)).where(col(m.Service.name).in_(services))
    table = tenant_id.class_
    key = col(table.id)
    ids = union(
        select(key).where(col(tenant_id).in_(by_tenant)),
        select(key).where(col(service_id).in_(by_service)),
    )
    return key.in_(ids)


def owner_filter(context: Context) -> ColumnElement[bool]:
    """Segment rows that belong to one of the context's owners."""
    return _touching(context.tenants, context.services, m.Segment.tenant_id, m.Segment.service_id)
