"""Idempotency-Key on every POST under /v1: a retry gets the first response and changes nothing.

A client names a request with ``Idempotency-Key: <1 to 255 printable ASCII characters>`` (else
422 validation-error); the key is scoped to the principal, the method and the path. Then:

- same key, same request: the recorded response again (status, body, Content-Type, Location,
  plus ``Idempotent-Replayed: true``); nothing runs, nothing is written;
- same key, another body or query: 422 idempotency-key-reused, nothing done;
- same key while the first request has no recorded response: 409 idempotency-in-progress;
- the first response held a secret (POST /v1/tokens): 409 secret-not-replayed naming the
  token id; the secret is never stored;
- a dry run (``?dry_run=true``) is served as if it had no key: never recorded nor replayed.

The storage, the reservation that commits with the change, and which responses are recorded are
tenancy/record/idempotency.py's. This middleware runs inside authentication (it needs the principal)
and the body size limit (it reads the body), looks the key up before the request runs, and
records the response before sending it, so a client holding a response finds it recorded.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import PRINCIPAL_SCOPE_KEY, PROTECTED_PREFIX
from api.dry_run_flag import dry_run_flag
from api.heavy_processes import HeavyProcesses
from api.limits import media_type
from api.problems import domain_problem, problem_response
from policies.errors import InvalidValueError, IsofabricError, SecretNotReplayedError
from tenancy.record import idempotency
from tenancy.record.idempotency import KeyedRequest, Outcome
from tenancy.store.uow import Principal, UnitOfWork
from tenancy.usecases import tokens

log = logging.getLogger("isofabric.api")
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
KEYED_REQUEST_SCOPE_KEY = "isofabric.idempotency"
KEY = re.compile(r"^[\x20-\x7e]{1,255}$")
# The record's path column; no resource's path is this long, so such a request fails anyway.
MAX_PATH = 512
REPLAYED_HEADERS = ("content-type", "location")
REPLAYED_MARK = "Idempotent-Replayed"
# A body this small is fingerprinted on the event loop: well under a millisecond.
FINGERPRINT_HERE_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class SecretMember:
    """A response member that is a secret, and the resource whose ``id`` the 409 names."""

    member: str
    resource: str


# Responses that hold a secret, by path: the member is dropped before recording.
SECRET_RESPONSES = {"/v1/tokens": SecretMember("token", "token")}


def principal_key(principal: Principal) -> str:
    """Whose key it is: ``token:<id>`` for a token (names can repeat), else the principal."""
    token_id = tokens.token_id_of(principal)
    return f"token:{token_id}" if token_id is not None else principal.name


class IdempotencyKeys:
    """ASGI middleware: replay, refuse or run and record each POST that has an Idempotency-Key."""

    def __init__(
        self, app: ASGIApp, uow: UnitOfWork, processes: HeavyProcesses | None = None
    ) -> None:
        self.app = app
        self.uow = uow  # the app's own: it carries no reservation
        self.processes = processes  # where a large body's fingerprint is computed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer from the record when there is one; else run the request with its reservation."""
        key = _idempotency_key(scope)
        if key is None:
            await self.app(scope, receive, send)
            return
        prepared = await self._prepare(Request(scope), key, receive)
        if isinstance(prepared, Response):
            await prepared(scope, receive, send)
            return
        keyed, body = prepared
        scope[KEYED_REQUEST_SCOPE_KEY] = keyed  # the unit of work picks it up (api/deps.py)
        captured = _Captured()
        await self.app(scope, _replaying(body, receive), captured.send)
        await self._record(keyed, captured)
        await captured.forward(send)

    async def _prepare(
        self, request: Request, key: str, receive: Receive
    ) -> tuple[KeyedRequest, bytes] | Response:
        """The keyed request and its body, or the response that answers it without running it."""
        try:
            _check_key(key)
            body = await _read_body(receive)
            keyed = _keyed_request(request, key, await self._fingerprint(request, body))
            outcome = await run_in_threadpool(idempotency.find, self.uow, keyed)
            return (keyed, body) if outcome is None else _replay(keyed, outcome)
        except IsofabricError as error:
            return domain_problem(request, error)
        except StarletteHTTPException as error:  # 413 from the body size limit
            return problem_response(request, error.status_code, detail=str(error.detail))

    async def _fingerprint(self, request: Request, body: bytes) -> str:
        """`idempotency.fingerprint` of the request, computed off the event loop if large.

        A JSON body counts by its canonical form: for a 32 MiB document, parsing and
        canonicalizing take seconds, in one long C call and then in Python, which in this
        process would hold the GIL (api/heavy_processes.py): a heavy worker computes it.
        """
        media, query = media_type(request), request.query_params.multi_items()
        if len(body) <= FINGERPRINT_HERE_BYTES or self.processes is None:
            return idempotency.fingerprint(media, query, body)
        return await self.processes.compute(idempotency.fingerprint, media, query, body)

    async def _record(self, keyed: KeyedRequest, captured: _Captured) -> None:
        if captured.start is None:
            return
        outcome = _recorded(keyed.path, captured.status, captured.headers, bytes(captured.body))
        try:
            await run_in_threadpool(idempotency.complete, self.uow, keyed, outcome)
        except Exception:
            # The client must get its answer whatever happens to the record; a reservation that
            # committed stays pending, so a retry gets 409 rather than a second change.
            log.exception("could not record the response to %s %s", keyed.method, keyed.path)


