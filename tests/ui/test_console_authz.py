"""Console authorization: the API's RBAC policy (policies/authz.py /ui rows) on every page.

Probe routes (tests/ui/probes.py) go through `console_router` like real pages: a tenant role
sees only its tenant (another tenant's page is a 404 shaped like a missing tenant), the auditor
and the other non-operators never reach an operator action, and a post without the session's
CSRF token is refused with nothing done.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from api.access_rules import decide
from api.ui.deps import console_authorize
from policies.authz import Decision
from tests.ui.console_site import ROLES, ConsoleSite
from tests.ui.probes import GLOBAL_ACTION, TENANT_ACTION, Probes, install_probes
from tests.ui.test_console_session import csrf_of, sign_in


@pytest.fixture
def probed(site: ConsoleSite) -> Iterator[tuple[TestClient, Probes]]:
    app = site.app()
    probes = install_probes(app)
    with TestClient(app, follow_redirects=False) as client:
        yield client, probes


def as_role(client: TestClient, site: ConsoleSite, role: str) -> str:
    """Sign `client` in as `role`; the session's CSRF token."""
    assert sign_in(client, site.tokens[role]).status_code == 303
    return csrf_of(client, "/ui/no-such-page")  # every rendered page carries it


def test_a_tenant_viewer_sees_its_tenant_and_gets_404_for_another(probed, site):
    client, probes = probed
    as_role(client, site, "acme-viewer")
    assert client.get("/ui/tenants/acme/probe").status_code == 200
    other = client.get("/ui/tenants/globex/probe")
    missing = client.get("/ui/tenants/no-such-tenant/probe")
    assert other.status_code == missing.status_code == 404
    assert "tenant &#39;globex&#39; does not exist" in other.text
    assert other.headers["content-type"].startswith("text/html")
    assert probes.calls == [("GET acme", "tenant-viewer")]


def test_a_tenant_viewer_cannot_read_fabric_wide_pages(probed, site):
    client, _ = probed
    as_role(client, site, "acme-viewer")
    answer = client.get("/ui/fabrics")
    assert answer.status_code == 403
    assert answer.headers["content-type"].startswith("text/html")
    assert "may not GET /ui/fabrics" in answer.text
    home = client.get("/ui")
    assert home.status_code == 303 and home.headers["location"] == "/ui/tenants/acme"


@pytest.mark.parametrize("role", ["auditor", "billing", "acme-viewer", "acme-admin"])
def test_only_the_operator_reaches_operator_actions(probed, site, role):
    client, probes = probed
    csrf = as_role(client, site, role)
    for url in (GLOBAL_ACTION, TENANT_ACTION.replace("{tenant}", "acme")):
        answer = client.post(url, data={"csrf_token": csrf})
        assert answer.status_code == 403, (role, url)
        assert "text/html" in answer.headers["content-type"]
    assert [c for c in probes.calls if c[0].startswith("POST")] == []


def test_the_operator_posts_an_action_with_the_csrf_token(probed, site):
    client, probes = probed
    csrf = as_role(client, site, "operator")
    assert client.post(GLOBAL_ACTION, data={"csrf_token": csrf}).status_code == 200
    assert probes.calls == [("POST global", "operator")]


@pytest.mark.parametrize(
    "form",
    [{}, {"csrf_token": ""}, {"csrf_token": "0" * 64}, {"other": "x"}],
    ids=["missing", "empty", "wrong", "absent-with-other-fields"],
)
def test_a_post_without_the_sessions_csrf_token_is_refused_and_changes_nothing(probed, site, form):
    client, probes = probed
    as_role(client, site, "operator")
    answer = client.post(TENANT_ACTION.replace("{tenant}", "acme"), data=form)
    assert answer.status_code == 403
    assert "CSRF token is missing or wrong" in answer.text
    assert probes.calls == []


def test_another_sessions_csrf_token_does_not_pass(probed, site):
    client, probes = probed
    auditor_csrf = as_role(client, site, "auditor")
    as_role(client, site, "operator")
    answer = client.post(GLOBAL_ACTION, data={"csrf_token": auditor_csrf})
    assert answer.status_code == 403
    assert probes.calls == []


def test_a_csrf_token_in_a_json_body_does_not_count(probed, site):
    client, probes = probed
    csrf = as_role(client, site, "operator")
    answer = client.post(GLOBAL_ACTION, json={"csrf_token": csrf})
    assert answer.status_code == 403
    assert probes.calls == []


