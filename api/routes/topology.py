"""Routes under /v1/fabrics/{fabric}/topology: reconcile the inventory with a discovery."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from api.deps import HeavyWork, Uow, authorized_router
from api.limits import RawBody, decode_text, media_type
from api.params import FabricPath
from api.responses import json_bytes
from tenancy.schemas import TopologyImportResult
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import topology

INVENTORY_DOC = (
    '{"switches":[{"name","role":"leaf|spine","asn","loopback","vtep","ports":[{"name","lanes",'
    '"speed","cable_length"}]}],"links":[{"a":"leaf01:Ethernet248","b":"spine01:Ethernet0"}],'
    '"nodes":[{"name","nics":[{"name","switch","port"}]}]}'
)

router = authorized_router(prefix="/v1/fabrics", tags=["fabrics"])


# The handler only awaits the import, which runs whole in a worker process (api/
# heavy_processes.py): parsing, reconciling and verifying a 100k-port topology in a thread of
# this process would hold its GIL, and so the event loop and every other request, for seconds.
@router.put(
    "/{fabric}/topology",
    response_model=TopologyImportResult,
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
async def put_topology(
    fabric: FabricPath, request: Request, heavy: HeavyWork, uow: Uow, body: RawBody
) -> Response:
    """Reconcile the fabric's inventory: `ibnetdiscover` output (text/plain) on InfiniBand, an
    inventory document (application/json or application/yaml) on RoCE.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    answer = await heavy.run(uow, topology_answer, fabric, media_type(request), body)
    return Response(answer, media_type="application/json")


def topology_answer(uow: UnitOfWork, fabric: str, media: str, body: bytes) -> bytes:
    """The JSON answer to importing `body` (run in a heavy worker; domain errors raise)."""
    text = decode_text(body)
    result = topology.import_document(uow, fabric_name=fabric, media_type=media, text=text)
    return json_bytes(result)
