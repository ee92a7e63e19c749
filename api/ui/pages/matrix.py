"""The isolation matrix (/ui/fabrics/{fabric}/matrix) and its counterexamples, the auditor's pages.

Both read the verdict GET /v1/fabrics/{fabric}/verification serves (tenancy/gate/cached_reads.py:
computed once per committed state, then cached), plus the fabric's owners (one small query);
api/ui/isolation_matrix.py turns the verdict into cells.

In the seconds after a change the current state's verdict is not cached yet (a whole
verification: 3.5 s to 10 s on the 100k-port benchmark fabric), so the pages
show the newest cached verdict of an earlier state, under a banner naming both states
(tenancy/gate/shown_verdict.py), wake the verdict warmer, and poll `.../matrix/status` (static
verdict-refresh.js) to reload once the current verdict is ready. Only a fabric with no cached
verdict at all (the first load) is verified here.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import Query, Request
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from api.ui import isolation_matrix as mx
from api.ui.deps import ConsoleUow, console_router
from api.ui.render import render
from tenancy.gate import shown_verdict, verdict_warmth
from tenancy.schemas import VerificationView
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.fabric_map import fabric_owners

log = logging.getLogger(__name__)
router = console_router()

SEGMENT_NAMES = {"infiniband": "P_Key", "roce": "VNI"}
# The violations listed above the matrix; the counterexamples page lists every one.
SUMMARY_LIMIT = 20


@router.get("/fabrics/{fabric}/matrix")
async def matrix_page(
    request: Request,
    fabric: str,
    uow: ConsoleUow,
    q: Annotated[str, Query(max_length=100)] = "",
    rows: Annotated[int, Query(ge=0, le=10_000)] = 0,
    cols: Annotated[int, Query(ge=0, le=10_000)] = 0,
) -> Response:
    """Owners on both axes, one page of `BLOCK` x `BLOCK` cells; `q` filters the owners."""
    kind, relation, owners, shown = await run_in_threadpool(_read, uow, fabric)
    axis = mx.axis(relation, owners, q)
    size = mx.blocks(len(axis))
    rows, cols = min(rows, size - 1), min(cols, size - 1)
    row_owners = axis[rows * mx.BLOCK : (rows + 1) * mx.BLOCK]
    col_owners = axis[cols * mx.BLOCK : (cols + 1) * mx.BLOCK]
    segment = SEGMENT_NAMES.get(kind, "segment")
    violations = mx.violation_pairs(relation)
    context: dict[str, Any] = {
        "active": "fabrics",
        "fabric": fabric,
        "kind": kind,
        "segment_name": segment,
        "holds": relation.view.holds,
        "digest": relation.view.snapshot_digest,
        "counterexample_count": len(relation.view.counterexamples),
        "violations": [_violation(relation, v) for v in violations[:SUMMARY_LIMIT]],
        "more_violations": max(0, len(violations) - SUMMARY_LIMIT),
        "query": q,
        "owner_count": len(axis),
        "block": mx.BLOCK,
        "block_count": size,
        "rows": rows,
        "cols": cols,
        "overview": mx.overview_markup(
            mx.block_overview(relation, axis), request.url.path, q, (rows, cols)
        )
        if size > 1
        else "",
        "col_owners": col_owners,
        "cells": bool(row_owners),
        "body": mx.rows_markup(mx.page_cells(relation, row_owners, col_owners, segment)),
        "short": mx.short_name,
        **_staleness(shown),
    }
    return _awaiting_current(request, uow, fabric, shown, render(request, "matrix.html", context))


@router.get("/fabrics/{fabric}/counterexamples")
async def counterexamples_page(request: Request, fabric: str, uow: ConsoleUow) -> Response:
    """Every counterexample of the fabric's verdict, each at its anchor ``#cx-<index>``."""
    kind, relation, _, shown = await run_in_threadpool(_read, uow, fabric)
    context = {
        "active": "fabrics",
        "fabric": fabric,
        "segment_name": SEGMENT_NAMES.get(kind, "segment"),
        "holds": relation.view.holds,
        "digest": relation.view.snapshot_digest,
        "counterexamples": list(enumerate(relation.view.counterexamples)),
        **_staleness(shown),
    }
    page = render(request, "counterexamples.html", context)
    return _awaiting_current(request, uow, fabric, shown, page)


@router.get("/fabrics/{fabric}/matrix/status")
async def verdict_status(fabric: str, uow: ConsoleUow) -> Response:
    """Whether the current state's verdict is cached (the stale pages poll this; never verifies).

    JSON ``{"fabric", "ready", "current_digest"}``; an unknown fabric is the 404 page.
    """
    ready, current = await run_in_threadpool(
        shown_verdict.verdict_is_current, uow, fabric_name=fabric
    )
    body = {"fabric": fabric, "ready": ready, "current_digest": current}
    return JSONResponse(body, headers={"Cache-Control": "no-store"})


def _read(
    uow: UnitOfWork, fabric: str
) -> tuple[str, mx.Relation, list[str], shown_verdict.ShownVerdict]:
    """The fabric's kind, the verdict to show as a relation, its owners, and that verdict.

    Raises:
        NotFoundError: no fabric has this name.
    """
    kind, owners = fabric_owners(uow, fabric_name=fabric)
    shown = shown_verdict.verdict_to_show(uow, fabric_name=fabric)
    view = VerificationView.model_validate_json(shown.document.content)
    return kind, mx.Relation(view, fabric), owners, shown


def _staleness(shown: shown_verdict.ShownVerdict) -> dict[str, Any]:
    """The template's banner fields: set only when the verdict is of an earlier state."""
    return {
        "stale": not shown.current,
        "current_digest": shown.current_digest or "",
        "verified_at": f"{shown.verified_at:%Y-%m-%d %H:%M:%S} UTC" if shown.verified_at else "",
    }


def _awaiting_current(
    request: Request,
    uow: UnitOfWork,
    fabric: str,
    shown: shown_verdict.ShownVerdict,
    page: Response,
) -> Response:
    """`page`; for an earlier state's verdict, make sure the current one is being computed.

    The warmer is woken (it computes every stale fabric after its debounce); without one
    (ISOFABRIC_VERDICT_WARM off, in-memory SQLite) the computation runs after this answer is
    sent, as a read of GET verification would, so the page's poll ends either way.
    """
    if shown.current:
        return page
    warmer = getattr(request.app.state, "verdict_warmer", None)
    if warmer is not None:
        warmer.poke()
    else:
        page.background = BackgroundTask(_warm, uow, fabric)
    return page


def _violation(relation: mx.Relation, found: tuple[str, str, mx.PairFacts]) -> dict[str, Any]:
    a, b, facts = found
    return {
        "a": a,
        "b": b,
        "rules": sorted(facts.rules) or ["unintended reachability"],
        "segments": sorted(facts.violating),
        "href": relation.example_href(facts),
    }


def _warm(uow: UnitOfWork, fabric: str) -> None:
    """Compute the current verdict after the answer; a failure is logged (the page polls on)."""
    try:
        verdict_warmth.warm_verdict(uow, fabric)
    except Exception:  # deleted meanwhile, a busy database: the next read or poll tries again
        log.exception("computing the verdict of fabric %s after a stale page failed", fabric)
