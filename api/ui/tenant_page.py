"""What the tenant page shows, read through the same use cases and rules as /v1.

Each section is the answer of one API route and is shown only if the principal may GET that
route for this tenant (policies/authz.py): a tenant role sees its nodes, segments, grants,
peerings, reachability and proofs, but not usage (the API gives it no usage route); billing
sees the tenant's name, billing account and usage; operators and auditors see everything.
One rule for the API and the page, so the console shows what the API lets each role see.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from api.access_rules import decide
from api.deps import ListParams
from api.routes import proofs as proof_routes
from api.ui.usage_chart import usage_chart
from policies.authz import Decision, Role
from tenancy.gate import cached_reads
from tenancy.schemas import (
    AllocationView,
    FabricReachabilityView,
    GrantView,
    PartitionView,
    RoceSegmentView,
    SegmentView,
)
from tenancy.store.pagination import MAX_LIMIT
from tenancy.store.uow import Principal, UnitOfWork
from tenancy.usecases import allocations, peerings, shared_services, tenants
from tenancy.usecases import partitions as tenant_partitions

# The /v1 route each section shows, as the policy names it.
SECTION_ROUTES = {
    "details": "/v1/tenants/{tenant}",
    "qos": "/v1/qos-classes",
    "nodes": "/v1/tenants/{tenant}/allocations",
    "grants": "/v1/tenants/{tenant}/grants",
    "partitions": "/v1/tenants/{tenant}/partitions",
    "peerings": "/v1/tenants/{tenant}/peerings",
    "reachability": "/v1/tenants/{tenant}/reachability",
    "proofs": "/v1/proofs",
    "usage": "/v1/usage/records",
}
ACTIONS_ROUTE = "/ui/tenants/{tenant}/actions/offboard"
# The tenant's footprint map per fabric (api/ui/pages/fabric_map.py), linked from its nodes.
MAP_ROUTE = "/ui/tenants/{tenant}/fabrics/{fabric}/map"
NODES_SHOWN = 500  # per fabric; a page, not a dump of 12,500 names
PROOFS_SHOWN = 20  # the newest; the evidence page lists them all
OWNER_PREFIXES = {"tenant:": "tenant", "service:": "service", "unassigned:": "unassigned"}


@dataclass(frozen=True, slots=True)
class Access:
    """What the principal may see of one tenant, and whether it may act on it."""

    sections: frozenset[str]
    actions: bool


def may(principal: Principal, domain: str, route: str, method: str = "GET") -> bool:
    """Whether the policy allows `principal` `method` on `route` for tenant `domain`."""
    subject = f"principal:{principal.name}"
    decision = decide(subject, principal.role, principal.tenant, domain, route, method)
    return decision is Decision.ALLOW


def access_of(principal: Principal, tenant: str) -> Access:
    """The sections of `tenant`'s page the principal may see, and whether it may act."""
    shown = frozenset(s for s, route in SECTION_ROUTES.items() if may(principal, tenant, route))
    return Access(shown, may(principal, tenant, ACTIONS_ROUTE, "POST"))


def tenant_page(uow: UnitOfWork, principal: Principal, tenant: str) -> dict[str, Any]:
    """The tenant page's context (blocking: database reads).

    Raises:
        NotFoundError: no tenant has this name.
    """
    view = tenants.get_tenant(uow, name=tenant)
    access = access_of(principal, tenant)
    shown = access.sections
    context: dict[str, Any] = {
        "tenant": view.name,
        "details": view.model_dump() if "details" in shown else None,
        "billing_only": principal.role == Role.BILLING,
        "shown": sorted(shown),
        "actions": access.actions and view.status == "active",
    }
    if "qos" in shown and "details" in shown:
        context["qos"] = _qos_class(uow, view.qos_class)
    if "nodes" in shown:
        context["fabrics"] = fabric_rows(_allocations(uow, tenant))
        # Linked iff the policy lets this principal open the map: one rule for link and page.
        context["maps"] = may(principal, tenant, MAP_ROUTE)
    if "grants" in shown:
        held = sorted(_grants(uow, tenant), key=lambda g: (g.fabric, g.service))
        context["grants"] = [grant_row(g) for g in held]
    if "partitions" in shown:
        owned = tenant_partitions.list_partitions(uow, tenant_name=tenant)
        context["partitions"] = [partition_row(p) for p in owned]
    if "peerings" in shown:
        page = peerings.list_peerings(uow, tenant_name=tenant, limit=MAX_LIMIT, cursor=None)
        context["peerings"] = [p.model_dump() for p in page.data]
    if "reachability" in shown:
        reach = cached_reads.tenant_reachability(uow, tenant_name=tenant)
        context["reachability"] = [reach_row(tenant, f) for f in reach.fabrics]
    if "proofs" in shown:
        context["proofs"] = _proofs(uow, principal, tenant)
    if "usage" in shown:
        context["usage"] = usage_chart(uow, tenant=tenant)
    return context


