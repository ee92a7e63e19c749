"""Routes under /v1/fabrics/{fabric}/topology: reconcile the inventory with a discovery."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.deps import Uow
from api.limits import media_type, read_text_body
from tenancy import topology
from tenancy.schemas import TopologyImportResult

INVENTORY_DOC = (
    '{"switches":[{"name","role":"leaf|spine","asn","loopback","vtep","ports":[{"name","lanes",'
    '"speed","cable_length"}]}],"links":[{"a":"leaf01:Ethernet248","b":"spine01:Ethernet0"}],'
    '"nodes":[{"name","nics":[{"name","switch","port"}]}]}'
)

router = APIRouter(prefix="/v1/fabrics", tags=["fabrics"])


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
    inventory document (application/json or application/yaml) on RoCE.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    text = await read_text_body(request)
    return topology.import_document(
        uow, fabric_name=fabric, media_type=media_type(request), text=text
    )
