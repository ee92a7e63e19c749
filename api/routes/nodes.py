"""Routes under /v1/fabrics/{fabric}/nodes: nodes with their ports, and their roles."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from api.deps import Listing, Uow, authorized_router
from api.params import FabricPath, NodePath
from tenancy.schemas import NodePatch, NodeView, Page
from tenancy.usecases import nodes

router = authorized_router(prefix="/v1/fabrics", tags=["fabrics"])


@router.get("/{fabric}/nodes")
def list_nodes(
    fabric: FabricPath,
    uow: Uow,
    listing: Listing,
    tenant: Annotated[
        str | None,
        Query(max_length=63, description="Only the nodes this tenant (its name) holds"),
    ] = None,
    free: Annotated[
        bool | None,
        Query(
            description="true: only free nodes (state 'free', held by no one); false: every "
            "other state; omitted: both"
        ),
    ] = None,
    role: Annotated[
        str | None,
        Query(
            pattern="^(compute|storage|management)$",
            description="Only nodes of this role: compute (allocatable to tenants), storage "
            "(held by shared services) or management (the SM's host; never held)",
        ),
    ] = None,
    state: Annotated[
        str | None,
        Query(
            pattern="^(free|allocated|absent|draining)$",
            description="Only nodes in this state: free, allocated (held by a tenant or a "
            "service), draining (released, the old segment still deployed) or absent (no "
            "longer listed by the last topology import)",
        ),
    ] = None,
) -> Page[NodeView]:
    """Nodes with their state and ports, filtered by holding tenant, freedom, role or state."""
    return nodes.list_nodes(
        uow,
        fabric_name=fabric,
        tenant=tenant,
        free=free,
        role=role,
        state=state,
        limit=listing.limit,
        cursor=listing.cursor,
    )


@router.get("/{fabric}/nodes/{node}")
def get_node(fabric: FabricPath, node: NodePath, uow: Uow) -> NodeView:
    """One node with its ports; while it drains, what the drain waits for (`drain`)."""
    return nodes.get_node(uow, fabric_name=fabric, node_name=node)


@router.patch("/{fabric}/nodes/{node}")
def patch_node(fabric: FabricPath, node: NodePath, patch: NodePatch, uow: Uow) -> NodeView:
    """Set a node's role (compute, storage, management)."""
    return nodes.set_node_role(uow, fabric_name=fabric, node_name=node, patch=patch)
