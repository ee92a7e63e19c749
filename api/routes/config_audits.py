"""Routes for config audits and observed state: deployed files and live tables vs. intent."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel

from api.deps import HEAVY_WORK, Uow, authorized_router
from api.limits import RawBody, decode_text
from api.params import FabricPath
from api.responses import json_response
from tenancy.schemas import (
    AUDIT_FORMAT_PATTERN,
    SLUG_PATTERN,
    AnyObservationCreate,
    ConfigAuditView,
    ObservationView,
    RoceObservationCreate,
    RoceObservationView,
)
from tenancy.usecases import config_audits, roce_observations

router = authorized_router(prefix="/v1/fabrics", tags=["audits"])


# Plain functions: FastAPI runs them in a worker thread, so parsing a large deployed file and
# verifying the fabric never block the event loop; HEAVY_WORK caps them per principal, auditors
# included (a read-only role could otherwise tie up every worker).
@router.post(
    "/{fabric}/audits",
    response_model=ConfigAuditView,
    dependencies=[HEAVY_WORK],
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The deployed file as text, as `format` names it: OpenSM's "
            "partitions.conf, or a leaf's SONiC config_db.json or FRR frr.conf",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
def post_audit(
    fabric: FabricPath,
    body: RawBody,
    uow: Uow,
    format: Annotated[
        str,
        Query(
            pattern=AUDIT_FORMAT_PATTERN,
            description="What the body is: partitions (OpenSM partitions.conf, InfiniBand), "
            "config_db (a SONiC leaf's config_db.json, RoCE) or frr (a leaf's frr.conf, RoCE); "
            "a format of the other technology is a 422",
        ),
    ],
    leaf: Annotated[
        str | None,
        Query(
            max_length=63,
            pattern=SLUG_PATTERN,
            description="The leaf switch the file was taken from (its name); required for "
            "config_db and frr, refused (422) for partitions",
        ),
    ] = None,
) -> Response:
    """Audit a deployed partitions.conf, or a leaf's config_db.json or frr.conf (the body):
    parser findings, drift from intent per owner, and the isolation counterexamples it allows.
    Changes nothing.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    text = decode_text(body)
    view = config_audits.audit_config(uow, fabric_name=fabric, fmt=format, leaf=leaf, text=text)
    return json_response(view)  # serialized here, in the worker thread


@router.post(
    "/{fabric}/observations",
    response_model=ObservationView | RoceObservationView,
    dependencies=[HEAVY_WORK],
    responses={
        200: {
            "description": "The comparison: an ObservationView for InfiniBand tables, a "
            "RoceObservationView for a RoCE leaf"
        }
    },
)
def post_observation(fabric: FabricPath, document: AnyObservationCreate, uow: Uow) -> Response:
    """Compare observed state with intent. Changes nothing. `kind` 'infiniband': the live P_Key
    tables (the output of `isofabric collect ib`): per-port drift and the cross-owner
    reachability the tables allow. `kind` 'roce': one leaf's CONFIG_DB and FRR state (the output
    of `isofabric collect roce`): VLAN member, VRF, tunnel map, port QoS, route-target and VNI
    drift, draining hosts still in a tenant VLAN, and the violations the leaf allows.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    if isinstance(document, RoceObservationCreate):
        view: BaseModel = roce_observations.observe_leaf(uow, fabric_name=fabric, document=document)
    else:
        view = config_audits.observe(uow, fabric_name=fabric, document=document)
    return json_response(view)  # serialized here, in the worker thread
