"""Routes under /v1/fabrics/{fabric}: the isolation verdict and the rendered artifacts.

Both are served from the read cache (tenancy/gate/cached_reads.py): computed once per committed
state of the fabric, then answered without loading, verifying or rendering it.
"""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import Response, status

from api.deps import Uow, authorized_router
from api.params import ArtifactPath, FabricPath, IfNoneMatch
from tenancy.gate import cached_reads
from tenancy.schemas import ArtifactsView, VerificationView

router = authorized_router(prefix="/v1/fabrics", tags=["fabrics"])
NOT_MODIFIED: dict[int | str, dict[str, Any]] = {304: {"description": "Not modified"}}
# A rendered file of any format (partitions.conf, config_db.json, frr.conf) is served as text.
ARTIFACT_FILE: dict[str, Any] = {
    "description": "The file as rendered, byte for byte; its quoted sha256 is the ETag",
    "content": {"text/plain": {"schema": {"type": "string"}}},
}


class Servable(Protocol):
    """A file to serve: its bytes and their hex sha256 (a rendered or a retained artifact)."""

    @property
    def content(self) -> bytes:
        """The file's bytes."""
        ...

    @property
    def sha256(self) -> str:
        """Hex sha256 of the bytes: the ETag."""
        ...


@router.get("/{fabric}/verification", response_model=VerificationView, responses=NOT_MODIFIED)
def get_verification(fabric: FabricPath, uow: Uow, if_none_match: IfNoneMatch = None) -> Response:
    """Verify isolation now: verdict, counterexamples and the reachability relation."""
    verdict = cached_reads.verification_json(uow, fabric_name=fabric)
    return _served(verdict, "application/json", {}, if_none_match)


@router.get("/{fabric}/artifacts")
def list_artifacts(fabric: FabricPath, uow: Uow) -> ArtifactsView:
    """Manifest of the rendered files (sha256, size) and the snapshot digest.

    The files are OpenSM's on InfiniBand; SONiC config_db.json and FRR frr.conf per leaf on RoCE.
    """
    return cached_reads.list_artifacts(uow, fabric_name=fabric)


@router.get(
    "/{fabric}/artifacts/{path:path}",
    response_class=Response,
    responses={200: ARTIFACT_FILE, **NOT_MODIFIED},
)
def get_artifact(
    fabric: FabricPath,
    path: ArtifactPath,
    uow: Uow,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """One rendered file; ETag is its quoted sha256, X-Snapshot-Digest the verified snapshot."""
    read = cached_reads.get_artifact(uow, fabric_name=fabric, path=path)
    return artifact_response(read.file, read.snapshot_digest, if_none_match)


def artifact_response(artifact: Servable, digest: str, if_none_match: str | None) -> Response:
    """A file with its ETag (quoted sha256) and snapshot digest; 304 if the client has it."""
    headers = {"X-Snapshot-Digest": digest}
    return _served(artifact, "text/plain; charset=utf-8", headers, if_none_match)


def _served(
    file: Servable, media_type: str, headers: dict[str, str], if_none_match: str | None
) -> Response:
    etag = f'"{file.sha256}"'
    headers = {"ETag": etag, **headers, "Cache-Control": "no-cache"}
    if if_none_match is not None and _matches(if_none_match, etag):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(file.content, media_type=media_type, headers=headers)


def _matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 §13.1.2: weak comparison, and '*' matches any current representation."""
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag in tags
