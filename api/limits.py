"""Request hardening: a body size cap for every request, and strict text/plain bodies."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from policies.errors import InputFormatError


class BodySizeLimit:
    """ASGI middleware: refuse bodies over `max_bytes` with 413 before the app buffers them."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a declared oversize body at once, and stop reading one that grows past it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _too_large(scope, send, self.max_bytes)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise HTTPException(413, f"request body exceeds {self.max_bytes} bytes")
            return message

        await self.app(scope, counting_receive, send)


async def _too_large(scope: Scope, send: Send, limit: int) -> None:
    from api.problems import problem_response

    response = problem_response(Request(scope), 413, detail=f"request body exceeds {limit} bytes")
    await response(scope, _no_receive, send)


async def _no_receive() -> dict[str, Any]:
    return {"type": "http.disconnect"}


def media_type(request: Request) -> str:
    """The request's Content-Type without parameters, lower-case ('' when absent)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def read_text_body(request: Request) -> str:
    """The body as UTF-8 text; InputFormatError (422) if it is not UTF-8 or holds a NUL byte."""
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputFormatError(f"the body is not UTF-8 text (byte {error.start})") from error
    if "\x00" in text:
        raise InputFormatError("the body contains a NUL byte")
    return text
