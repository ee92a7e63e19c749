"""Hostile review of the console (issue 15): each test pins a defect found and fixed.

Hostile input is a 4xx HTML page that writes nothing, never a 500; a change confirmed once is
committed once (a replayed or stale confirmation is refused, nothing written).
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from tenancy.schemas import TokenCreate
from tenancy.store.pagination import encode_cursor
from tenancy.usecases import tokens
from tests.builders import dump_database
from tests.ui.console_site import ConsoleSite
from tests.ui.test_console_session import csrf_of
from tests.ui.test_console_session import sign_in as client_sign_in
from tests.ui.test_fabrics_page import register_targets

HUGE = "9" * 20  # overflows a 64-bit integer column


def signed_in(site: ConsoleSite, role: str) -> TestClient:
    client = TestClient(site.app(), follow_redirects=False)
    client_sign_in(client, site.tokens[role])
    return client


@pytest.mark.parametrize(
    "query",
    [
        f"start={HUGE}",
        f"cursor={encode_cursor(HUGE)}",
        f"cursor={encode_cursor('²')}",  # isdigit() but not int()
    ],
)
def test_an_audit_log_position_out_of_range_is_a_4xx_page(site: ConsoleSite, query: str):
    with signed_in(site, "auditor") as client:
        answer = client.get(f"/ui/audit-log?{query}")
    assert answer.status_code in (400, 422)
    assert answer.headers["content-type"].startswith("text/html")


def test_the_api_refuses_an_overflowing_audit_cursor_with_a_422(site: ConsoleSite):
    bearer = {"Authorization": f"Bearer {site.tokens['auditor']}"}
    with TestClient(site.app()) as client:
        answer = client.get(f"/v1/audit/entries?cursor={encode_cursor(HUGE)}", headers=bearer)
    assert answer.status_code == 422
    assert answer.json()["detail"] == "cursor is not valid"


@pytest.mark.parametrize("count", ["²", "\u0661", "-1", HUGE])  # \u0661: Arabic-Indic one
def test_a_non_ascii_or_bad_node_count_is_a_422_page_and_writes_nothing(
    site: ConsoleSite, count: str
):
    with signed_in(site, "operator") as client:
        token = csrf_of(client)
        before = dump_database(site.engine)
        answer = client.post(
            "/ui/tenants/acme/actions/allocate",
            data={"csrf_token": token, "fabric": "ib-east", "count": count},
        )
    assert answer.status_code == 422
    assert "whole number" in answer.text
    assert dump_database(site.engine) == before


def confirmed_form(client: TestClient, confirm_url: str) -> dict[str, str]:
    """The hidden fields of a confirmation page's commit form, CSRF token included."""
    page = client.get(confirm_url)
    assert page.status_code == 200
    form = page.text.split('class="confirm-form"')[1].split("</form>")[0]
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form))


def test_a_replayed_confirmation_commits_once(site: ConsoleSite):
    path = "/ui/tenants/acme/actions/allocate"
    with signed_in(site, "operator") as client:
        form = confirmed_form(client, f"{path}/confirm?fabric=ib-east&count=1")
        assert client.post(path, data=form).status_code == 303
        held = dump_database(site.engine)
        again = client.post(path, data=form)  # a double submit, or the back button
    assert again.status_code == 409
    assert "already sent" in again.text
    assert dump_database(site.engine) == held


def test_a_confirmation_made_stale_by_another_change_is_refused(site: ConsoleSite):
    path = "/ui/tenants/acme/actions/allocate"
    with signed_in(site, "operator") as client:
        form = confirmed_form(client, f"{path}/confirm?fabric=ib-east&count=1")
        other = confirmed_form(client, "/ui/tenants/globex/actions/offboard")
        assert client.post("/ui/tenants/globex/actions/offboard", data=other).status_code == 303
        after = dump_database(site.engine)
        stale = client.post(path, data=form)  # its what-if predates globex's offboarding
        missing = client.post(path, data={k: v for k, v in form.items() if k != "seen_log_size"})
    assert stale.status_code == missing.status_code == 409
    assert "state changed since this change was confirmed" in stale.text
    assert dump_database(site.engine) == after


def test_a_double_click_commits_once_even_when_both_posts_race(site: ConsoleSite):
    path = "/ui/tenants/acme/actions/allocate"
    with signed_in(site, "operator") as client:
        form = confirmed_form(client, f"{path}/confirm?fabric=ib-east&count=1")
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda _: client.post(path, data=form).status_code, [0, 1]))
    assert sorted(answers) == [303, 409]


def test_an_agent_tokens_cookie_is_no_session(site: ConsoleSite):
    register_targets(site)
    spec = TokenCreate(name="agent", role="agent", fabric="ib-east", target="sm-a")
    agent = tokens.create_token(site.uow(), spec=spec).token
    with TestClient(site.app(), follow_redirects=False) as client:
        client.cookies.set("isofabric_session", agent, path="/ui")
        answer = client.get("/ui/fabrics")
    assert answer.status_code == 303
    assert "reason=invalid" in answer.headers["location"]
    assert 'isofabric_session=""' in answer.headers["set-cookie"]


@pytest.mark.parametrize(
    ("role", "path", "status"),
    [
        ("auditor", "/ui/fabrics", 200),
        ("acme-viewer", "/ui/tenants/acme", 200),
        ("acme-viewer", "/ui/tenants/globex", 404),
        ("acme-viewer", "/ui/fabrics", 403),
        ("auditor", "/ui/actions/onboard", 403),
    ],
)
def test_head_answers_as_get_does_under_the_same_rules(
    site: ConsoleSite, role: str, path: str, status: int
):
    with signed_in(site, role) as client:
        answer = client.head(path)
    assert answer.status_code == status
    assert answer.headers["content-type"].startswith("text/html")
