"""Routes under /v1/fabrics/{fabric}: the isolation verdict and the rendered artifacts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Response, status

from api.deps import Uow
from policies.artifacts import Artifact
from tenancy import verification
from tenancy.schemas import ArtifactsView, VerificationView

router = APIRouter(prefix="/v1/fabrics", tags=["fabrics"])


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
    return artifact_response(artifact, digest, if_none_match)


def artifact_response(artifact: Artifact, digest: str, if_none_match: str | None) -> Response:
    """A file with its ETag (quoted sha256) and snapshot digest; 304 if the client has it."""
    etag = f'"{artifact.sha256}"'
    headers = {"ETag": etag, "X-Snapshot-Digest": digest, "Cache-Control": "no-cache"}
    if if_none_match is not None and _matches(if_none_match, etag):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(artifact.content, media_type="text/plain; charset=utf-8", headers=headers)


def _matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 §13.1.2: weak comparison, and '*' matches any current representation."""
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag in tags
