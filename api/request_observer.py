"""The outermost middleware: time every request, count it in /metrics and log its line.

It sees every answer, 401s and 413s from the middleware inside it included; a request whose
handler raised is a 500 (the server's error middleware, outside it, answers). Routes are
labelled by their template (``/v1/tenants/{tenant}``), never the raw path, which would give a
time series per tenant; a path no route matches is ``unmatched``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Protocol

from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import PRINCIPAL_SCOPE_KEY
from api.dry_run_flag import dry_run_flag
from api.idempotency import REPLAYED_MARK
from api.problem_types import PROBLEM_TYPES
from api.problems import PROBLEM_MEDIA_TYPE, leaf_routes
from api.request_id import request_id_of
from api.request_log import RequestFields, log_request
from policies.errors import IsolationViolationError
from tenancy.store.uow import Principal

UNMATCHED = "unmatched"
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ISOLATION_VIOLATION = PROBLEM_TYPES[IsolationViolationError].uri
# api/problems.py writes `type` first: the head of the body names it.
_PROBLEM_TYPE = re.compile(rb'"type"\s*:\s*"([^"]*)"')
_PROBLEM_HEAD_BYTES = 1024
_REPLAYED = REPLAYED_MARK.lower().encode()


@dataclass(frozen=True, slots=True)
class Observed:
    """One answered request, as metrics count it."""

    method: str
    route: str
    status: int
    seconds: float
    # Mutating /v1 routes: committed, dry_run, replayed, refused_isolation, refused or failed.
    outcome: str | None


class RequestSink(Protocol):
    """Who counts requests (api/metrics.py `Metrics`)."""

    def observe_request(self, observed: Observed) -> None:
        """Count one answered request."""


class ObserveRequests:
    """ASGI middleware: count, time and log every HTTP request."""

    def __init__(self, app: ASGIApp, sink: RequestSink) -> None:
        self.app = app
        self.sink = sink

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; once answered (or failed), count and log it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        answer = _Answer()

        async def observing_send(message: Message) -> None:
            answer.see(message)
            await send(message)

        try:
            await self.app(scope, receive, observing_send)
        finally:
            self._record(scope, answer, time.perf_counter() - start)

    def _record(self, scope: Scope, answer: _Answer, seconds: float) -> None:
        method, route = scope["method"], route_template(scope)
        outcome = mutation_outcome(scope, route, answer)
        self.sink.observe_request(Observed(method, route, answer.status, seconds, outcome))
        principal = scope.get(PRINCIPAL_SCOPE_KEY)
        log_request(
            RequestFields(
                method=method,
                route=route,
                status=answer.status,
                duration_ms=round(seconds * 1000, 3),
                principal=principal.name if isinstance(principal, Principal) else None,
                request_id=request_id_of(scope),
            )
        )


class _Answer:
    """What the response said: its status (500 until it starts), a replay, a problem's type."""

    def __init__(self) -> None:
        self.status = 500
        self.replayed = False
        self._problem = False
        self._head = b""

    def see(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            headers = dict(message.get("headers") or [])
            media = headers.get(b"content-type", b"").split(b";")[0].strip()
            self._problem = media == PROBLEM_MEDIA_TYPE.encode()
            self.replayed = headers.get(_REPLAYED) == b"true"
        elif self._problem and len(self._head) < _PROBLEM_HEAD_BYTES:
            self._head += message.get("body", b"")[:_PROBLEM_HEAD_BYTES]

    def problem_type(self) -> str | None:
        found = _PROBLEM_TYPE.search(self._head)
        return found.group(1).decode() if found else None


def mutation_outcome(scope: Scope, route: str, answer: _Answer) -> str | None:
    """The outcome of a mutating /v1 request, None for any other request.

    committed (2xx), dry_run (a 2xx ``?dry_run=true``), replayed (the first response to an
    Idempotency-Key again: nothing ran), refused_isolation (409 isolation-violation: the change
    would break isolation), refused (any other 4xx) or failed (5xx).
    """
    if scope["method"] not in MUTATING or not route.startswith("/v1"):
        return None
    if answer.replayed:
        return "replayed"
    if answer.status >= 500:
        return "failed"
    if answer.status >= 400:
        isolation = answer.problem_type() == ISOLATION_VIOLATION
        return "refused_isolation" if isolation else "refused"
    return "dry_run" if _dry_run(scope) else "committed"


def _dry_run(scope: Scope) -> bool:
    return dry_run_flag(scope.get("query_string", b"")) is True


def route_template(scope: Scope) -> str:
    """The template of the route that answered, or would have (a 401 comes before routing).

    ``unmatched`` when no route matches the path.
    """
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str):
        return path
    app = scope.get("app")
    router = getattr(app, "router", None)
    for route in leaf_routes(getattr(router, "routes", ())):
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            return str(route.path)
    return UNMATCHED
