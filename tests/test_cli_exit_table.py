"""The exit status table of docs/operators/command-line.md and the client's mapping agree.

Every problem type of the API (api/problems.py) is named in exactly one row of that
page's table, and the client exits with that row's status for it; each HTTP status a
row lists (a problem of type about:blank, or a proxy's own page) maps to that row too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from api.problem_types import INTERNAL, PROBLEM_TYPES
from cli import client

PAGE = Path(__file__).parents[1] / "docs" / "operators" / "command-line.md"
KINDS = {kind.slug: kind for kind in (*PROBLEM_TYPES.values(), INTERNAL)}


def exit_rows() -> dict[int, str]:
    """The table's rows: exit status -> its "problem types (status)" cell."""
    header = "| exit | meaning | problem types (status) |"
    lines = PAGE.read_text().splitlines()
    start = lines.index(header) + 2
    rows: dict[int, str] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        status, _meaning, cell = (part.strip() for part in line.strip("|").split("|"))
        rows[int(status)] = cell
    return rows


ROWS = exit_rows()


@pytest.mark.parametrize("slug", sorted(KINDS))
def test_each_problem_type_is_in_one_row_and_exits_with_it(slug):
    rows = [status for status, cell in ROWS.items() if f"`{slug}`" in cell]

    assert len(rows) == 1, f"the exit table names `{slug}` in rows {rows}"
    kind = KINDS[slug]
    assert client.exit_status(kind.status, kind.uri) == rows[0]


@pytest.mark.parametrize(("expected", "cell"), sorted(ROWS.items()))
def test_each_listed_http_status_of_an_untyped_problem_exits_with_its_row(expected, cell):
    listed = re.search(r"\(([^()]*)\)[^()]*$", cell)
    statuses = re.findall(r"\b([1-5]\d\d|5xx)\b", listed.group(1)) if listed else []
    for status in statuses:
        code = 503 if status == "5xx" else int(status)
        assert client.exit_status(code, "about:blank") == expected, status
        assert client.exit_status(code, None) == expected, status
