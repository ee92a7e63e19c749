"""Routes under /v1/fabrics/{fabric}/topology: reconcile the inventory with a discovery."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from api.deps import HEAVY_WORK, Uow, authorized_router
from api.limits import RawBody, decode_text, media_type
from api.params import FabricPath
from api.responses import json_response
from tenancy.schemas import TopologyImportResult
from tenancy.usecases import topology

INVENTORY_DOC = (
    '{"switches":[{"name","role":"leaf|spine","asn","loopback","vtep","ports":[{"name","lanes",'
    '"speed","cable_length"}]}],"links":[{"a":"leaf01:Ethernet248","b":"spine01:Ethernet0"}],'
    '"nodes":[{"name","nics":[{"name","switch","port"}]}]}'
)

router = authorized_router(prefix="/v1/fabrics", tags=["fabrics"])


# A plain function: FastAPI runs it in a worker thread, so parsing, verification and the
# transaction of a 100k-port import never block the event loop.
@router.put(
    "/{fabric}/topology",
    response_model=TopologyImportResult,
    dependencies=[HEAVY_WORK],
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The whole topology, which the fabric's records are reconciled with: "
            "`ibnetdiscover` output as the tool prints it (text/plain) on an InfiniBand fabric, "
            "where an HCA's NodeDescription '<host> <hca>' names its node; a RoCE inventory "
            "(application/json, or the same document as application/yaml) on a RoCE fabric",
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
def put_topology(fabric: FabricPath, request: Request, uow: Uow, body: RawBody) -> Response:
    """Reconcile the fabric's inventory: `ibnetdiscover` output (text/plain) on InfiniBand, an
    inventory document (application/json or application/yaml) on RoCE.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    text = decode_text(body)
    result = topology.import_document(
        uow, fabric_name=fabric, media_type=media_type(request), text=text
    )
    return json_response(result)  # serialized here, in the worker thread
