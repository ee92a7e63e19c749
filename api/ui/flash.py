"""Flash messages: what an operator action did, shown once on the page it redirects to.

Post/Redirect/Get: the action's POST answers 303 with a short-lived cookie (HttpOnly,
SameSite=Strict, Path=/ui) holding the message and an HMAC of it keyed by the session's CSRF
token, so only this session's own actions can put text there; the next page rendered with
`render_with_flash` shows it and deletes the cookie. Templates autoescape it like any text.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from api.ui.render import SESSION_STATE_KEY, render
from api.ui.session import COOKIE_PATH, ConsoleSession, is_https

FLASH_COOKIE = "isofabric_flash"
MAX_AGE_SECONDS = 60
MAX_MESSAGE = 500


def _key(request: Request) -> bytes | None:
    session = getattr(request.state, SESSION_STATE_KEY, None)
    return session.csrf_token.encode() if isinstance(session, ConsoleSession) else None


def _seal(key: bytes, message: str) -> str:
    body = base64.urlsafe_b64encode(message.encode()).decode()
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


def redirect_with_flash(request: Request, url: str, message: str) -> Response:
    """303 to `url` (a console path), carrying `message` for the page it shows."""
    response = RedirectResponse(url, status_code=303)
    key = _key(request)
    if key is not None:
        response.set_cookie(
            FLASH_COOKIE,
            _seal(key, message[:MAX_MESSAGE]),
            max_age=MAX_AGE_SECONDS,
            path=COOKIE_PATH,
            httponly=True,
            samesite="strict",
            secure=is_https(request),
        )
    return response


def flash_of(request: Request) -> str | None:
    """The request's flash message, if its cookie is this session's; else None."""
    raw, key = request.cookies.get(FLASH_COOKIE, ""), _key(request)
    body, _, mac = raw.partition(".")
    if not raw or key is None:
        return None
    expected = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, mac):
        return None
    try:
        return base64.urlsafe_b64decode(body.encode()).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def render_with_flash(request: Request, template: str, context: dict[str, Any]) -> Response:
    """`render` with the flash message (if any) as `flash`, deleting its cookie."""
    message = flash_of(request)
    response = render(request, template, {**context, "flash": message})
    if FLASH_COOKIE in request.cookies:
        response.delete_cookie(
            FLASH_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict",
            secure=is_https(request),
        )  # fmt: skip
    return response
