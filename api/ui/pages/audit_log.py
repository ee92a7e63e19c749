"""The audit log page (/ui/audit-log): entries, the latest signed checkpoint, inclusion checks.

The entries and the checkpoint come from the use cases of GET /v1/audit/entries and GET
/v1/audit/checkpoint (tenancy/record/audit_log.py); asking for the checkpoint signs one when the log
has grown since the last, as the API does. Each entry has a "Check inclusion" button
(static/audit-log.js): the browser verifies the checkpoint's C2SP signature with the published
keys, recomputes the entry's leaf hash from the entry shown and walks the RFC 9162 inclusion
path that /ui/audit-log/inclusion gives (the use case of GET /v1/audit/proofs/inclusion) up to
the checkpoint's root. The page is the operator's and the auditor's (policies/authz.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from api.ui.deps import ConsoleUow, console_router
from api.ui.pages.proof_claims import keys_for_browser
from api.ui.render import SECURITY_HEADERS, render
from policies.errors import KeyUnavailableError
from tenancy.record import audit_log
from tenancy.schemas import CheckpointView
from tenancy.store.pagination import encode_cursor
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import signing_keys

router = console_router()

PAGE_SIZE = 25
MAX_INDEX = 10**18 - 1  # the most digits an audit-log cursor holds (tenancy/record/audit_log.py)


@router.get("/audit-log")
async def audit_log_page(
    request: Request,
    uow: ConsoleUow,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    start: Annotated[int | None, Query(ge=0, le=MAX_INDEX)] = None,
) -> Response:
    """A page of entries (oldest first, as the API lists them), the checkpoint and the keys.

    `start` shows the page that begins with that entry (to check one an auditor was told of).
    """
    if start is not None:
        cursor = encode_cursor(str(start - 1)) if start > 0 else None
    page = await run_in_threadpool(
        audit_log.list_entries, uow, limit=PAGE_SIZE, cursor=cursor or None
    )
    checkpoint, unsigned = await run_in_threadpool(latest_checkpoint, uow)
    keys = (await run_in_threadpool(signing_keys.list_keys, uow)).keys
    entries = [entry.model_dump(mode="json") for entry in page.data]
    context = {
        "active": "audit-log",
        "entries": page.data,
        "count": page.count,
        "next": page.next,
        "newest": newest_cursor(page.count),
        "checkpoint": checkpoint,
        "unsigned": unsigned,
        "signer": None if checkpoint is None else note_signer(checkpoint.note),
        "data": {
            "entries": entries,
            "checkpoint": None if checkpoint is None else checkpoint.model_dump(mode="json"),
            "keys": keys_for_browser(keys),
        },
    }
    return render(request, "audit_log.html", context)


@router.get("/audit-log/inclusion")
async def inclusion_proof(
    uow: ConsoleUow,
    index: Annotated[int, Query(ge=0)],
    size: Annotated[int, Query(ge=1)],
) -> Response:
    """RFC 9162 inclusion proof of entry `index` in the tree of `size` entries, as JSON.

    Raises:
        NotFoundError: the log is shorter than `size` (an HTML page, like every console error).
        InvalidValueError: `index` is not below `size`.
    """
    proof = await run_in_threadpool(audit_log.inclusion, uow, index=index, size=size)
    return JSONResponse(proof.model_dump(mode="json"), headers=SECURITY_HEADERS)


def latest_checkpoint(uow: UnitOfWork) -> tuple[CheckpointView | None, str]:
    """The signed checkpoint of the whole log, or None and why (an empty log, no signing key).

    Without the signing key the entries are still shown: the page says what is missing rather
    than answering 503 as GET /v1/audit/checkpoint does.
    """
    if not audit_log.list_entries(uow, limit=1, cursor=None).data:
        return None, "The log is empty: nothing is signed yet."
    try:
        return audit_log.checkpoint(uow), ""
    except KeyUnavailableError as error:
        return None, f"No checkpoint can be signed: {error.detail}"


def newest_cursor(count: int) -> str | None:
    """The cursor of the page that ends with the newest entry (None when the first page does)."""
    if count <= PAGE_SIZE:
        return None
    return encode_cursor(str(count - PAGE_SIZE - 1))


def note_signer(note: str) -> dict[str, Any]:
    """The key names on the note's signature lines (``— <name> <base64>``), for display."""
    lines = note.rsplit("\n\n", 1)[-1].splitlines()
    return {"names": [line[2:].split(" ", 1)[0] for line in lines if line.startswith("\u2014 ")]}
