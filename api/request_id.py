"""X-Request-ID: every response carries the id of its request, as the audit log records it.

A client's own id is kept when it is 1 to 64 characters of ``[A-Za-z0-9._-]`` (it goes into audit
entries and logs); anything else, or no header, gets a new UUID4. The id is decided once, by the
outermost middleware, and stored in the ASGI scope for the unit of work (api/deps.py) and for the
500 handler, whose response bypasses the middleware (api/problems.py).
"""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUEST_ID_HEADER = "X-Request-ID"
REQUEST_ID_SCOPE_KEY = "isofabric.request_id"
REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def choose_request_id(supplied: str | None) -> str:
    """The client's request id when it is well-formed, else a new UUID4."""
    if supplied is not None and REQUEST_ID.fullmatch(supplied):
        return supplied
    return str(uuid.uuid4())


def request_id_of(scope: Scope) -> str | None:
    """The id `RequestId` gave the request, or None outside it."""
    request_id = scope.get(REQUEST_ID_SCOPE_KEY)
    return request_id if isinstance(request_id, str) else None


class RequestId:
    """ASGI middleware: decide the request's id and echo it in the response's X-Request-ID."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Record the id in the scope and set the header on the response (replacing any)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = choose_request_id(Headers(scope=scope).get(REQUEST_ID_HEADER))
        scope[REQUEST_ID_SCOPE_KEY] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        await self.app(scope, receive, send_with_id)
