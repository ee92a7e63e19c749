"""The isolation matrix (/ui/fabrics/{fabric}/matrix) and its counterexamples, the auditor's pages.

Both read the verdict GET /v1/fabrics/{fabric}/verification serves (tenancy/cached_reads.py:
computed once per committed state, then cached), plus the fabric's owners (one small query);
api/ui/isolation_matrix.py turns the verdict into cells. Nothing is verified here.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.ui import isolation_matrix as mx
from api.ui.deps import ConsoleUow, console_router
from api.ui.render import render
from tenancy import cached_reads
from tenancy.fabric_map import fabric_owners
from tenancy.schemas import VerificationView
from tenancy.uow import UnitOfWork

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
    kind, relation, owners = await run_in_threadpool(_read, uow, fabric)
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
    }
    return render(request, "matrix.html", context)


@router.get("/fabrics/{fabric}/counterexamples")
async def counterexamples_page(request: Request, fabric: str, uow: ConsoleUow) -> Response:
    """Every counterexample of the fabric's verdict, each at its anchor ``#cx-<index>``."""
    kind, relation, _ = await run_in_threadpool(_read, uow, fabric)
    context = {
        "active": "fabrics",
        "fabric": fabric,
        "segment_name": SEGMENT_NAMES.get(kind, "segment"),
        "holds": relation.view.holds,
        "digest": relation.view.snapshot_digest,
        "counterexamples": list(enumerate(relation.view.counterexamples)),
    }
    return render(request, "counterexamples.html", context)


def _read(uow: UnitOfWork, fabric: str) -> tuple[str, mx.Relation, list[str]]:
    """The fabric's kind, its verdict as a relation, and its owners (NotFoundError: no fabric)."""
    kind, owners = fabric_owners(uow, fabric_name=fabric)
    document = cached_reads.verification_json(uow, fabric_name=fabric)
    view = VerificationView.model_validate_json(document.content)
    return kind, mx.Relation(view, fabric), owners


def _violation(relation: mx.Relation, found: tuple[str, str, mx.PairFacts]) -> dict[str, Any]:
    a, b, facts = found
    return {
        "a": a,
        "b": b,
        "rules": sorted(facts.rules) or ["unintended reachability"],
        "segments": sorted(facts.violating),
        "href": relation.example_href(facts),
    }
