"""The operational endpoints answer HEAD as GET, and hostile problem slugs are 404s (issue 14).

RFC 9110 §9.1: a general-purpose server supports HEAD wherever it supports GET; load balancers'
health checks and uptime probes send HEAD. The HEAD routes stay out of the OpenAPI document.
A slug that is no problem type, however long, encoded or marked up, is a 404 problem that
quotes at most a slug's worth of it.
"""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from api.problem_pages import SLUG_SHOWN

TOKEN = "head-operator-token"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
OPERATIONAL = ["/healthz", "/readyz", "/metrics", "/problems", "/problems/conflict"]
PAGES = [*OPERATIONAL, "/docs"]


@pytest.fixture
def guarded(make_client):
    return make_client(admin_token=TOKEN)


@pytest.mark.parametrize("path", PAGES)
def test_head_answers_as_get_does(guarded, path):
    auth = {"Authorization": f"Bearer {TOKEN}"}

    got = guarded.get(path, headers=auth)
    head = guarded.head(path, headers=auth)

    assert got.status_code == head.status_code == 200
    assert head.headers["content-type"] == got.headers["content-type"]


def test_head_on_metrics_needs_what_get_needs(guarded):
    head = guarded.head("/metrics")

    assert head.status_code == 401
    assert head.headers["content-type"] == "application/problem+json"


def test_the_head_routes_are_not_in_the_openapi_document(guarded):
    paths = guarded.get("/openapi.json").json()["paths"]

    for path in OPERATIONAL:
        assert set(paths[path.replace("conflict", "{problem_type}")]) == {"get"}, path


HOSTILE_SLUGS = [
    "a" * 5000,
    "%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    "%3Cb%3Ebold",
    "..%2F..%2Fetc%2Fpasswd",
    "%C3%A9t%C3%A9",
    "CONFLICT",
    "conflict%00",
]


@pytest.mark.parametrize("slug", HOSTILE_SLUGS, ids=lambda s: s[:20])
@pytest.mark.parametrize("accept", [None, BROWSER, "application/problem+json"])
def test_a_hostile_slug_is_a_404_problem_quoting_at_most_a_slugs_worth(guarded, slug, accept):
    response = guarded.get(f"/problems/{slug}", headers={"Accept": accept} if accept else {})

    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"] in ("/problems/not-found", "about:blank")
    detail = response.json()["detail"]
    assert len(detail) < SLUG_SHOWN + 100, detail
    assert "a" * (SLUG_SHOWN + 1) not in detail


def test_invented_methods_mint_no_time_series(guarded):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for number in range(5):
        guarded.request(f"EVIL{number}", "/healthz")
        guarded.request(f"EVIL{number}", f"/no-such-route-{number}")
    guarded.request("BREW", "/v1/fabrics", headers=auth)

    exposition = guarded.get("/metrics", headers=auth).text

    families = {f.name: f for f in text_string_to_metric_families(exposition)}  # parses
    methods = {s.labels["method"] for s in families["isofabric_http_requests"].samples}
    assert methods == {"other"}  # this scrape is counted once answered
    assert "EVIL" not in exposition and "BREW" not in exposition
    other = [
        s
        for s in families["isofabric_http_requests"].samples
        if s.name.endswith("_total") and s.labels["method"] == "other"
    ]
    assert sum(s.value for s in other) == 11
