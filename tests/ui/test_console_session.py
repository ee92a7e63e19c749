"""Console sign-in, sessions and CSRF, through the real app (TestClient).

The session cookie is the API token: sign-in checks it as the bearer check does, each request
resolves it again (a revoked or expired token's cookie stops working at once), and every post
carries a CSRF token derived from it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx2
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from tenancy.store.settings import Settings
from tenancy.usecases import tokens
from tests.builders import FakeClock
from tests.ui.console_site import ConsoleSite

LOOPBACK = ("127.0.0.1", 50000)
NONCE = re.compile(r'name="csrf_token" value="([^"]+)"')


def sign_in(client: TestClient, token: str, next_path: str = "/ui") -> httpx2.Response:
    """Post the sign-in form as a browser would (its nonce cookie and field)."""
    form = client.get("/ui/sign-in")
    nonce = NONCE.search(form.text)
    assert nonce is not None
    return client.post(
        "/ui/sign-in",
        data={"csrf_token": nonce.group(1), "token": token, "next": next_path},
        follow_redirects=False,
    )


def csrf_of(client: TestClient, page: str = "/ui") -> str:
    """The session's CSRF token, as a page's sign-out form carries it."""
    found = NONCE.search(client.get(page).text)
    assert found is not None
    return found.group(1)


@pytest.fixture
def client(site: ConsoleSite) -> Iterator[TestClient]:
    with TestClient(site.app(), follow_redirects=False) as made:
        yield made


def test_a_valid_token_signs_in_with_a_strict_http_only_cookie_scoped_to_the_console(client, site):
    answer = sign_in(client, site.tokens["auditor"], "/ui/fabrics")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/fabrics"
    cookie = next(
        c for c in answer.headers.get_list("set-cookie") if c.startswith("isofabric_session=")
    )
    assert cookie.startswith(f"isofabric_session={site.tokens['auditor']};")
    attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "path=/ui", "samesite=strict"} <= attributes
    assert "secure" not in attributes  # plain http: a Secure cookie would never come back
    page = client.get("/ui/fabrics")
    assert page.status_code == 200
    assert 'data-role="auditor"' in page.text


def test_an_unknown_token_does_not_sign_in(client):
    answer = sign_in(client, "isf_" + "A" * 43)
    assert answer.status_code == 401
    assert "Not signed in: the token is not valid" in answer.text
    assert "isofabric_session=" not in answer.headers.get("set-cookie", "")
    assert client.get("/ui").status_code == 303


def test_a_sign_in_without_the_form_nonce_is_refused(client, site):
    answer = client.post(
        "/ui/sign-in", data={"token": site.tokens["operator"]}, follow_redirects=False
    )
    assert answer.status_code == 403
    assert "isofabric_session=" not in answer.headers.get("set-cookie", "")


def test_without_a_cookie_a_page_redirects_to_sign_in_and_back(client):
    answer = client.get("/ui/fabrics")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/sign-in?reason=required&next=%2Fui%2Ffabrics"
    form = client.get(answer.headers["location"])
    assert "Sign in with an API token" in form.text
    assert 'name="next" value="/ui/fabrics"' in form.text


@pytest.mark.parametrize(
    "forged",
    ["isf_" + "B" * 43, "not-a-token", "admin-secret", "isf_" + "x" * 400],
)
def test_a_forged_cookie_is_refused_and_cleared(client, forged):
    answer = client.get("/ui/fabrics", headers={"Cookie": f"isofabric_session={forged}"})
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/ui/sign-in?reason=invalid")
    cleared = answer.headers["set-cookie"]
    assert cleared.startswith('isofabric_session=""') and "Max-Age=0" in cleared


def test_a_revoked_tokens_cookie_stops_working_at_once(client, site):
    token_id, secret = site.mint("short-lived", "auditor")
    assert sign_in(client, secret).status_code == 303
    assert client.get("/ui/fabrics").status_code == 200
    tokens.revoke_token(site.uow(), token_id=token_id)
    answer = client.get("/ui/fabrics")
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/ui/sign-in?reason=invalid")
    assert client.get("/ui/sign-in?reason=invalid").text.count("Your session ended") == 1


def test_an_expired_tokens_cookie_is_refused(site):
    clock = FakeClock(datetime.now(UTC))
    _, secret = site.mint("expiring", "operator", expires_at=clock.now + timedelta(hours=1))
    with TestClient(site.app(clock=clock), follow_redirects=False) as client:
        assert sign_in(client, secret).status_code == 303
        assert client.get("/ui/fabrics").status_code == 200
        clock.advance(3601)
        answer = client.get("/ui/fabrics")
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/ui/sign-in?reason=invalid")


def test_sign_out_needs_the_csrf_token_and_then_clears_the_cookie(client, site):
    sign_in(client, site.tokens["operator"])
    refused = client.post("/ui/sign-out", data={"csrf_token": "0" * 64})
    assert refused.status_code == 403
    assert "isofabric_session" not in refused.headers.get("set-cookie", "")
    assert client.get("/ui/fabrics").status_code == 200  # still signed in
    answer = client.post("/ui/sign-out", data={"csrf_token": csrf_of(client)})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/sign-in?reason=signed-out"
    assert answer.headers["set-cookie"].startswith('isofabric_session=""')


def test_a_sign_in_never_redirects_off_the_console(client, site):
    for target in ("//evil.example/ui", "https://evil.example", "/v1/tenants", "/ui/../v1"):
        answer = sign_in(client, site.tokens["operator"], target)
        assert answer.headers["location"] == "/ui"


def test_console_pages_send_a_same_origin_content_security_policy(client, site):
    sign_in(client, site.tokens["operator"])
    page = client.get("/ui/fabrics")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert page.headers["cache-control"] == "no-store"


def test_an_unknown_console_path_is_an_html_404(client):
    answer = client.get("/ui/no-such-page")
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("text/html")
    assert "the console has no page at /ui/no-such-page" in answer.text


def test_the_api_keeps_answering_problem_json(client):
    answer = client.get("/v1/tenants")
    assert answer.status_code == 401
    assert answer.headers["content-type"] == "application/problem+json"


def test_static_assets_are_served_from_the_package(client):
    answer = client.get("/ui/static/console.css")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/css")


def test_open_mode_acts_as_the_operator_for_loopback_clients_only(tmp_path):
    from tests.ui.console_site import console_site

    site = console_site(tmp_path, with_tokens=False)
    app = site.app()
    local_url = "http://127.0.0.1:8000"
    with TestClient(app, base_url=local_url, client=LOOPBACK, follow_redirects=False) as local:
        page = local.get("/ui/fabrics")
        assert page.status_code == 200
        assert 'data-role="operator"' in page.text and "open mode" in page.text
        assert "Sign out" not in page.text
    with TestClient(app, client=("10.0.0.7", 50000), follow_redirects=False) as remote:
        answer = remote.get("/ui/fabrics")
        assert answer.status_code == 303
        assert "reason=open-mode-remote" in answer.headers["location"]
        assert "only clients on its own host" in remote.get(answer.headers["location"]).text
    site.engine.dispose()


def test_the_console_root_with_a_slash_goes_to_the_console(client):
    answer = client.get("/ui/")
    assert answer.status_code == 307 and answer.headers["location"] == "/ui"


def test_open_mode_refuses_a_loopback_client_naming_another_host(tmp_path):
    # a page of evil.example resolving to 127.0.0.1 (DNS rebinding) must not act as the operator
    from tests.ui.console_site import console_site

    site = console_site(tmp_path, with_tokens=False)
    for base_url in ("http://evil.example:8000", "http://127.0.0.1.evil.example"):
        with TestClient(
            site.app(), base_url=base_url, client=LOOPBACK, follow_redirects=False
        ) as client:
            answer = client.get("/ui/fabrics")
        assert answer.status_code == 303
        assert "reason=open-mode-remote" in answer.headers["location"]
    with TestClient(
        site.app(), base_url="http://localhost:8000", client=LOOPBACK, follow_redirects=False
    ) as client:
        assert client.get("/ui/fabrics").status_code == 200
    site.engine.dispose()


@pytest.mark.parametrize(
    ("trusted", "peer", "proto", "secure"),
    [
        (("127.0.0.1",), "127.0.0.1", "https", True),
        (("10.0.0.0/8",), "10.1.2.3", "https", True),
        (("*",), "192.0.2.7", "https, http", True),  # the client-facing proxy's value first
        ((), "127.0.0.1", "https", False),  # no proxy configured: the header is anyone's
        (("10.0.0.0/8",), "192.0.2.7", "https", False),  # a peer that is not the proxy
        (("127.0.0.1",), "127.0.0.1", "http", False),
    ],
)
def test_behind_a_trusted_tls_proxy_the_cookies_are_secure(site, trusted, peer, proto, secure):
    settings = Settings(database_url=site.url, forwarded_allow_ips=trusted)
    app = create_app(settings, engine=site.engine)
    headers = {"X-Forwarded-Proto": proto}
    with TestClient(app, follow_redirects=False, client=(peer, 50000), headers=headers) as client:
        form = client.get("/ui/sign-in")
        nonce = NONCE.search(form.text)
        assert nonce is not None
        # Sent by hand: the client speaks http to the proxy's side, where a Secure cookie
        # would not come back by itself.
        answer = client.post(
            "/ui/sign-in",
            data={"csrf_token": nonce.group(1), "token": site.tokens["auditor"], "next": "/ui"},
            headers={"Cookie": f"isofabric_sign_in={nonce.group(1)}"},
        )
    for response, name in ((form, "isofabric_sign_in"), (answer, "isofabric_session")):
        cookie = next(c for c in response.headers.get_list("set-cookie") if c.startswith(name))
        assert ("secure" in {a.strip().lower() for a in cookie.split(";")}) is secure
