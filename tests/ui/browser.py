"""Browser helpers for the console tests: Debian's chromium, the page guard, screenshots.

Playwright for Python drives the chromium of the system (`apt-get install chromium`); no
browser is ever downloaded. The guard turns every console error, page error, failed request and
request to another origin into a test failure: every browser test also checks that the console
works with the network cable pulled (issue 15, "no request leaves the service's origin").
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import ConsoleMessage, Page, Request, Route

# The real binary: /usr/bin/chromium is Debian's wrapper script around it.
CHROMIUM_CANDIDATES = (
    "/usr/lib/chromium/chromium",
    "/usr/lib/chromium-browser/chromium-browser",
)
ARTIFACTS_ENV = "ISOFABRIC_TEST_ARTIFACTS"
DEFAULT_ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def chromium_path() -> str | None:
    """The chromium binary: $ISOFABRIC_CHROMIUM, else Debian's, else None."""
    configured = os.environ.get("ISOFABRIC_CHROMIUM")
    if configured:
        return configured
    for candidate in CHROMIUM_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium")


def require_chromium() -> str:
    """The chromium binary; without one a test fails in CI (CI=true) and is skipped elsewhere."""
    path = chromium_path()
    if path is not None:
        return path
    message = "chromium is not installed (apt-get install chromium): browser tests need it"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def launch_args() -> list[str]:
    """Chromium's flags: its sandbox cannot start as root (containers, CI)."""
    return ["--no-sandbox"] if os.geteuid() == 0 else []


@dataclass
class PageGuard:
    """Records what must not happen on a console page; `check` fails the test if it did."""

    origin: str
    problems: list[str] = field(default_factory=list)
    tolerated: list[re.Pattern[str]] = field(default_factory=list)

    def tolerate(self, pattern: str) -> None:
        """Accept console messages matching `pattern` (a test that expects a 403/404 page)."""
        self.tolerated.append(re.compile(pattern))

    def attach(self, page: Page) -> None:
        """Watch `page`: console errors, page errors, failed requests, other origins."""
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("requestfailed", self._failed)
        page.route("**/*", self._route)

    def check(self) -> None:
        """Fail the test with everything recorded that is not tolerated."""
        problems = [p for p in self.problems if not any(t.search(p) for t in self.tolerated)]
        assert not problems, "the console page misbehaved:\n" + "\n".join(problems)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"console {message.type}: {message.text} ({message.location})")

    def _failed(self, request: Request) -> None:
        if not _same_origin(request.url, self.origin):
            return  # already recorded by _route, which aborted it
        if request.failure == "net::ERR_ABORTED":
            return  # cancelled by the next navigation (a favicon still loading), not an error
        self.problems.append(f"request failed: {request.method} {request.url} {request.failure}")

    def _route(self, route: Route) -> None:
        url = route.request.url
        if _same_origin(url, self.origin) or url.startswith(("data:", "blob:")):
            route.continue_()
            return
        self.problems.append(f"request left the origin: {route.request.method} {url}")
        route.abort("blockedbyclient")


def _same_origin(url: str, origin: str) -> bool:
    parts, expected = urlsplit(url), urlsplit(origin)
    return (parts.scheme, parts.netloc) == (expected.scheme, expected.netloc)


def artifacts_dir() -> Path:
    """Where screenshots go: $ISOFABRIC_TEST_ARTIFACTS/console, or test-artifacts/console."""
    root = Path(os.environ.get(ARTIFACTS_ENV) or DEFAULT_ARTIFACTS)
    directory = root / "console"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page PNG of `page` as <artifacts>/console/<name>.png; its path."""
    path = artifacts_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
