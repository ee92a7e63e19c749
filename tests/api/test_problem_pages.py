"""Every problem type is listed with its meaning, and every problem's `type` resolves (issue 14).

A problem body's ``type`` is ``/problems/<slug>``; GET on it answers what the problem means and
what to do: an HTML page for a browser, JSON otherwise. The pages are public, like /docs.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from api.problem_types import INTERNAL, PROBLEM_TYPES
from tests.builders import assert_problem
from tests.docs_page import absolute_urls

TOKEN = "problem-pages-operator"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
SLUGS = sorted({kind.slug for kind in (*PROBLEM_TYPES.values(), INTERNAL)})
API_SOURCES = sorted(Path(__file__).parents[2].joinpath("api").rglob("*.py"))


@pytest.fixture
def guarded(make_client):
    """A closed service: /v1 needs a token, the problem pages do not."""
    return make_client(admin_token=TOKEN)


def test_the_list_names_every_problem_type_with_its_meaning(guarded):
    response = guarded.get("/problems")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["count"] == len(SLUGS) == len(body["data"])
    assert body["next"] is None
    assert sorted(item["type"] for item in body["data"]) == [f"/problems/{s}" for s in SLUGS]
    for item in body["data"]:
        assert item.keys() == {"type", "status", "title", "description"}
        assert len(item["description"]) > 60, item  # a meaning and what to do, not a word


@pytest.mark.parametrize("slug", SLUGS)
def test_each_problem_type_answers_json_by_default(guarded, slug):
    kind = next(k for k in (*PROBLEM_TYPES.values(), INTERNAL) if k.slug == slug)

    response = guarded.get(f"/problems/{slug}")

    assert response.status_code == 200
    assert response.json() == {
        "type": f"/problems/{slug}",
        "status": kind.status,
        "title": kind.title,
        "description": kind.description,
    }


@pytest.mark.parametrize("slug", SLUGS)
def test_each_problem_type_is_a_page_for_a_browser(guarded, slug):
    kind = next(k for k in (*PROBLEM_TYPES.values(), INTERNAL) if k.slug == slug)

    response = guarded.get(f"/problems/{slug}", headers={"Accept": BROWSER})

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    page = response.text
    assert f"<h1>{kind.title}</h1>" in page
    assert f"HTTP {kind.status}" in page
    # the text word for word, escaped, its markdown code spans as <code>
    text = html.escape(kind.description, quote=False)
    assert re.sub(r"`([^`]+)`", r"<code>\1</code>", text) in page
    assert absolute_urls(page) == []  # self-contained: no stylesheet or font from elsewhere
    assert 'href="/problems"' in page


def test_the_list_is_a_page_for_a_browser_linking_every_type(guarded):
    response = guarded.get("/problems", headers={"Accept": BROWSER})

    assert response.headers["content-type"] == "text/html; charset=utf-8"
    for slug in SLUGS:
        assert f'href="/problems/{slug}"' in response.text


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        (None, False),
        ("*/*", False),
        ("application/json", False),
        ("application/problem+json, */*;q=0.1", False),
        ("text/html;q=0.1, application/json", False),
        ("text/*", True),
        ("text/html", True),
        ("application/json;q=0.5, text/html", True),
        ("text/html;q=bogus, application/json", False),
    ],
)
def test_html_only_when_the_client_prefers_it(guarded, accept, html):
    headers = {"Accept": accept} if accept is not None else {}

    response = guarded.get("/problems/conflict", headers=headers)

    expected = "text/html; charset=utf-8" if html else "application/json"
    assert response.headers["content-type"] == expected


def test_an_unknown_problem_type_is_a_404_problem_whose_type_resolves(guarded):
    body = assert_problem(guarded.get("/problems/no-such-problem"), 404)

    assert body["type"] == "/problems/not-found"
    assert "no-such-problem" in body["detail"]
    assert guarded.get(body["type"]).status_code == 200


def test_the_type_of_real_problem_responses_resolves_without_a_token(guarded):
    problems = [
        guarded.get("/v1/tenants"),  # 401 unauthorized
        guarded.get("/v1/tenants?limit=0", headers={"Authorization": f"Bearer {TOKEN}"}),
        guarded.get("/v1/tenants/nobody", headers={"Authorization": f"Bearer {TOKEN}"}),
    ]

    assert [p.status_code for p in problems] == [401, 422, 404]
    for problem in problems:
        page = guarded.get(problem.json()["type"])
        assert page.status_code == 200, problem.json()
        assert page.json()["status"] == problem.status_code


def test_every_slug_the_api_code_answers_with_resolves(guarded):
    """A slug written anywhere in api/ (``slug="..."``) has its page, not only the table's."""
    written = {
        slug
        for source in API_SOURCES
        for slug in re.findall(r"""\bslug=["']([a-z0-9-]+)["']""", source.read_text())
    }

    assert written, "no slug literal found: the pattern no longer matches the code"
    for slug in sorted(written):
        assert guarded.get(f"/problems/{slug}").status_code == 200, slug


def test_the_openapi_description_lists_every_problem_type(guarded):
    description = guarded.get("/openapi.json").json()["info"]["description"]

    for slug in SLUGS:
        assert f"[`{slug}`](/problems/{slug})" in description, slug