@pytest.mark.parametrize("role", sorted(ROLES))
def test_the_nav_shows_exactly_the_pages_the_policy_allows(probed, site, role):
    client, _ = probed
    as_role(client, site, role)
    html = client.get("/ui/no-such-page").text  # the nav is on every rendered page
    expected = {
        "operator": ["Fabrics", "Tenants", "Evidence", "Audit log"],
        "auditor": ["Fabrics", "Tenants", "Evidence", "Audit log"],
        "billing": ["Tenants"],
        "acme-viewer": ["My tenant", "Evidence"],
        "acme-admin": ["My tenant", "Evidence"],
    }[role]
    nav = html.split('<nav class="nav"', 1)[1].split("</nav>", 1)[0]
    shown = [
        label
        for label in ["Fabrics", "Tenants", "My tenant", "Evidence", "Audit log"]
        if f">{label}</a>" in nav
    ]
    assert shown == expected


@pytest.mark.parametrize(
    ("role", "tenant", "domain", "path", "method", "decision"),
    [
        ("auditor", None, "*", "/ui/fabrics/{fabric}/matrix", "GET", Decision.ALLOW),
        ("auditor", None, "*", "/ui/fabrics", "POST", Decision.FORBIDDEN),
        (
            "auditor",
            None,
            "acme",
            "/ui/tenants/{tenant}/actions/offboard",
            "GET",
            Decision.FORBIDDEN,
        ),
        ("operator", None, "acme", "/ui/tenants/{tenant}/actions/offboard", "POST", Decision.ALLOW),
        ("tenant-viewer", "acme", "acme", "/ui/tenants/{tenant}/proofs", "GET", Decision.ALLOW),
        ("tenant-viewer", "acme", "globex", "/ui/tenants/{tenant}", "GET", Decision.HIDDEN),
        (
            "tenant-admin",
            "acme",
            "acme",
            "/ui/tenants/{tenant}/actions/grant",
            "POST",
            Decision.FORBIDDEN,
        ),
        ("billing", None, "*", "/ui/evidence", "GET", Decision.FORBIDDEN),
        # Evidence as /v1/proofs: a tenant role reads its own tenant's proofs (the page narrows),
        # never a fabric file, never the audit log.
        ("tenant-viewer", "acme", "acme", "/ui/evidence", "GET", Decision.ALLOW),
        ("tenant-admin", "acme", "acme", "/ui/evidence/proofs/{proof_id}", "GET", Decision.ALLOW),
        ("tenant-viewer", "acme", "globex", "/ui/evidence", "GET", Decision.HIDDEN),
        (
            "tenant-viewer",
            "acme",
            "acme",
            "/ui/evidence/fabrics/{fabric}/snapshots/{digest}/artifacts/{path:path}",
            "GET",
            Decision.FORBIDDEN,
        ),
        ("tenant-admin", "acme", "acme", "/ui/audit-log", "GET", Decision.FORBIDDEN),
        ("auditor", None, "*", "/ui/audit-log/inclusion", "GET", Decision.ALLOW),
        ("agent", None, "*", "/ui", "GET", Decision.FORBIDDEN),
    ],
)
def test_the_ui_rows_of_the_policy(role, tenant, domain, path, method, decision):
    assert decide("principal:x", role, tenant, domain, path, method) is decision


# Console routes anyone may reach: the sign-in form, sign-out (CSRF-checked itself), the static
# files and the HTML 404 for paths no page serves.
PUBLIC = {
    ("GET", "/ui/sign-in"),
    ("HEAD", "/ui/sign-in"),
    ("POST", "/ui/sign-in"),
    ("POST", "/ui/sign-out"),
    ("GET", "/ui/{path:path}"),
    ("HEAD", "/ui/{path:path}"),
    ("POST", "/ui/{path:path}"),
}


def test_every_console_route_is_authorized_by_the_policy_or_public(site):
    app = site.app()
    unguarded = set()
    for route in app.routes:
        if not isinstance(route, APIRoute) or not route.path.startswith("/ui"):
            continue
        path = route.path
        dependencies = {d.call for d in route.dependant.dependencies}
        for method in route.methods or set():
            if console_authorize not in dependencies and (method, path) not in PUBLIC:
                unguarded.add((method, path))
        assert route.include_in_schema is False, path
    assert unguarded == set()
