"""What every technology's snapshot shares: nodes with their holders, and active grants."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from itertools import product
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Integer,
    Select,
    bindparam,
    literal,
    select,
    union_all,
)
from sqlmodel import Session, col

from policies.model import Grant, Node, NodeRole, Owner, OwnerKind
from tenancy import models as m
from tenancy.record.policy_store import current_policy
from tenancy.record.snapshot.leaves import leaf_neighbours
from tenancy.record.snapshot.peerings import KeyedPeering, peerings_touching
from tenancy.store.db import fetch_all
from tenancy.store.lookups import tenant_ids


@dataclass(frozen=True, slots=True)
class Context:
    """The owners (and nodes) a scoped snapshot holds in full: everything they hold and reach.

    `widen` also resolves the owners' ids, the grants and the accepted peerings between them,
    once: the scoped queries select rows by those ids (index lookups whatever the planner's
    statistics, which a freshly bulk-loaded PostgreSQL table lacks), never through joins on names.
    """

    tenants: frozenset[str] = field(default_factory=frozenset)
    services: frozenset[str] = field(default_factory=frozenset)
    nodes: frozenset[str] = field(default_factory=frozenset)
    tenant_ids: frozenset[int] = field(default_factory=frozenset)
    service_ids: frozenset[int] = field(default_factory=frozenset)
    grants: tuple[Grant, ...] = ()
    peerings: tuple[KeyedPeering, ...] = ()

    def owners(self) -> frozenset[Owner]:
        """The context's tenants and services as owners."""
        return frozenset(
            [Owner.tenant(t) for t in self.tenants] + [Owner.service(s) for s in self.services]
        )

    def holds(self, owner: Owner) -> bool:
        """Whether `owner` is in the context."""
        names = self.tenants if owner.kind is OwnerKind.TENANT else self.services
        return owner.name in names


# A select of any columns (the parts of a UNION ALL).
AnySelect = Select[*tuple[Any, ...]]
# The typed row of `holders_query`: node id, name, role, holding tenant, holding service, state.
HoldersSelect = Select[int | None, str, str, str, str, str]


def holders_query(fabric_id: int, node_ids: Collection[int] | None = None) -> HoldersSelect:
    """Every node of the fabric (or those of `node_ids`) with the tenant or service holding it.

    The one node-to-owner join: snapshots read it whole, the node listing filters and pages it.
    Holders are NULL when the node is free.
    """
    return _holders().where(
        col(m.Node.fabric_id) == fabric_id
        if node_ids is None
        else col(m.Node.id).in_(node_ids)  # by primary key: no scan of the fabric's nodes
    )


def _holders() -> HoldersSelect:
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
    if context is None:
        rows = fetch_all(session, holders_query(m.pk(fabric)))
    else:
        ids = _context_node_ids(session, fabric, context)
        found = session.connection().execute(_HOLDERS_BY_ID, {"ids": ids}) if ids else ()
        rows = [tuple(row) for row in found]
    return sorted(
        (
            (node_id or 0, Node(name, NodeRole(role), _owners(tenant, service)))
            for node_id, name, role, tenant, service, _state in rows
        ),
        key=lambda row: row[1].name,
    )


def _context_node_ids(session: Session, fabric: m.Fabric, context: Context) -> list[int]:
    """Ids of the nodes the context's tenants and services hold, and of its named nodes.

    By the owners' ids; a tenant's allocations on other fabrics are dropped here, in Python, so
    that no plan can trade the owner indexes for a scan of the fabric's allocations.
    """
    if not (context.tenant_ids or context.service_ids or context.nodes):
        return []
    values = {
        "tenant_ids": list(context.tenant_ids),
        "service_ids": list(context.service_ids),
        "fabric": m.pk(fabric),
        "names": list(context.nodes),
    }
    statement = _CONTEXT_NODE_IDS[
        bool(context.tenant_ids), bool(context.service_ids), bool(context.nodes)
    ]
    rows = session.connection().execute(statement, values)
    return sorted({node_id or 0 for node_id, fabric_id in rows if fabric_id == fabric.id})


