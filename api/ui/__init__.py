"""The web console under /ui: server-rendered pages over the same use cases and policy as /v1.

`install_console(app)` mounts the static files (package data, no CDN), the page routers
(api/ui/pages/) and, last, the HTML 404 for other /ui paths. How it works is in
the module docstrings: session.py (cookie, CSRF), deps.py (authorization),
render.py (templates, nav, headers), errors.py (HTML errors).
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.auth import TokenAuthenticator
from api.mounting import serve_routes
from api.ui.pages import PAGE_ROUTERS, home
from api.ui.render import STATIC_DIR, STATIC_URL
from api.ui.session import ConsoleSessions
from tenancy.store.uow import UnitOfWork


def install_console(app: FastAPI) -> None:
    """Serve the console under /ui on `app` (whose `state.uow` is set)."""
    uow: UnitOfWork = app.state.uow
    authenticator = TokenAuthenticator(uow.settings.admin_token, uow)
    app.state.console_sessions = ConsoleSessions(authenticator)
    app.mount(STATIC_URL, StaticFiles(directory=STATIC_DIR), name="console-static")
    serve_routes(app, *PAGE_ROUTERS)
    serve_routes(app, home.fallback)  # last: only paths no page serves
