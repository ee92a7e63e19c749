"""Fixtures of the evidence and audit log browser tests: a served site with proofs in it.

Issuing proofs changes state (a proof row, an audit entry), so these tests do not use the shared
`console` server: `evidence` is a demo site of their own with proofs of acme (full and tenant
views, on both fabrics) and of globex, issued before both fabrics moved on (research's nodes are
released afterwards), as proofs are read in practice: their snapshot is no longer the current
one, so the files they name are served from what issuing retained. It is served by uvicorn on
an address of this host that is NOT loopback when it has one (as `serve` is reached on a
management network): chromium then treats the page as an insecure context, where WebCrypto's
crypto.subtle does not exist at all.
Either way, `page` replaces crypto.subtle with a trap before any script runs: it reads as
undefined and records every access in `window.__subtleTouched`, which `subtle_touches` returns.

Import the fixtures into a test module: `from tests.ui.evidence_site import *` would hide them
from linters, so each module imports them by name.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from tenancy.schemas import ProofCreated
from tenancy.usecases import allocations, proofs
from tests.live_server import live_server
from tests.ui.browser import PageGuard
from tests.ui.console_site import ConsoleSite, console_site

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
TRAP_SUBTLE = """
(() => {
  window.__subtleTouched = [];
  const proto = Object.getPrototypeOf(window.crypto);
  Object.defineProperty(proto, "subtle", {
    configurable: true,
    get() { window.__subtleTouched.push(String(new Error().stack)); return undefined; },
  });
})();
"""


@dataclass(frozen=True)
class EvidenceSite:
    """A served site with proofs: its URL, the site, and the proofs by name."""

    url: str
    site: ConsoleSite
    proofs: dict[str, ProofCreated]

    @property
    def loopback(self) -> bool:
        """Whether the server could only be reached on loopback (a secure context then)."""
        return "://127." in self.url


def management_address() -> str:
    """A non-loopback IPv4 address of this host to serve on, else 127.0.0.1.

    A UDP socket "connected" to an outside address sends nothing but picks the source address
    the host would use: its address on the network it routes to. With a proxy configured in the
    environment, chromium could send requests for that address to the proxy: loopback then.
    """
    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return "127.0.0.1"
    for target in ("10.255.255.255", "192.0.2.1", "198.51.100.1"):
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((target, 9))
            address = str(s.getsockname()[0])
            if not address.startswith("127.") and address != "0.0.0.0":
                return address
    return "127.0.0.1"


def issue_proofs(site: ConsoleSite) -> dict[str, ProofCreated]:
    """acme's full proofs on both fabrics, acme's tenant view on ib-east, globex's full proof."""
    uow = site.uow()
    return {
        "acme-ib": proofs.issue(uow, tenant_name="acme", fabric_name="ib-east"),
        "acme-roce": proofs.issue(uow, tenant_name="acme", fabric_name="roce-west"),
        "acme-ib-tenant": proofs.issue(
            uow, tenant_name="acme", fabric_name="ib-east", view="tenant"
        ),
        "globex-ib": proofs.issue(uow, tenant_name="globex", fabric_name="ib-east"),
    }


def move_on(site: ConsoleSite) -> None:
    """Change both fabrics after the proofs: release every allocation of research's."""
    uow = site.uow()
    held = allocations.list_allocations(uow, tenant_name="research", limit=100, cursor=None)
    for allocation in held.data:
        allocations.release_allocation(uow, tenant_name="research", allocation_id=allocation.id)


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvidenceSite]:
    site = console_site(tmp_path_factory.mktemp("evidence"))
    issued = issue_proofs(site)
    move_on(site)
    try:
        with live_server(site.app(), host=management_address()) as url:
            yield EvidenceSite(url, site, issued)
    finally:
        site.engine.dispose()


@pytest.fixture
def guard(evidence: EvidenceSite) -> PageGuard:
    return PageGuard(evidence.url)


@pytest.fixture
def page(browser: Browser, evidence: EvidenceSite, guard: PageGuard) -> Iterator[Page]:
    context = browser.new_context(base_url=evidence.url, viewport={"width": 1360, "height": 900})
    context.add_init_script(TRAP_SUBTLE)
    opened = context.new_page()
    guard.attach(opened)
    yield opened
    context.close()


@pytest.fixture
def sign_in(evidence: EvidenceSite) -> Callable[[Page, str], None]:
    def sign_in_as(page: Page, role: str) -> None:
        if "/ui/sign-in" not in page.url:
            page.goto("/ui/sign-in")
        page.fill("#token", evidence.site.tokens[role])
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/ui/sign-in" not in url)

    return sign_in_as


def subtle_touches(page: Page) -> list[Any]:
    """The stacks of every read of crypto.subtle on the page since it loaded."""
    touched: list[Any] = page.evaluate("window.__subtleTouched")
    return touched


def steps_of(page: Page) -> dict[str, str]:
    """The check's steps shown: data-step -> data-state (pass, fail, skip, running)."""
    items = page.locator("#verify-steps li")
    return {
        items.nth(i).get_attribute("data-step") or "": items.nth(i).get_attribute("data-state")
        or ""
        for i in range(items.count())
    }
