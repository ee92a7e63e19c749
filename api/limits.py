"""Request hardening: a body size cap, strict text/plain bodies, and a cap on heavy requests."""

from __future__ import annotations

import gc
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from policies.errors import InputFormatError, TooManyRequestsError

# What a 429 asks the client to wait: about the time a heavy request on a large fabric takes.
HEAVY_RETRY_AFTER_SECONDS = 5


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
    from api.ufm.wire import is_facade_path, too_large

    if is_facade_path(scope["path"]):  # UFM's clients read UFM-shaped errors (api/ufm/wire.py)
        response = too_large(limit)
    else:
        detail = f"request body exceeds {limit} bytes"
        response = problem_response(Request(scope), 413, detail=detail)
    await response(scope, _no_receive, send)


async def _no_receive() -> dict[str, Any]:
    return {"type": "http.disconnect"}


def media_type(request: Request) -> str:
    """The request's Content-Type without parameters, lower-case ('' when absent)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def raw_body(request: Request) -> bytes:
    """The request body, read on the event loop (it arrives asynchronously).

    Routes that read their body themselves (topology, config audits, observations) take it
    through this dependency, and hand the bytes to a worker process (api/heavy_processes.py):
    the decoding, parsing and verification of a large document never hold this process.
    """
    return await request.body()


RawBody = Annotated[bytes, Depends(raw_body)]


def body_at_most(max_bytes: int) -> Callable[[Request], Awaitable[bytes]]:
    """`raw_body` for a route whose documents are small: over `max_bytes` is a 413 at once.

    The service-wide cap (`BodySizeLimit`, 64 MiB by default) is sized for topologies; a small
    document's parser (PyYAML: about 150 KB/s) would hold a worker thread for minutes on that.
    """

    async def raw_body_at_most(request: Request) -> bytes:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise HTTPException(413, f"request body exceeds {max_bytes} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_bytes:
                raise HTTPException(413, f"request body exceeds {max_bytes} bytes")
        return bytes(body)

    return raw_body_at_most


def decode_text(raw: bytes) -> str:
    """`raw` as UTF-8 text; InputFormatError (422) if it is not UTF-8 or holds a NUL byte."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputFormatError(f"the body is not UTF-8 text (byte {error.start})") from error
    if "\x00" in text:
        raise InputFormatError("the body contains a NUL byte")
    return text


class CollectorPause:
    """Defer the cyclic garbage collector while any heavy request runs, process-wide.

    A heavy request on a 100k-port fabric holds millions of live objects; each full collection
    over them holds the GIL for 100-250 ms, which stops every thread, the event loop included
    (measured: seven such pauses in one import). Reference counting still frees nearly all of
    the request's garbage at once; the few cycles wait until the last heavy request finishes,
    when the collector is enabled again (unless something else had disabled it).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._was_enabled = False

    @contextmanager
    def held(self) -> Iterator[None]:
        """No automatic collection until the block (and every other holder's) has exited."""
        with self._lock:
            if self._holders == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._was_enabled:
                    gc.enable()


COLLECTOR_PAUSE = CollectorPause()


class HeavyWorkLimit:
    """At most `limit` heavy requests in flight per principal, in this process.

    Heavy requests (topology imports, config audits, observations, isolation proofs, policy
    changes) parse or verify a whole fabric and hold a worker process (api/heavy_processes.py)
    for seconds; without a cap one caller, even a read-only auditor, could take every worker.
    Slots are counted per principal name; a request over the cap is refused at once with 429
    and Retry-After rather than queued.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._in_flight: Counter[str] = Counter()
        self._lock = threading.Lock()  # slots are taken on the loop; the lock costs nothing

    @contextmanager
    def slot(self, principal: str) -> Iterator[None]:
        """Hold one of `principal`'s slots for the block.

        Raises:
            TooManyRequestsError: `principal` already holds `limit` slots.
        """
        with self._lock:
            if self._in_flight[principal] >= self.limit:
                raise TooManyRequestsError(
                    f"'{principal}' already has {self.limit} heavy request(s) in flight (at most "
                    f"{self.limit}); retry when one has finished",
                    retry_after=HEAVY_RETRY_AFTER_SECONDS,
                    limit=self.limit,
                )
            self._in_flight[principal] += 1
        try:
            with COLLECTOR_PAUSE.held():
                yield
        finally:
            with self._lock:
                self._in_flight[principal] -= 1
                if not self._in_flight[principal]:
                    del self._in_flight[principal]