def _allocations(uow: UnitOfWork, tenant: str) -> list[AllocationView]:
    found: list[AllocationView] = []
    cursor: str | None = None
    while True:
        page = allocations.list_allocations(
            uow, tenant_name=tenant, limit=MAX_LIMIT, cursor=cursor, fabric=None, state="active"
        )
        found.extend(page.data)
        cursor = page.next
        if cursor is None:
            return found


def _qos_class(uow: UnitOfWork, name: str) -> dict[str, Any] | None:
    """The tenant's QoS class as GET /v1/qos-classes shows it (None if it is not listed)."""
    page = tenants.list_qos_classes(uow, limit=MAX_LIMIT, cursor=None)
    return next((c.model_dump() for c in page.data if c.name == name), None)


def _grants(uow: UnitOfWork, tenant: str) -> list[GrantView]:
    page = shared_services.list_grants(
        uow, tenant_name=tenant, limit=MAX_LIMIT, cursor=None, state="active"
    )
    return page.data


def _proofs(uow: UnitOfWork, principal: Principal, tenant: str) -> dict[str, Any]:
    """The newest of the tenant's proofs the principal may read, as GET /v1/proofs answers.

    A tenant role reads its tenant views only (api/routes/proofs.py).
    """
    listing = ListParams(MAX_LIMIT, None)
    page = proof_routes.list_proofs(uow, listing, principal, tenant, None, None)
    newest = sorted(page.data, key=lambda p: p.created_at, reverse=True)[:PROOFS_SHOWN]
    rows = [
        {"id": p.id, "fabric": p.fabric, "created_at": p.created_at, "view": p.view} for p in newest
    ]
    return {"rows": rows, "count": page.count}


def segment_text(segment: SegmentView | RoceSegmentView | None) -> str:
    """A segment as operators name it: ``P_Key 0x0101`` or ``Vrf50001 · VLAN 101 · VNI 10101``."""
    if segment is None:
        return "—"
    if isinstance(segment, SegmentView):
        return f"P_Key {segment.pkey}"
    return (
        f"{segment.vrf} (L3VNI {segment.l3vni}, VLAN {segment.l3vni_vlan}) · "
        f"VLAN {segment.vlan} · VNI {segment.l2vni} · {segment.subnet}"
    )


def fabric_rows(held: list[AllocationView]) -> list[dict[str, Any]]:
    """Per fabric (by name): the tenant's segment there, its nodes and allocations."""
    by_fabric: dict[str, list[AllocationView]] = defaultdict(list)
    for allocation in held:
        by_fabric[allocation.fabric].append(allocation)
    rows = []
    for fabric, found in sorted(by_fabric.items()):
        nodes = sorted(n for a in found for n in a.nodes)
        segment = next((a.segment for a in found if a.segment is not None), None)
        rows.append(
            {
                "fabric": fabric,
                "segment": segment_text(segment),
                "nodes": nodes[:NODES_SHOWN],
                "node_count": len(nodes),
            }
        )
    return rows


def grant_row(grant: GrantView) -> dict[str, Any]:
    """A grant as the page lists it."""
    return {
        "id": grant.id,
        "fabric": grant.fabric,
        "service": grant.service,
        "segment": segment_text(grant.segment),
        "created_at": grant.created_at,
    }


def partition_row(partition: PartitionView) -> dict[str, Any]:
    """A partition as the tenant page lists it: its key, flags and member counts."""
    virtual = sum(1 for m in partition.members if m.kind == "virtual")
    return {
        "fabric": partition.fabric,
        "name": partition.name,
        "pkey": partition.pkey,
        "qos_class": partition.qos_class,
        "flags": ", ".join(
            f for f, on in (("ipoib", partition.ipoib), ("index0", partition.index0)) if on
        ),
        "ports": len(partition.members) - virtual,
        "virtual": virtual,
    }


def reach_row(tenant: str, fabric: FabricReachabilityView) -> dict[str, Any]:
    """A fabric's reachability for the page: each edge seen from the tenant's side."""
    me = f"tenant:{tenant}"
    edges = []
    for edge in fabric.edges:
        kind, name = owner_of(edge.target if edge.source == me else edge.source)
        edges.append({"kind": kind, "name": name, "segment": edge.segment, "allowed": edge.allowed})
    edges.sort(key=lambda e: (e["kind"] != "tenant" or e["name"] != tenant, e["kind"], e["name"]))
    return {"fabric": fabric.fabric, "holds": fabric.holds, "edges": edges}


def owner_of(owner: str) -> tuple[str, str]:
    """('tenant', 'acme') of 'tenant:acme'; an unknown shape stays whole."""
    for prefix, kind in OWNER_PREFIXES.items():
        if owner.startswith(prefix):
            return kind, owner.removeprefix(prefix)
    return "owner", owner
