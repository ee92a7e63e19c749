"""Console errors answer HTML: an error page, or a redirect to sign in; never problem+json.

Console routes use `ConsoleRoute`, which wraps each handler (its dependencies included, they
run inside the handler FastAPI builds) so that a domain error becomes the error page with the
status api/problems.py's table gives it, and `SignInRequired` a 303 to the sign-in page. The
API's problem handlers stay as they are for /v1.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import urlencode

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from api.problems import problem_type_for
from api.request_id import request_id_of
from api.ui.render import render
from api.ui.session import SignInRequired, clear_session_cookie
from policies.errors import IsofabricError

log = logging.getLogger("isofabric.console")
SIGN_IN_URL = "/ui/sign-in"


def error_page(request: Request, status: int, title: str, detail: str) -> Response:
    """The console's error page: what went wrong, and the request id to report it with."""
    context = {"status": status, "title": title, "detail": detail}
    context["request_id"] = request_id_of(request.scope) or ""
    return render(request, "error.html", context, status=status)


def sign_in_redirect(request: Request, error: SignInRequired) -> Response:
    """303 to the sign-in page with the reason and the page to come back to."""
    query = urlencode({"reason": error.reason.value, "next": request.url.path})
    response = RedirectResponse(f"{SIGN_IN_URL}?{query}", status_code=303)
    if error.clear_cookie:
        clear_session_cookie(response, request)
    return response


class ConsoleRoute(APIRoute):
    """An APIRoute whose errors are console pages (see the module docstring).

    A page served on GET answers HEAD too (RFC 9110 9.3.2: a server that serves GET serves
    HEAD); the bare APIRoute answered it 405 as problem+json. Authorization decides HEAD as
    GET (api/ui/deps.py).
    """

    def __init__(
        self, path: str, endpoint: Callable[..., Any], *, methods: Any = None, **kwargs: Any
    ) -> None:
        if methods is not None and "GET" in {m.upper() for m in methods}:
            methods = {*methods, "HEAD"}
        super().__init__(path, endpoint, methods=methods, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The route's handler, answering errors as HTML."""
        handler = super().get_route_handler()

        async def console_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInRequired as error:
                return sign_in_redirect(request, error)
            except IsofabricError as error:
                kind = problem_type_for(error)
                if kind.status >= 500:
                    log.exception("console error on %s %s", request.method, request.url.path)
                return error_page(request, kind.status, kind.title, error.detail)
            except RequestValidationError as error:
                detail = "; ".join(str(e.get("msg", "invalid")) for e in error.errors()[:3])
                return error_page(request, 400, "Bad request", detail)
            except Exception:  # our bug: logged with its trace, a page without it
                log.exception("unhandled console error on %s %s", request.method, request.url.path)
                detail = "the server failed to handle the request; nothing was changed"
                return error_page(request, 500, "Internal server error", detail)

        return console_handler
