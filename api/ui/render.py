"""Rendering console pages: the Jinja2 environment, the base context and the response headers.

Every page extends templates/base.html and is rendered with `render`, which adds the session,
the navigation for the principal's role (each entry shown only if the authorization policy
allows its page: the nav and the server-side check are one rule) and the security headers.
The Content-Security-Policy allows only this origin and no inline script or style: the console
works with the network cable pulled, and JavaScript lives in static/ files.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from api.access_rules import decide
from api.ui.session import CSRF_FIELD, ConsoleSession
from policies.authz import GLOBAL_DOMAIN, Decision

PACKAGE_DIR = Path(__file__).parent
TEMPLATES_DIR = PACKAGE_DIR / "templates"
STATIC_DIR = PACKAGE_DIR / "static"
STATIC_URL = "/ui/static"
SESSION_STATE_KEY = "console_session"

# Same-origin only; 'wasm-unsafe-eval' would be the one addition a WebAssembly library needs.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",  # pages carry the CSRF token and the principal's data
}


@dataclass(frozen=True, slots=True)
class NavEntry:
    """A navigation link: shown when the policy allows GET on its route template."""

    key: str  # the `active` name a page passes to highlight it
    label: str
    template: str  # the route template the policy is asked about
    tenant_scoped: bool = False  # /ui/tenants/{tenant}: a tenant principal's own tenant


# Pages without a tenant in their path that a tenant principal opens about its own tenant (as
# api/deps.py SELF_SCOPED): the home page, which sends it on to its tenant's page; the evidence
# pages, which list and show only its tenant's proofs (as /v1/proofs). The policy decides them
# in the principal's tenant, for the nav as for the request (api/ui/deps.py).
SELF_SCOPED_PAGES = frozenset(
    {"/ui", "/ui/evidence", "/ui/evidence/verify", "/ui/evidence/proofs/{proof_id}"}
)
NAV = (
    NavEntry("fabrics", "Fabrics", "/ui/fabrics"),
    NavEntry("tenants", "Tenants", "/ui/tenants"),
    NavEntry("tenants", "My tenant", "/ui/tenants/{tenant}", tenant_scoped=True),
    NavEntry("evidence", "Evidence", "/ui/evidence"),
    NavEntry("audit-log", "Audit log", "/ui/audit-log"),
)


def nav_for(session: ConsoleSession) -> list[dict[str, str]]:
    """The navigation links the session's principal may follow, in order."""
    principal = session.principal
    links = []
    for entry in NAV:
        if entry.tenant_scoped and principal.tenant is None:
            continue
        own = entry.tenant_scoped or entry.template in SELF_SCOPED_PAGES
        domain = principal.tenant if own and principal.tenant else GLOBAL_DOMAIN
        decision = decide(
            f"principal:{principal.name}", principal.role, principal.tenant, domain,
            entry.template, "GET",
        )  # fmt: skip
        if decision is Decision.ALLOW:
            href = entry.template.replace("{tenant}", principal.tenant or "")
            links.append({"key": entry.key, "label": entry.label, "href": href})
    return links


@cache
def environment() -> Environment:
    """The console's Jinja2 environment: autoescaped, undefined names are errors."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["static"] = static_url
    env.globals["csrf_field"] = CSRF_FIELD
    return env


@cache
def static_url(path: str) -> str:
    """The URL of a file under static/, with its content's digest as a cache-buster."""
    digest = hashlib.sha256((STATIC_DIR / path).read_bytes()).hexdigest()[:12]
    return f"{STATIC_URL}/{path}?v={digest}"


def render(
    request: Request, template: str, context: dict[str, Any] | None = None, *, status: int = 200
) -> HTMLResponse:
    """Render `template` with the base context (session, nav, CSRF token) and the headers.

    The session is the one `console_principal` resolved for this request; pages rendered
    without one (sign-in, an error before authentication) get no nav.
    """
    session = getattr(request.state, SESSION_STATE_KEY, None)
    base: dict[str, Any] = {
        "request": request,
        "session": session,
        "principal": session.principal if session else None,
        "nav": nav_for(session) if session else [],
        "csrf_token": session.csrf_token if session else "",
        "active": "",
    }
    html = environment().get_template(template).render({**base, **(context or {})})
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