def _context_node_ids_statement(
    tenants: bool, services: bool, nodes: bool
) -> CompoundSelect[*tuple[Any, ...]]:
    """`_context_node_ids`'s query with a part per kind of member the context has."""
    parts: list[AnySelect] = []
    if tenants:
        parts.append(
            select(col(m.NodeAssignment.node_id), col(m.Allocation.fabric_id))
            .join(m.Allocation, col(m.Allocation.id) == col(m.NodeAssignment.allocation_id))
            .where(col(m.Allocation.tenant_id).in_(bindparam("tenant_ids", expanding=True)))
        )
    if services:
        parts.append(
            select(col(m.NodeAssignment.node_id), bindparam("fabric", type_=Integer())).where(
                col(m.NodeAssignment.service_id).in_(bindparam("service_ids", expanding=True))
            )
        )
    if nodes:
        parts.append(
            select(col(m.Node.id), col(m.Node.fabric_id)).where(
                col(m.Node.fabric_id) == bindparam("fabric"),
                col(m.Node.name).in_(bindparam("names", expanding=True)),
            )
        )
    return union_all(*parts)


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
    if context is not None:
        return context.grants  # `widen` read them
    rows = session.connection().execute(_GRANTS_OF_FABRIC, {"fabric": m.pk(fabric)})
    return tuple(sorted(Grant(tenant, service) for tenant, _, service, _ in rows))


def _grants(*where: ColumnElement[bool]) -> Select[str, int | None, str, int | None]:
    """The fabric's (``fabric``) unrevoked grants: tenant name and id, service name and id."""
    return (
        select(col(m.Tenant.name), col(m.Tenant.id), col(m.Service.name), col(m.Service.id))
        .select_from(m.Grant)
        .join(m.Tenant, col(m.Tenant.id) == m.Grant.tenant_id)
        .join(m.Service, col(m.Service.id) == m.Grant.service_id)
        .where(
            col(m.Grant.fabric_id) == bindparam("fabric"), col(m.Grant.revoked_at).is_(None), *where
        )
    )


def widen(
    session: Session, fabric: m.Fabric, owners: Collection[Owner], nodes: Collection[str] = ()
) -> Context:
    """The context a change of `owners` and `nodes` needs to be verified on its own.

    Every rule's counterexample that a change can create names a touched owner or node, and its
    other side is within reach of it: the holders of touched nodes, tenants granted a touched
    service, the peers of any of those tenants (an accepted peering's partition or route-target
    imports hold both sides), and services granted to any of those tenants (their partitions or
    VRFs hold the tenants' ports or route targets). Nodes and grants beyond that are untouched
    and verified. The context carries the grants between its owners (all those of its tenants)
    and the accepted peerings of the tenants found before their peers. Under a dedicated-leaf
    policy it also holds the tenants on the touched tenants' leaves
    (tenancy/record/snapshot/leaves.py).
    """
    tenants = {o.name for o in owners if o.kind is OwnerKind.TENANT}
    services = {o.name for o in owners if o.kind is OwnerKind.SERVICE}
    if nodes:
        for _, node in node_rows(session, fabric, Context(nodes=frozenset(nodes))):
            tenants.update(o.name for o in node.owners if o.kind is OwnerKind.TENANT)
            services.update(o.name for o in node.owners if o.kind is OwnerKind.SERVICE)
    connection, fabric_id = session.connection(), m.pk(fabric)
    tenant_ids, service_ids = _owner_ids(session, fabric, tenants, services)
    if service_ids:
        values = {"fabric": fabric_id, "ids": list(service_ids.values())}
        granted = connection.execute(_GRANTS_OF_SERVICES, values)
        tenant_ids.update({t: t_id or 0 for t, t_id, _, _ in granted})
    policy = current_policy(session)
    tenant_ids.update(leaf_neighbours(session, fabric, policy, list(tenant_ids.values())))
    peerings, peers = peerings_touching(session, fabric_id, tenant_ids.values())
    tenant_ids.update(peers)
    values = {"fabric": fabric_id, "ids": list(tenant_ids.values())}
    rows = connection.execute(_GRANTS_OF_TENANTS, values).all() if tenant_ids else []
    service_ids.update({s: s_id or 0 for _, _, s, s_id in rows})
    return Context(
        frozenset(tenant_ids),
        frozenset(service_ids),
        frozenset(nodes),
        frozenset(tenant_ids.values()),
        frozenset(service_ids.values()),
        tuple(sorted(Grant(tenant, service) for tenant, _, service, _ in rows)),
        peerings,
    )


