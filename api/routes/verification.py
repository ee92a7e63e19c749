"""Routes under /v1/fabrics: fabrics, topology, nodes, services, verification, artifacts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response, status

from api.deps import Listing, Uow
from api.limits import media_type, read_text_body
from tenancy import fabrics, nodes, shared_services, topology, verification
from tenancy.schemas import (
    AnyFabricCreate,
    ArtifactsView,
    FabricView,
    NodePatch,
    NodeView,
    Page,
    ServiceCreate,
    ServiceView,
    TopologyImportResult,
    VerificationView,
)

INVENTORY_DOC = (
    '{"switches":[{"name","role":"leaf|spine","asn","loopback","vtep","ports":[{"name","lanes",'
    '"speed","cable_length"}]}],"links":[{"a":"leaf01:Ethernet248","b":"spine01:Ethernet0"}],'
    '"nodes":[{"name","nics":[{"name","switch","port"}]}]}'
)

router = APIRouter(prefix="/v1/fabrics", tags=["fabrics"])


@router.post("", status_code=status.HTTP_201_CREATED)
def create_fabric(spec: AnyFabricCreate, uow: Uow) -> FabricView:
    """Register an InfiniBand fabric (P_Key range) or a RoCE fabric (VLAN/VNI/prefix pools)."""
    return fabrics.create_fabric(uow, spec=spec)


@router.get("")
def list_fabrics(uow: Uow, listing: Listing) -> Page[FabricView]:
    """List fabrics by name."""
    return fabrics.list_fabrics(uow, limit=listing.limit, cursor=listing.cursor)


@router.get("/{fabric}")
def get_fabric(fabric: str, uow: Uow) -> FabricView:
    """One fabric."""
    return fabrics.get_fabric(uow, name=fabric)


@router.put(
    "/{fabric}/topology",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "text/plain": {
                    "schema": {"type": "string"},
                    "example": 'Ca\t1 "H-0002c90300a1b2c4"\t# "gpu0001 mlx5_0"',
                },
                "application/json": {"schema": {"type": "object", "description": INVENTORY_DOC}},
                "application/yaml": {"schema": {"type": "string"}},
            },
        }
    },
)
async def put_topology(fabric: str, request: Request, uow: Uow) -> TopologyImportResult:
    """Reconcile the fabric's inventory: `ibnetdiscover` output (text/plain) on InfiniBand, an
    inventory document (application/json or application/yaml) on RoCE."""
    text = await read_text_body(request)
    return topology.import_document(
        uow, fabric_name=fabric, media_type=media_type(request), text=text
    )


@router.get("/{fabric}/nodes")
def list_nodes(
    fabric: str,
    uow: Uow,
    listing: Listing,
    tenant: Annotated[str | None, Query(max_length=63)] = None,
    free: bool | None = None,
    role: Annotated[str | None, Query(pattern="^(compute|storage|management)$")] = None,
) -> Page[NodeView]:
    """Nodes with their ports, filtered by holding tenant, freedom or role."""
    return nodes.list_nodes(
        uow,
        fabric_name=fabric,
        tenant=tenant,
        free=free,
        role=role,
        limit=listing.limit,
        cursor=listing.cursor,
    )


@router.get("/{fabric}/nodes/{node}")
def get_node(fabric: str, node: str, uow: Uow) -> NodeView:
    """One node with its ports."""
    return nodes.get_node(uow, fabric_name=fabric, node_name=node)


@router.patch("/{fabric}/nodes/{node}")
def patch_node(fabric: str, node: str, patch: NodePatch, uow: Uow) -> NodeView:
    """Set a node's role (compute, storage, management)."""
    return nodes.set_node_role(uow, fabric_name=fabric, node_name=node, patch=patch)


@router.post("/{fabric}/services", status_code=status.HTTP_201_CREATED)
def create_service(fabric: str, spec: ServiceCreate, uow: Uow) -> ServiceView:
    """Create an operator-owned shared service (e.g. storage) with its own partition."""
    return shared_services.create_service(uow, fabric_name=fabric, spec=spec)


@router.get("/{fabric}/services")
def list_services(fabric: str, uow: Uow, listing: Listing) -> Page[ServiceView]:
    """Shared services of the fabric."""
    return shared_services.list_services(
        uow, fabric_name=fabric, limit=listing.limit, cursor=listing.cursor
    )


@router.get("/{fabric}/services/{service}")
def get_service(fabric: str, service: str, uow: Uow) -> ServiceView:
    """One shared service."""
    return shared_services.get_service(uow, fabric_name=fabric, name=service)


@router.get("/{fabric}/verification")
def get_verification(fabric: str, uow: Uow) -> VerificationView:
    """Verify isolation now: verdict, counterexamples and the reachability relation."""
    return verification.verify_fabric(uow, fabric_name=fabric)


@router.get("/{fabric}/artifacts")
def list_artifacts(fabric: str, uow: Uow) -> ArtifactsView:
    """Manifest of the rendered OpenSM files (sha256, size) and the snapshot digest."""
    return verification.list_artifacts(uow, fabric_name=fabric)


@router.get(
    "/{fabric}/artifacts/{path:path}",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}, 304: {"description": "Not modified"}},
)
def get_artifact(
    fabric: str,
    path: str,
    uow: Uow,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """One rendered file; ETag is its quoted sha256, X-Snapshot-Digest the verified snapshot."""
    artifact, digest = verification.get_artifact(uow, fabric_name=fabric, path=path)
    etag = f'"{artifact.sha256}"'
    headers = {"ETag": etag, "X-Snapshot-Digest": digest, "Cache-Control": "no-cache"}
    if if_none_match is not None and _matches(if_none_match, etag):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(artifact.content, media_type="text/plain; charset=utf-8", headers=headers)


def _matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 §13.1.2: weak comparison, and '*' matches any current representation."""
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag in tags
