"""Routes for config audits and observed state: deployed files and live tables vs. intent."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from api.deps import Uow
from api.limits import read_text_body
from tenancy import config_audits
from tenancy.schemas import (
    AUDIT_FORMAT_PATTERN,
    SLUG_PATTERN,
    ConfigAuditView,
    ObservationCreate,
    ObservationView,
)

router = APIRouter(prefix="/v1/fabrics", tags=["audits"])


@router.post(
    "/{fabric}/audits",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
async def post_audit(
    fabric: str,
    request: Request,
    uow: Uow,
    format: Annotated[str, Query(pattern=AUDIT_FORMAT_PATTERN)],
    leaf: Annotated[str | None, Query(max_length=63, pattern=SLUG_PATTERN)] = None,
) -> ConfigAuditView:
    """Audit a deployed partitions.conf, or a leaf's config_db.json or frr.conf (the body):
    parser findings, drift from intent per owner, and the isolation counterexamples it allows.
    Changes nothing.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    text = await read_text_body(request)
    return config_audits.audit_config(uow, fabric_name=fabric, fmt=format, leaf=leaf, text=text)


@router.post("/{fabric}/observations")
def post_observation(fabric: str, document: ObservationCreate, uow: Uow) -> ObservationView:
    """Compare the live P_Key tables (the output of `isofabric collect ib`) with intent: per-port
    drift and the cross-owner reachability the tables allow. Changes nothing.
    """  # noqa: D205 - the published OpenAPI description, kept word for word
    return config_audits.observe(uow, fabric_name=fabric, document=document)
