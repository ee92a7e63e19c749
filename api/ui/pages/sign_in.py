"""Sign-in and sign-out: an API token in, the session cookie out (api/ui/session.py).

Not behind `console_authorize`: anyone may see the sign-in form. The form posts the token with
a double-submit nonce (login CSRF); sign-out posts the session's CSRF token.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from api.ui.deps import console_session, read_form
from api.ui.errors import ConsoleRoute, error_page
from api.ui.render import render
from api.ui.session import (
    CSRF_FIELD,
    SIGN_IN_COOKIE,
    SIGN_IN_MESSAGES,
    ConsoleSessions,
    SignInReason,
    SignInRequired,
    clear_session_cookie,
    csrf_matches,
    new_sign_in_nonce,
    set_session_cookie,
    set_sign_in_cookie,
)
from policies.authz import MACHINE_ROLES
from policies.errors import AuthenticationError

router = APIRouter(prefix="/ui", include_in_schema=False, route_class=ConsoleRoute)
HOME = "/ui"
# Where a sign-in may return to: a console path, never another origin ("//evil", "/\\evil")
# nor out of the console ("/ui/../v1"): no empty segment, none starting with a dot.
NEXT_PATH = re.compile(r"^/ui(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)*/?$")


def safe_next(candidate: str | None) -> str:
    """`candidate` if it is a console path, else the console's home."""
    if candidate and NEXT_PATH.fullmatch(candidate):
        return candidate
    return HOME


@router.get("/sign-in")
async def sign_in_form(
    request: Request,
    reason: Annotated[str | None, Query(max_length=40)] = None,
    next_path: Annotated[str | None, Query(alias="next", max_length=512)] = None,
) -> Response:
    """The sign-in form, with the message of the reason the visitor was sent here."""
    known = {r.value: r for r in SignInReason}
    message = SIGN_IN_MESSAGES[known[reason]] if reason in known else ""
    return _form(request, message, safe_next(next_path), status=200)


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    """Check the token like a bearer token; on success set the session cookie and go on."""
    form = await read_form(request)
    target = safe_next(form.get("next"))
    nonce = request.cookies.get(SIGN_IN_COOKIE, "")
    if not nonce or not csrf_matches(nonce, form.get(CSRF_FIELD)):
        return error_page(
            request, 403, "Forbidden", "the sign-in form expired: reload it and sign in again"
        )
    sessions: ConsoleSessions = request.app.state.console_sessions
    token = form.get("token", "").strip()
    try:
        principal = await run_in_threadpool(sessions.sign_in, token)
    except AuthenticationError as error:
        return _form(request, f"Not signed in: {error.detail}.", target, status=401)
    if principal.role in MACHINE_ROLES:
        message = (
            f"Not signed in: an {principal.role} token acts for a machine, not in the console."
        )
        return _form(request, message, target, status=403)
    response = RedirectResponse(target, status_code=303)
    set_session_cookie(response, request, token)
    response.delete_cookie(SIGN_IN_COOKIE, path="/ui")
    return response


@router.post("/sign-out")
async def sign_out(request: Request) -> Response:
    """Clear the session cookie (the session's CSRF token required) and show the sign-in form."""
    try:
        session = await console_session(request)
    except SignInRequired as ended:  # nothing left to sign out of
        ended.clear_cookie = True
        raise
    form = await read_form(request)
    if not csrf_matches(session.csrf_token, form.get(CSRF_FIELD)):
        detail = "the form's CSRF token is missing or wrong: reload the page and try again"
        return error_page(request, 403, "Forbidden", detail)
    query = f"reason={SignInReason.SIGNED_OUT.value}"
    response = RedirectResponse(f"/ui/sign-in?{query}", status_code=303)
    clear_session_cookie(response, request)
    return response


def _form(request: Request, message: str, target: str, *, status: int) -> Response:
    nonce = new_sign_in_nonce()
    context = {"message": message, "next": target, "sign_in_nonce": nonce}
    response = render(request, "sign_in.html", context, status=status)
    set_sign_in_cookie(response, request, nonce)
    return response
