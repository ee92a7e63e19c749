"""Routes under /v1/audit: the audit log's entries, signed checkpoints and Merkle proofs."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from api.deps import Listing, Uow, authorized_router
from tenancy.record import audit_log
from tenancy.schemas import (
    AuditEntryView,
    CheckpointView,
    ConsistencyProofView,
    InclusionProofView,
    Page,
)

router = authorized_router(prefix="/v1/audit", tags=["audit"])


@router.get("/entries")
def list_entries(uow: Uow, listing: Listing) -> Page[AuditEntryView]:
    """Audit entries in index order: time, principal, role, action, target, request id, digests."""
    return audit_log.list_entries(uow, limit=listing.limit, cursor=listing.cursor)


@router.get("/checkpoint")
def get_checkpoint(uow: Uow) -> CheckpointView:
    """A signed checkpoint (C2SP signed note, Ed25519) of the whole log: keep it to audit later."""
    return audit_log.checkpoint(uow)


@router.get("/proofs/inclusion")
def inclusion_proof(
    uow: Uow,
    index: Annotated[
        int,
        Query(ge=0, description="The entry's 0-based index in the log; below `size`"),
    ],
    size: Annotated[
        int,
        Query(
            ge=1,
            description="Entries in the tree (a checkpoint's size), 1 up to the log's "
            "current size; 404 when the log is shorter",
        ),
    ],
) -> InclusionProofView:
    """RFC 9162 inclusion proof of entry `index` in the tree of the first `size` entries."""
    return audit_log.inclusion(uow, index=index, size=size)


@router.get("/proofs/consistency")
def consistency_proof(
    uow: Uow,
    first: Annotated[
        int,
        Query(
            ge=1,
            description="Entries in the older tree (e.g. a checkpoint kept earlier), 1 up to "
            "`second`",
        ),
    ],
    second: Annotated[
        int,
        Query(
            ge=1,
            description="Entries in the newer tree, up to the log's current size; 404 when "
            "the log is shorter",
        ),
    ],
) -> ConsistencyProofView:
    """RFC 9162 consistency proof between the trees of `first` and `second` entries."""
    return audit_log.consistency(uow, first=first, second=second)
