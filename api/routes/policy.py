"""Routes under /v1/policy: the internal/external operation policy and its versions.

Operators read and change it; auditors read it and every version. Tenant roles and billing do
not: the document is the operator's configuration (it names internal services and the other
kind's rules), and what a tenant may hold shows in its own answers (a refused change names the
rule). See policies/authz.py.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.responses import Response

from api.deps import HeavyWork, Listing, Uow, authorized_router
from api.limits import body_at_most, decode_text, media_type
from api.responses import json_bytes
from tenancy.schemas import Page
from tenancy.schemas.policy import MAX_DOCUMENT_BYTES, PolicyDocument, PolicyView
from tenancy.store.documents import parse_policy
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import policy

router = authorized_router(prefix="/v1/policy", tags=["policy"])
# A policy is at most a few dozen KB: a larger body is a 413 before any parsing.
PolicyBody = Annotated[bytes, Depends(body_at_most(MAX_DOCUMENT_BYTES))]

EXAMPLE_YAML = """\
kinds:
  external:
    isolation: dedicated_leaf
    qos_classes: [gold, silver]
    peering: []
  internal:
    peering: [internal]
    default_grants: [telemetry]
services:
  telemetry: internal
"""


@router.get("")
def get_policy(uow: Uow) -> PolicyView:
    """The policy in force: version 0 is the built-in default (today's behaviour)."""
    return policy.get_policy(uow)


# The handler only awaits the change, which runs whole in a worker process (api/
# heavy_processes.py): verifying every fabric whole in a thread of this process would hold its
# GIL for seconds. The body is read here (JSON or YAML), not by FastAPI.
@router.put(
    "",
    response_model=PolicyView,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The policy document: JSON, or the same members as YAML "
            "(application/yaml, application/x-yaml or text/yaml); at most 256 KiB. Omitted "
            "kinds and fields take the built-in default's values",
            "content": {
                "application/json": {"schema": PolicyDocument.model_json_schema()},
                "application/yaml": {
                    "schema": {"type": "string"},
                    "example": EXAMPLE_YAML,
                },
            },
        }
    },
)
async def put_policy(request: Request, heavy: HeavyWork, uow: Uow, body: PolicyBody) -> Response:
    """Replace the policy (JSON, or YAML as application/yaml, application/x-yaml or text/yaml).

    Omitted kinds and fields take the default's values. The change is verified on every fabric
    and against every tenant's node quota: one that any state violates is refused (409 with the
    counterexamples) and `?dry_run=true` shows them without writing. A document with the same
    rules as the policy in force changes nothing and answers the current version. A body over
    MAX_DOCUMENT_BYTES is a 413.
    """
    answer = await heavy.run(uow, policy_answer, media_type(request), body)
    return Response(answer, media_type="application/json")


def policy_answer(uow: UnitOfWork, media: str, body: bytes) -> bytes:
    """The JSON answer to a policy `body` (run in a heavy worker; domain errors raise)."""
    document = parse_policy(decode_text(body), media)
    return json_bytes(policy.put_policy(uow, document=document))


@router.get("/versions")
def list_policy_versions(uow: Uow, listing: Listing) -> Page[PolicyView]:
    """Every stored version, oldest first (version 0, the built-in default, is not listed)."""
    return policy.list_policy_versions(uow, limit=listing.limit, cursor=listing.cursor)


@router.get("/versions/{version}")
def get_policy_version(
    version: Annotated[
        int,
        Path(
            ge=0,
            le=2**31 - 1,
            description="The policy version: 0 is the built-in default, 1 and up the stored "
            "versions in the order they were put; 404 for a version never stored",
        ),
    ],
    uow: Uow,
) -> PolicyView:
    """One version of the policy; 0 is the built-in default."""
    return policy.get_policy_version(uow, version=version)
