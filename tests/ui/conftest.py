"""Fixtures of the console tests: a demo site, a live server, chromium, guarded pages.

- `site` (function): a fresh demo database with a token per role (tests/ui/console_site.py),
  for TestClient tests that change state or move the clock.
- `console` (session): one real uvicorn server on its own demo site, shared by the browser
  tests of a worker; treat its state as read-only (change state on a `site` of your own).
- `browser` (module): Debian's chromium, headless. `page` (function): a chromium page on
  `console`, guarded (tests/ui/browser.py): any console error, failed request or request to
  another origin fails the test. `guard.tolerate(regex)` accepts an expected console message
  (a test that opens a 403 or 404 page).
- `fresh_console` (function): a live server of its own on the test's `site`, for browser tests
  that change state; `page_on(fresh_console)` opens a guarded page on it.
- `sign_in(page, role, site=None)`: signs in through the form as a role of console_site.ROLES
  (tokens of `site`, default the shared console's; on the sign-in page already, it keeps the
  page's `next`; else it lands on the role's home).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from tests.live_server import live_server
from tests.ui.browser import PageGuard, launch_args, require_chromium
from tests.ui.console_site import ConsoleSite, console_site


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After a passing browser test, fail it if its page guard recorded anything."""
    result = yield
    funcargs = getattr(item, "funcargs", {})
    guards = [funcargs.get("guard"), *funcargs.get("extra_guards", [])]
    for guard in guards:
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


def guarded_page(browser: Browser, url: str, guard: PageGuard) -> tuple[BrowserContext, Page]:
    """A new browser context on `url` (its own cookies) and a page watched by `guard`."""
    context = browser.new_context(base_url=url, viewport={"width": 1360, "height": 900})
    opened = context.new_page()
    guard.attach(opened)
    return context, opened


@pytest.fixture
def page(browser: Browser, console: LiveConsole, guard: PageGuard) -> Iterator[Page]:
    context, opened = guarded_page(browser, console.url, guard)
    yield opened
    context.close()


@pytest.fixture
def fresh_console(site: ConsoleSite) -> Iterator[LiveConsole]:
    """A live server of its own on the test's `site`: for browser tests that change state."""
    with live_server(site.app()) as url:
        yield LiveConsole(url, site)


@pytest.fixture
def extra_guards() -> list[PageGuard]:
    return []


@pytest.fixture
def page_on(browser: Browser, extra_guards: list[PageGuard]) -> Iterator[Callable[..., Page]]:
    """`page_on(live)`: a guarded page on another served console (e.g. `fresh_console`)."""
    contexts: list[BrowserContext] = []

    def open_page(live: LiveConsole) -> Page:
        guard = PageGuard(live.url)
        extra_guards.append(guard)
        context, opened = guarded_page(browser, live.url, guard)
        contexts.append(context)
        return opened

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture
def sign_in(console: LiveConsole) -> Callable[..., None]:
    def sign_in_as(page: Page, role: str, site: ConsoleSite | None = None) -> None:
        if "/ui/sign-in" not in page.url:  # else keep its `next`: back where it was sent from
            page.goto("/ui/sign-in")
        page.fill("#token", (site or console.site).tokens[role])
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/ui/sign-in" not in url)

    return sign_in_as