def _owner_ids(
    session: Session, fabric: m.Fabric, tenants: Collection[str], services: Collection[str]
) -> tuple[dict[str, int], dict[str, int]]:
    """The ids of the named tenants and of the fabric's named services (one query)."""
    known = tenant_ids(session)
    found: dict[str, dict[str, int]] = {
        "tenant": {name: known[name] for name in tenants if name in known},
        "service": {},
    }
    unknown = [name for name in tenants if name not in known]
    if not unknown and not services:
        return found["tenant"], found["service"]
    values = {"tenants": unknown, "services": list(services), "fabric": m.pk(fabric)}
    for kind, name, owner_id in session.connection().execute(_OWNER_IDS, values):
        found[kind][name] = owner_id or 0
    return found["tenant"], found["service"]


def _owner_ids_statement() -> CompoundSelect[str, str, int | None]:
    """`_owner_ids`'s query, built once."""
    tenants = select(literal("tenant"), col(m.Tenant.name), col(m.Tenant.id)).where(
        col(m.Tenant.name).in_(bindparam("tenants", expanding=True))
    )
    services = select(literal("service"), col(m.Service.name), col(m.Service.id)).where(
        col(m.Service.fabric_id) == bindparam("fabric"),
        col(m.Service.name).in_(bindparam("services", expanding=True)),
    )
    return union_all(tenants, services)


def segment_queries(query: AnySelect) -> tuple[AnySelect, CompoundSelect[*tuple[Any, ...]]]:
    """`query` (over ``segment``) narrowed to the active segments of the fabric, or a context's.

    Built once by each snapshot loader. The whole fabric's takes ``fabric``. The context's is
    one UNION ALL of its tenants' (``tenant_ids``, on the fabric's per-tenant index) and its
    services' (``service_ids``; a service belongs to one fabric): each part plans on its own
    index, with ids as constants (`scoped_values`).
    """
    active = col(m.Segment.state) == "active"
    on_fabric = col(m.Segment.fabric_id) == bindparam("fabric")
    tenants = col(m.Segment.tenant_id).in_(bindparam("tenant_ids", expanding=True))
    services = col(m.Segment.service_id).in_(bindparam("service_ids", expanding=True))
    whole = query.where(on_fabric, active)
    return whole, union_all(query.where(on_fabric, active, tenants), query.where(active, services))


def scoped_values(fabric: m.Fabric, context: Context | None) -> dict[str, Any]:
    """The parameters of the fabric's or the context's statements of this module's builders."""
    if context is None:
        return {"fabric": m.pk(fabric)}
    return {
        "fabric": m.pk(fabric),
        "tenant_ids": list(context.tenant_ids),
        "service_ids": list(context.service_ids),
    }


# Built once: a scoped snapshot is a handful of prepared statements.
_HOLDERS_BY_ID = _holders().where(col(m.Node.id).in_(bindparam("ids", expanding=True)))
_CONTEXT_NODE_IDS = {
    kinds: _context_node_ids_statement(*kinds)
    for kinds in product((False, True), repeat=3)
    if any(kinds)
}
_GRANTS_OF_FABRIC = _grants()
_GRANTS_OF_TENANTS = _grants(col(m.Grant.tenant_id).in_(bindparam("ids", expanding=True)))
_GRANTS_OF_SERVICES = _grants(col(m.Grant.service_id).in_(bindparam("ids", expanding=True)))
_OWNER_IDS = _owner_ids_statement()
