"""Routes under /v1/fabrics/{fabric}: snapshot history, signed manifest, RoCE leaf patches.

A leaf's patch is its CONFIG_DB change between two snapshots.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import Path, Query, Response

from api.deps import Listing, Uow, authorized_router
from api.params import ArtifactPath, FabricPath, IfNoneMatch
from api.routes.verification import ARTIFACT_FILE, artifact_response
from tenancy.schemas import SLUG_PATTERN, SNAPSHOT_DIGEST_PATTERN, DSSEEnvelope, Page, SnapshotView
from tenancy.usecases import leaf_patches, snapshot_history

router = authorized_router(prefix="/v1/fabrics", tags=["deployment"])
Digest = Annotated[
    str,
    Path(
        pattern=SNAPSHOT_DIGEST_PATTERN,
        description="The snapshot's digest as the snapshot list or X-Snapshot-Digest gives it: "
        "'v2:' (or 'sha256:' for states recorded before digest version 2) and 64 lower-case "
        "hex digits; 410 when its artifacts are no longer retained",
    ),
]
LeafPath = Annotated[
    str,
    Path(
        pattern=SLUG_PATTERN,
        description="The RoCE leaf's name as the topology has it, e.g. 'leaf01'; 404 when the "
        "snapshot has no files for it",
    ),
]
FromDigest = Annotated[
    str | None,
    Query(
        alias="from",
        pattern=SNAPSHOT_DIGEST_PATTERN,
        description="The snapshot the leaf starts from (the patch is from its config_db.json "
        "of the leaf), written like `digest`; default: the snapshot the leaf's deploy target "
        "holds (422 when there is none)",
    ),
]
AllowDisruptive = Annotated[
    bool,
    Query(
        description="Also patch declared keys (ports, fabric-wide QoS maps, schedulers, "
        "queues, buffers), which can restart swss; without it such a change is a 409 "
        "disruptive-change problem"
    ),
]
JSON_PATCH_MEDIA_TYPE = "application/json-patch+json"
# RFC 6902 operations as policies/roce/patch.py makes them; paths are RFC 6901 JSON Pointers.
_OPERATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One RFC 6902 operation",
    "properties": {
        "op": {"type": "string", "description": "'add', 'remove' or 'replace'"},
        "path": {
            "type": "string",
            "description": "RFC 6901 JSON Pointer to a table, key or field ('/' in a key is "
            "'~1', '~' is '~0'), e.g. '/VLAN_INTERFACE/Vlan100|10.64.0.1~124'",
        },
        "value": {"description": "The new table, entry or field value (not for 'remove')"},
    },
    "required": ["op", "path"],
}
PATCH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The RFC 6902 JSON Patch: removals first, then additions and "
        "replacements by (table, key, field); an empty array when nothing changes",
        "content": {
            JSON_PATCH_MEDIA_TYPE: {
                "schema": {
                    "type": "array",
                    "description": "RFC 6902 operations, applied in order",
                    "items": _OPERATION_SCHEMA,
                }
            }
        },
    },
    404: {"description": "not-found: no such fabric, snapshot or leaf in either snapshot"},
    409: {
        "description": "disruptive-change: declared keys differ and allow_disruptive is off; "
        "`paths` lists their JSON Pointers"
    },
    410: {"description": "not-retained: a snapshot's artifacts are no longer retained"},
    422: {
        "description": "validation-error: a malformed digest or leaf, or no `from` and the leaf's "
        "target holds no snapshot"
    },
}


@router.get("/{fabric}/signed-manifest", response_model_by_alias=True)
def get_signed_manifest(fabric: FabricPath, uow: Uow) -> DSSEEnvelope:
    """The artifact manifest as a DSSE envelope signed with the service's key (for agents)."""
    return snapshot_history.signed_manifest(uow, fabric_name=fabric)


@router.get("/{fabric}/snapshots")
def list_snapshots(fabric: FabricPath, uow: Uow, listing: Listing) -> Page[SnapshotView]:
    """Every committed, verified state of the fabric, newest first."""
    return snapshot_history.list_snapshots(
        uow, fabric_name=fabric, limit=listing.limit, cursor=listing.cursor
    )


@router.get(
    "/{fabric}/snapshots/{digest}/artifacts/{path:path}",
    response_class=Response,
    responses={
        200: ARTIFACT_FILE,
        304: {"description": "Not modified"},
        410: {"description": "The snapshot's artifacts are no longer retained"},
    },
)
def get_snapshot_artifact(
    fabric: FabricPath,
    digest: Digest,
    path: ArtifactPath,
    uow: Uow,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """One file of snapshot `digest`, byte for byte as its signed manifest binds it."""
    artifact = snapshot_history.snapshot_artifact(uow, fabric_name=fabric, digest=digest, path=path)
    return artifact_response(artifact, digest, if_none_match)


@router.get(
    "/{fabric}/snapshots/{digest}/patches/{leaf}",
    response_class=Response,
    responses=PATCH_RESPONSES,
)
def get_leaf_patch(
    fabric: FabricPath,
    digest: Digest,
    leaf: LeafPath,
    uow: Uow,
    start: FromDigest = None,
    allow_disruptive: AllowDisruptive = False,
) -> Response:
    """The RFC 6902 patch from the leaf's CONFIG_DB in snapshot `from` to snapshot `digest`.

    Owned keys are made exactly `digest`'s (stale tenant VLANs, members, VRFs and maps are
    removed); keys isofabric only declares are changed only with `allow_disruptive`; keys it
    neither owns nor declares are never touched. Agents compute their own patch against what
    they read from the switch; this one is between two snapshots, for review.
    """
    operations = leaf_patches.snapshot_patch(
        uow,
        fabric_name=fabric,
        digest=digest,
        leaf=leaf,
        start=start,
        allow_disruptive=allow_disruptive,
    )
    body = json.dumps(operations, separators=(",", ":"), sort_keys=True)
    return Response(body, media_type=JSON_PATCH_MEDIA_TYPE)
