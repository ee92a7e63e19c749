"""What each problem type means: ``GET /problems`` and ``GET /problems/{problem_type}``.

Every problem body's ``type`` is ``/problems/<slug>`` (api/problems.py), a URI reference that
resolves against the service (RFC 9457 §3.1.1): here it answers what the problem means and what
to do, as HTML to a browser and as JSON to anything else. Like /docs and /openapi.json these
pages are public: they hold no data of the service, only its documentation.
"""

from __future__ import annotations

import html
import re
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from api.problem_types import INTERNAL, PROBLEM_TYPES, ProblemType
from policies.errors import NotFoundError
from tenancy.schemas import Page

router = APIRouter(prefix="/problems", tags=["problem types"])
SLUG_SHOWN = 64  # the longest slug is 23 characters
# No page of this server may be framed by another site (clickjacking): CSP's frame-ancestors,
# and X-Frame-Options for browsers that predate it (as the console's pages, api/ui/render.py).
NO_FRAMING = {"Content-Security-Policy": "frame-ancestors 'none'", "X-Frame-Options": "DENY"}
HTML_RESPONSE = {
    "text/html": {"schema": {"type": "string", "description": "A page to read (Accept: text/html)"}}
}


class ProblemTypeView(BaseModel):
    """A problem type: what a problem body with this ``type`` means and what to do about it."""

    type: str = Field(description="The problem body's `type` member: `/problems/<slug>`")
    status: int = Field(description="The HTTP status problems of this type are answered with")
    title: str = Field(description="The problem body's `title` member")
    description: str = Field(description="What the problem means and what the client can do")


def problem_types() -> list[ProblemType]:
    """Every problem type the service answers with, once per slug, by status then slug."""
    unique = {kind.slug: kind for kind in (*PROBLEM_TYPES.values(), INTERNAL)}
    return sorted(unique.values(), key=lambda kind: (kind.status, kind.slug))


def view(kind: ProblemType) -> ProblemTypeView:
    """The JSON form of one problem type."""
    return ProblemTypeView(
        type=kind.uri, status=kind.status, title=kind.title, description=kind.description
    )


def markdown_table() -> str:
    """The problem types as a markdown table, for the OpenAPI description."""
    rows = [
        f"| [`{kind.slug}`]({kind.uri}) | {kind.status} | {kind.title} | {kind.description} |"
        for kind in problem_types()
    ]
    return "\n".join(
        ["| type | status | title | meaning and what to do |", "|---|---|---|---|", *rows]
    )


def prefers_html(accept: str | None) -> bool:
    """Whether `accept` ranks text/html above application/json (a tie or no header: JSON)."""
    return _quality(accept or "", "text/html") > _quality(accept or "", "application/json")


def _quality(accept: str, media_type: str) -> float:
    """RFC 9110 §12.5.1: the q of the most specific range of `accept` matching `media_type`."""
    kind = media_type.split("/")[0]
    best: tuple[int, float] = (-1, 0.0)  # (specificity, q)
    for item in accept.split(","):
        media_range, *params = (part.strip() for part in item.split(";"))
        specificity = {media_type: 2, f"{kind}/*": 1, "*/*": 0}.get(media_range.lower())
        if specificity is not None and specificity > best[0]:
            best = (specificity, _q(params))
    return best[1]


def _q(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return min(max(float(value), 0.0), 1.0)
            except ValueError:
                return 0.0
    return 1.0


@router.get("", response_model=Page[ProblemTypeView], responses={200: {"content": HTML_RESPONSE}})
async def list_problem_types(request: Request) -> Page[ProblemTypeView] | HTMLResponse:
    """Every problem type of the API with its status, title and meaning (no token needed).

    JSON, or an HTML page when the Accept header ranks text/html above application/json.
    """
    kinds = problem_types()
    if prefers_html(request.headers.get("accept")):
        return HTMLResponse(_index_page(kinds, _root(request)), headers=NO_FRAMING)
    return Page(data=[view(kind) for kind in kinds], count=len(kinds), next=None)


@router.get(
    "/{problem_type}",
    response_model=ProblemTypeView,
    responses={200: {"content": HTML_RESPONSE}},
)
async def get_problem_type(
    request: Request,
    problem_type: Annotated[str, Path(description="The slug of a problem type, e.g. `conflict`")],
) -> ProblemTypeView | HTMLResponse:
    """What a problem of this type means and what to do about it (no token needed).

    JSON, or an HTML page when the Accept header ranks text/html above application/json; 404
    for a slug that is no problem type.
    """
    kind = next((kind for kind in problem_types() if kind.slug == problem_type), None)
    if kind is None:
        # Quote at most a slug's worth of the request: a 5,000-character path is not echoed back.
        shown = problem_type if len(problem_type) <= SLUG_SHOWN else problem_type[:SLUG_SHOWN] + "…"
        raise NotFoundError(f"there is no problem type '{shown}'; GET /problems lists them")
    if prefers_html(request.headers.get("accept")):
        return HTMLResponse(_type_page(kind, _root(request)), headers=NO_FRAMING)
    return view(kind)


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;"
    "line-height:1.5}code{background:#eee;padding:0 .2em}td,th{padding:.3em .6em;"
    "vertical-align:top;text-align:left;border-bottom:1px solid #ddd}"
)


def _page(title: str, body: str, root: str) -> str:
    """A self-contained page (no external asset) linking back to the list and the API docs."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title><style>{STYLE}</style></head><body>{body}<p>"
        f'<a href="{root}/problems">All problem types</a> · <a href="{root}/docs">API docs</a>'
        "</p></body></html>\n"
    )


def _prose(text: str) -> str:
    """Escaped text, with markdown code spans as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))


def _type_page(kind: ProblemType, root: str) -> str:
    body = (
        f"<h1>{html.escape(kind.title)}</h1><p>Problem type <code>{kind.uri}</code>, "
        f"HTTP {kind.status}.</p><p>{_prose(kind.description)}</p>"
    )
    return _page(f"isofabric problem: {kind.title}", body, root)


def _index_page(kinds: list[ProblemType], root: str) -> str:
    rows = "".join(
        f'<tr><td><a href="{root}{kind.uri}"><code>{kind.slug}</code></a></td>'
        f"<td>{kind.status}</td><td>{html.escape(kind.title)}</td>"
        f"<td>{_prose(kind.description)}</td></tr>"
        for kind in kinds
    )
    body = (
        "<h1>isofabric problem types</h1><p>Every error is an RFC 9457 problem+json body whose "
        "<code>type</code> is one of these.</p><table><tr><th>type</th><th>status</th>"
        f"<th>title</th><th>meaning and what to do</th></tr>{rows}</table>"
    )
    return _page("isofabric problem types", body, root)


# HEAD as GET (RFC 9110 §9.1; see api/health.py), left out of the OpenAPI document.
for _path, _endpoint, _model in (
    ("", list_problem_types, Page[ProblemTypeView]),
    ("/{problem_type}", get_problem_type, ProblemTypeView),
):
    router.add_api_route(
        _path, _endpoint, methods=["HEAD"], response_model=_model, include_in_schema=False
    )
