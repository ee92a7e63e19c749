"""Fixtures of the console tests: a demo site, a live server, chromium, guarded pages.

- `site` (function): a fresh demo database with a token per role (tests/ui/console_site.py),
  for TestClient tests that change state or move the clock.
- `console` (session): one real uvicorn server on its own demo site, shared by the browser
  tests of a worker; treat its state as read-only (change state on a `site` of your own).
- `browser` (module): Debian's chromium, headless. `page` (function): a chromium page on
  `console`, guarded (tests/ui/browser.py): any console error, failed request or request to
  another origin fails the test. `guard.tolerate(regex)` accepts an expected console message
  (a test that opens a 403 or 404 page).
- `sign_in(page, role)`: signs in through the form as a role of console_site.ROLES (on the
  sign-in page already, it keeps the page's `next`; else it lands on the role's home).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from tests.live_server import live_server
from tests.ui.browser import PageGuard, launch_args, require_chromium
from tests.ui.console_site import ConsoleSite, console_site


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After a passing browser test, fail it if its page guard recorded anything."""
    result = yield
    guard = getattr(item, "funcargs", {}).get("guard")
    if isinstance(guard, PageGuard):
        guard.check()
    return result


@dataclass(frozen=True)
class LiveConsole:
    """A served console: its base URL and its site (database, tokens)."""

    url: str
    site: ConsoleSite


@pytest.fixture
def site(tmp_path: Path) -> Iterator[ConsoleSite]:
    made = console_site(tmp_path)
    yield made
    made.engine.dispose()


@pytest.fixture(scope="session")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveConsole]:
    made = console_site(tmp_path_factory.mktemp("console"))
    try:
        with live_server(made.app()) as url:
            yield LiveConsole(url, made)
    finally:
        made.engine.dispose()


# Module scope, not session: a started Playwright keeps an asyncio loop running in this
# thread, and `asyncio.run` in any later test of the worker would fail.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    require_chromium()
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    launched = playwright.chromium.launch(
        executable_path=require_chromium(), headless=True, args=launch_args()
    )
    yield launched
    launched.close()


@pytest.fixture
def guard(console: LiveConsole) -> PageGuard:
    return PageGuard(console.url)


@pytest.fixture
def page(browser: Browser, console: LiveConsole, guard: PageGuard) -> Iterator[Page]:
    context = browser.new_context(base_url=console.url, viewport={"width": 1360, "height": 900})
    opened = context.new_page()
    guard.attach(opened)
    yield opened
    context.close()


@pytest.fixture
def sign_in(console: LiveConsole) -> Callable[[Page, str], None]:
    def sign_in_as(page: Page, role: str) -> None:
        if "/ui/sign-in" not in page.url:  # else keep its `next`: back where it was sent from
            page.goto("/ui/sign-in")
        page.fill("#token", console.site.tokens[role])
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/ui/sign-in" not in url)

    return sign_in_as
