"""The matrix and counterexamples pages never wait for a whole verification once a verdict of
the fabric was cached: after a change they show the previous state's verdict under a banner
naming both states, and the current one once it is computed (issue 15 item 4).

The warmer is off here (Settings verdict_warm=False), so nothing computes behind the test's
back but what the page itself schedules after its answer (api/ui/pages/matrix.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from api.app import create_app
from tenancy.gate import verdict_warmth
from tenancy.schemas import GrantCreate
from tenancy.store.settings import Settings
from tenancy.usecases import shared_services
from tests.ui.browser import screenshot
from tests.ui.console_site import ConsoleSite
from tests.ui.test_console_session import sign_in as client_sign_in

FABRIC = "ib-east"
STATUS = f"/ui/fabrics/{FABRIC}/matrix/status"
DIGEST = re.compile(r"Verdict of (?:the earlier )?state <code>([^<…]+)…</code>")


def unwarmed_app(site: ConsoleSite) -> FastAPI:
    """The service on the site without a verdict warmer."""
    return create_app(Settings(database_url=site.url, verdict_warm=False), engine=site.engine)


def change(site: ConsoleSite) -> None:
    """A committed change of ib-east (storage granted to globex), made beside the service."""
    spec = GrantCreate(fabric=FABRIC, service="storage")
    shared_services.grant_service(site.uow(), tenant_name="globex", spec=spec)


def shown_digest(html: str) -> str:
    found = DIGEST.search(html)
    assert found is not None, html
    return found.group(1)


@pytest.fixture
def auditor(site: ConsoleSite) -> Iterator[tuple[TestClient, FastAPI]]:
    app = unwarmed_app(site)
    with TestClient(app, follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        yield client, app


@pytest.mark.parametrize("page_name", ["matrix", "counterexamples"])
def test_after_a_change_the_previous_verdict_is_shown_labelled_then_the_current(
    site: ConsoleSite, auditor: tuple[TestClient, FastAPI], page_name: str
):
    client, _app = auditor
    url = f"/ui/fabrics/{FABRIC}/{page_name}"
    first = client.get(url)  # the first ever load computes: no banner
    assert first.status_code == 200
    assert "stale-verdict" not in first.text
    previous = shown_digest(first.text)
    ready = client.get(STATUS).json()
    assert ready["ready"] is True and ready["current_digest"].startswith(previous)

    change(site)
    status = client.get(STATUS)
    assert status.headers["content-type"].startswith("application/json")
    new = status.json()["current_digest"]
    assert status.json() == {"fabric": FABRIC, "ready": False, "current_digest": new}
    assert not new.startswith(previous)

    stale = client.get(url)
    assert stale.status_code == 200
    assert shown_digest(stale.text) == previous  # the digest the verdict is of
    banner = stale.text.split('class="flash stale-verdict"', 1)[1].split("</p>", 1)[0]
    assert f"Showing the verdict of state <code>{previous}…</code> verified at" in banner
    assert f"the current state <code>{new[:19]}…</code> is being verified" in banner
    assert f'data-status-url="{STATUS}"' in banner
    assert "verdict-refresh" in stale.text  # the poll's script
    # The page scheduled the computation after its answer (no warmer): now ready.
    assert client.get(STATUS).json() == {"fabric": FABRIC, "ready": True, "current_digest": new}

    current = client.get(url)
    assert "stale-verdict" not in current.text and "verdict-refresh" not in current.text
    assert new.startswith(shown_digest(current.text))


def test_a_verdict_warmed_by_hand_is_shown_current(
    site: ConsoleSite, auditor: tuple[TestClient, FastAPI], monkeypatch: pytest.MonkeyPatch
):
    client, app = auditor
    previous = shown_digest(client.get(f"/ui/fabrics/{FABRIC}/matrix").text)
    change(site)
    scheduled: list[str] = []
    monkeypatch.setattr("api.ui.pages.matrix._warm", lambda uow, fabric: scheduled.append(fabric))

    stale = client.get(f"/ui/fabrics/{FABRIC}/matrix")
    assert "stale-verdict" in stale.text and shown_digest(stale.text) == previous
    assert scheduled == [FABRIC]
    assert client.get(STATUS).json()["ready"] is False  # nothing computed it

    verdict_warmth.warm_verdict(app.state.uow, FABRIC)

    assert client.get(STATUS).json()["ready"] is True
    current = client.get(f"/ui/fabrics/{FABRIC}/matrix").text
    assert "stale-verdict" not in current and shown_digest(current) != previous


def test_a_stale_page_wakes_the_warmer(site: ConsoleSite):
    app = create_app(Settings(database_url=site.url, verdict_warm=True), engine=site.engine)
    with TestClient(app, follow_redirects=False) as client:
        client_sign_in(client, site.tokens["auditor"])
        warmer = app.state.verdict_warmer
        warmer.stop()  # the page must poke it; no sweep may run meanwhile
        client.get(f"/ui/fabrics/{FABRIC}/matrix")
        change(site)
        warmer._wake.clear()

        stale = client.get(f"/ui/fabrics/{FABRIC}/matrix")

        assert "stale-verdict" in stale.text
        assert warmer._wake.is_set()


@pytest.mark.parametrize("role", ["acme-viewer", "acme-admin", "billing"])
def test_tenant_roles_and_billing_are_refused_the_status(site: ConsoleSite, role: str):
    with TestClient(unwarmed_app(site), follow_redirects=False) as client:
        client_sign_in(client, site.tokens[role])
        answer = client.get(STATUS)
        unknown = client.get("/ui/fabrics/nope/matrix/status")
    assert answer.status_code == 403 and "digest" not in answer.text
    assert unknown.status_code in (403, 404) and "digest" not in unknown.text


def test_the_status_of_an_unknown_fabric_is_a_404(auditor: tuple[TestClient, FastAPI]):
    client, _app = auditor
    assert client.get("/ui/fabrics/nope/matrix/status").status_code == 404


def test_the_stale_page_refreshes_itself_when_the_current_verdict_is_ready(
    site: ConsoleSite, fresh_console, page_on, sign_in
):
    page: Page = page_on(fresh_console)
    sign_in(page, "auditor", site)
    page.goto(f"/ui/fabrics/{FABRIC}/matrix")
    previous = page.locator(".page-header code").inner_text()
    change(site)

    page.goto(f"/ui/fabrics/{FABRIC}/matrix")
    banner = page.locator(".stale-verdict")
    expect(banner).to_contain_text(f"Showing the verdict of state {previous}")
    expect(banner).to_contain_text("this page refreshes when it is ready")
    screenshot(page, "matrix-stale-verdict")

    # The poll (static verdict-refresh.js) reloads once the computation after the answer is done.
    expect(banner).to_have_count(0, timeout=30_000)
    expect(page.locator(".page-header code")).not_to_have_text(previous)
    expect(page.locator(".page-header p.muted")).to_contain_text("Verdict of state")
