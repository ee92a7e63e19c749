"""docs/integrators/orchestrators.md follows the UFM-compatible API's code (api/ufm/).

Its route x role table has a row for every route the facade serves, its base URL table every
base path, and its limits are the code's numbers: a route or a limit changed without the page
fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from api.ufm.auth import Style
from api.ufm.guard import DEFAULT_BURST, DEFAULT_RATE, REFUSAL_TTL
from api.ufm.routes import ROUTES
from tenancy.schemas.ufm import MAX_GUIDS_PER_CALL

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "integrators" / "orchestrators.md").read_text()


def section(title: str) -> str:
    start = PAGE.index(f"\n## {title}\n")
    end = PAGE.find("\n## ", start + 1)
    return PAGE[start : end if end > 0 else None]


@pytest.mark.parametrize(("method", "path"), [(m, p) for m, p, _ in ROUTES], ids=str)
def test_every_route_of_the_facade_has_a_row_for_every_role(method: str, path: str):
    table = section("Routes and roles")
    rows = [line for line in table.splitlines() if line.startswith(f"| `{method} {path}`")]
    rows += [line for line in table.splitlines() if f", `{method} {path}`" in line]
    assert len(rows) == 1, f"{method} {path}: no row (or more than one) in the route x role table"
    assert rows[0].count(" | ") == 3, rows[0]  # the route, then three kinds of token


def test_every_base_path_is_in_the_base_url_table():
    table = section("Base URLs")
    for style in Style:
        assert f"| `/{style.value}` |" in table
        if style is not Style.KERBEROS:
            assert f"`…/{style.value}`" in table or f"`/fabrics/{{fabric}}/{style.value}`" in table


def test_the_limits_are_the_codes():
    limits = section("Limits")
    assert f"at most {MAX_GUIDS_PER_CALL:,}" in limits
    assert f"{DEFAULT_RATE:g} a second with bursts of {DEFAULT_BURST:g}" in limits
    assert (
        f"within {REFUSAL_TTL:g}\n  seconds" in limits
        or f"within {REFUSAL_TTL:g} seconds" in limits
    )