def _idempotency_key(scope: Scope) -> str | None:
    """The Idempotency-Key of a POST this middleware handles; None for any other request."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    path: str = scope["path"]
    if not path.startswith(PROTECTED_PREFIX + "/") or len(path) > MAX_PATH:
        return None
    if not isinstance(scope.get(PRINCIPAL_SCOPE_KEY), Principal):
        return None
    if dry_run_flag(scope.get("query_string", b"")) is not False:
        return None  # a dry run writes nothing, nor does a refused flag: nothing to record
    return Headers(scope=scope).get(IDEMPOTENCY_KEY_HEADER)


def _check_key(key: str) -> None:
    if not KEY.fullmatch(key):
        raise InvalidValueError(
            f"{IDEMPOTENCY_KEY_HEADER} must be 1 to 255 printable ASCII characters",
            header=IDEMPOTENCY_KEY_HEADER,
        )


def _keyed_request(request: Request, key: str, fingerprint: str) -> KeyedRequest:
    principal = request.scope[PRINCIPAL_SCOPE_KEY]
    return KeyedRequest(
        principal=principal_key(principal),
        method=request.method,
        path=request.scope["path"],  # as `_idempotency_key` measured it
        key=key,
        fingerprint=fingerprint,
    )


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away; the app will see that too
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A receive channel that hands the app the body already read, then the client's events."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _replay(keyed: KeyedRequest, outcome: Outcome) -> Response:
    if outcome.secret_withheld:
        raise _secret_not_replayed(keyed, outcome)
    headers = {**outcome.headers, REPLAYED_MARK: "true"}
    return Response(outcome.body, status_code=outcome.status, headers=headers)


def _secret_not_replayed(keyed: KeyedRequest, outcome: Outcome) -> SecretNotReplayedError:
    secret = SECRET_RESPONSES.get(keyed.path, SecretMember("", "resource"))
    document = _json_object(outcome.body) or {}
    resource_id = document.get("id")
    return SecretNotReplayedError(
        f"the first request with {IDEMPOTENCY_KEY_HEADER} '{keyed.key}' created "
        f"{secret.resource} '{resource_id}'; its secret is shown only once and is not kept, so "
        f"the response is not replayed: use the secret received then, or revoke the "
        f"{secret.resource} and create another",
        **{f"{secret.resource}_id": resource_id},
    )


def _recorded(path: str, status: int, headers: Headers, body: bytes) -> Outcome:
    """The response as it may be stored: replayed headers only, and without any secret."""
    kept = {name: headers[name] for name in REPLAYED_HEADERS if name in headers}
    secret = SECRET_RESPONSES.get(path)
    document = _json_object(body) if secret is not None else None
    if secret is None or document is None or secret.member not in document:
        return Outcome(status, body, kept)
    del document[secret.member]
    return Outcome(status, json.dumps(document).encode(), kept, secret_withheld=True)


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


class _Captured:
    """The app's response, held back until it is recorded."""

    def __init__(self) -> None:
        self.start: Message | None = None
        self.body = bytearray()

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.start = message
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")

    @property
    def status(self) -> int:
        return int(self.start["status"]) if self.start is not None else 500

    @property
    def headers(self) -> Headers:
        return Headers(raw=list(self.start.get("headers", [])) if self.start else [])

    async def forward(self, send: Send) -> None:
        if self.start is None:
            return
        await send(self.start)
        await send({"type": "http.response.body", "body": bytes(self.body), "more_body": False})
