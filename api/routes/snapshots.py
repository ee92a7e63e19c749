"""Routes under /v1/fabrics/{fabric}: the snapshot history and the signed artifact manifest."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from api.deps import Listing, Uow
from api.params import ArtifactPath, FabricPath, IfNoneMatch
from api.routes.verification import ARTIFACT_FILE, artifact_response
from tenancy import snapshot_history
from tenancy.schemas import SNAPSHOT_DIGEST_PATTERN, DSSEEnvelope, Page, SnapshotView

router = APIRouter(prefix="/v1/fabrics", tags=["deployment"])
Digest = Annotated[
    str,
    Path(
        pattern=SNAPSHOT_DIGEST_PATTERN,
        description="The snapshot's digest as the snapshot list or X-Snapshot-Digest gives it: "
        "'v2:' (or 'sha256:' for states recorded before digest version 2) and 64 lower-case "
        "hex digits; 410 when its artifacts are no longer retained",
    ),
]


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
