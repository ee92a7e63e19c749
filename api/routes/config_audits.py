"""Routes for config audits and observed state: deployed files and live tables vs. intent."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel, TypeAdapter

from api.deps import HeavyWork, Uow, authorized_router
from api.json_body import json_body, validated
from api.limits import RawBody, decode_text
from api.params import FabricPath
from api.responses import json_bytes
from tenancy.schemas import (
    AUDIT_FORMAT_PATTERN,
    SLUG_PATTERN,
    AnyObservationCreate,
    ConfigAuditView,
    ObservationCreate,
    ObservationView,
    RoceObservationCreate,
    RoceObservationView,
)
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import config_audits, roce_observations

router = authorized_router(prefix="/v1/fabrics", tags=["audits"])
OBSERVATION_DOCUMENT: TypeAdapter[ObservationCreate | RoceObservationCreate] = TypeAdapter(
    AnyObservationCreate
)


# The handlers only await their use case, which runs whole in a worker process (api/
# heavy_processes.py): parsing a 32 MiB deployed file in a thread of this process would hold its
# GIL, and so the event loop and every other request. HeavyWork caps them per principal, auditors
# included (a read-only role could otherwise tie up every worker).
@router.post(
    "/{fabric}/audits",
    response_model=ConfigAuditView,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The deployed file as text, as `format` names it: OpenSM's "
            "partitions.conf, or a leaf's SONiC config_db.json or FRR frr.conf",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
async def post_audit(
    fabric: FabricPath,
    heavy: HeavyWork,
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
    answer = await heavy.run(uow, audit_answer, fabric, format, leaf, body)
    return Response(answer, media_type="application/json")


def audit_answer(uow: UnitOfWork, fabric: str, fmt: str, leaf: str | None, body: bytes) -> bytes:
    """The JSON answer to a config audit of `body` (run in a heavy worker; domain errors raise)."""
    text = decode_text(body)
    view = config_audits.audit_config(uow, fabric_name=fabric, fmt=fmt, leaf=leaf, text=text)
    return json_bytes(view)


@router.post(
    "/{fabric}/observations",
    response_model=ObservationView | RoceObservationView,
    responses={
        200: {
            "description": "The comparison: an ObservationView for InfiniBand tables, a "
            "RoceObservationView for a RoCE leaf"
        }
    },
)
@json_body(AnyObservationCreate)
async def post_observation(
    fabric: FabricPath, heavy: HeavyWork, body: RawBody, uow: Uow
) -> Response:
    """Compare observed state with intent. Changes nothing. `kind` 'infiniband': the live P_Key
    tables (the output of `isofabric collect ib`): per-port drift and the cross-owner
    reachability the tables allow. `kind` 'roce': one leaf's CONFIG_DB and FRR state (the output
    of `isofabric collect roce`): VLAN member, VRF, tunnel map, port QoS, route-target and VNI
    drift, draining hosts still in a tenant VLAN, and the violations the leaf allows.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    answer = await heavy.run(uow, observation_answer, fabric, body)
    return Response(answer, media_type="application/json")


def observation_answer(uow: UnitOfWork, fabric: str, body: bytes) -> bytes:
    """The JSON answer to an observation `body` (run in a heavy worker; errors raise).

    The document is parsed and validated here too: as a typed body, FastAPI would do both on the
    event loop.
    """
    document = validated(OBSERVATION_DOCUMENT, body)
    if isinstance(document, RoceObservationCreate):
        view: BaseModel = roce_observations.observe_leaf(uow, fabric_name=fabric, document=document)
    else:
        view = config_audits.observe(uow, fabric_name=fabric, document=document)
    return json_bytes(view)
