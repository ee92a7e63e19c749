"""The command line's REST client: connection options, requests, problems turned into exit codes.

Every client command takes ``--url`` (or ``ISOFABRIC_URL``) and ``--token`` (or
``ISOFABRIC_TOKEN``); the commands that also work on the local database (`token`, `proof issue`,
`verify`, `render`) go over REST only when a URL is given (docs/operators/command-line.md).

HTTP library: httpx2, a runtime dependency. Plain ``httpx`` would not make starlette's TestClient
warn as long as httpx2 is installed too (starlette/testclient.py imports httpx2 first and warns
only when it falls back to httpx), but it would be a second HTTP stack beside the one the tests
already use, and TestClient (an ``httpx2.Client``) could not stand in for it. httpx2 keeps
httpx's API (Client, stream, Timeout, TransportError) and gives streaming bodies with progress,
which the stdlib's urllib (agent/client.py) does not without hand-written chunking.

A failed request is one line on stderr, ``error: <title>: <detail>``, and an exit status keyed
by the problem's ``type`` (api/problems.py), else by its HTTP status (`exit_status`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import httpx2
import typer

# Exit statuses of client commands (docs/operators/command-line.md); 0, 1 and 2 as for all.
DONE, CHECK_FAILED, TROUBLE = 0, 1, 2
NOT_FOUND, REFUSED, DENIED, UNAVAILABLE = 3, 4, 5, 6
# By problem type slug (api/problems.py PROBLEM_TYPES), the most specific answer.
EXIT_BY_TYPE = {
    "not-found": NOT_FOUND,
    "not-retained": NOT_FOUND,
    "isolation-violation": REFUSED,
    "pool-exhausted": REFUSED,
    "port-moved": REFUSED,
    "conflict": REFUSED,
    "idempotency-in-progress": REFUSED,
    "idempotency-key-reused": REFUSED,
    "secret-not-replayed": REFUSED,
    "patch-refused": REFUSED,
    "disruptive-change": REFUSED,
    "unauthorized": DENIED,
    "forbidden": DENIED,
    "too-many-requests": UNAVAILABLE,
    "key-unavailable": UNAVAILABLE,
    "database-unavailable": UNAVAILABLE,
    "not-ready": UNAVAILABLE,
    "artifact-hazard": UNAVAILABLE,
    "internal-error": UNAVAILABLE,
}
# Else by status: a problem of type about:blank (unknown route, 405) or a proxy's own page.
EXIT_BY_STATUS = {401: DENIED, 403: DENIED, 404: NOT_FOUND, 409: REFUSED, 410: NOT_FOUND}
# C0 controls and DEL, C1 controls (whitespace among them is folded by `one_line` first).
CONTROL_CHARACTERS = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)])
TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # a 100k-port import is verified before it answers
CHUNK = 64 * 1024
PAGE_SIZE = 1000  # the API's largest ?limit=
NO_URL = "no server: pass --url URL or set ISOFABRIC_URL"

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", envvar="ISOFABRIC_URL", help="The service's base URL, e.g. http://127.0.0.1:8000"
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option("--token", envvar="ISOFABRIC_TOKEN", help="Bearer token", show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the server's JSON unchanged")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr")]
LimitOption = Annotated[
    int | None, typer.Option("--limit", min=1, help="At most this many items (default: all)")
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Show what the change would do; write nothing")
]
IdempotencyKeyOption = Annotated[
    str | None,
    typer.Option("--idempotency-key", help="Retry-safe: the same key gets the first answer again"),
]


def exit_status(status: int, problem_type: str | None) -> int:
    """The exit status of a failed request: by problem type slug, else by HTTP status."""
    slug = (problem_type or "").rstrip("/").rpartition("/")[2]
    if slug in EXIT_BY_TYPE:
        return EXIT_BY_TYPE[slug]
    if status in EXIT_BY_STATUS:
        return EXIT_BY_STATUS[status]
    return UNAVAILABLE if status >= 500 or status == 429 else TROUBLE


def one_line(text: str) -> str:
    """`text` with every run of whitespace (newlines included) made one space.

    Other control characters are dropped: a server's (or a proxy's) problem detail must not
    drive the operator's terminal (an ESC sequence can retitle it, move the cursor, hide text).
    """
    return " ".join(text.split()).translate(CONTROL_CHARACTERS)


def problem_line(response: httpx2.Response) -> str:
    """``<title>: <detail>`` of a problem response, else its status line."""
    problem = _problem(response)
    if problem is None:
        return f"HTTP {response.status_code} {response.reason_phrase}"
    title = str(problem.get("title") or response.reason_phrase)
    detail = str(problem.get("detail") or "")
    line = f"{title}: {detail}" if detail and detail != title else title
    found = problem.get("counterexamples")
    examples = found[:3] if isinstance(found, list) else []
    messages = [str(c.get("message", "")) for c in examples if isinstance(c, dict)]
    if any(messages):  # the refused change's reasons, as a 409 isolation-violation names them
        line += " [" + "; ".join(m for m in messages if m) + "]"
    return one_line(line)


def _problem(response: httpx2.Response) -> dict[str, Any] | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) and ("title" in body or "type" in body) else None


def shown(url: str) -> str:
    """`url` without its userinfo: a password in ``--url`` is never printed in a message."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def _is_cursor(value: object) -> bool:
    return value is None or isinstance(value, str)


def fail(message: str, status: int) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with `status`."""
    typer.echo(f"error: {one_line(message)}", err=True)
    raise typer.Exit(status)


def require_url(url: str | None) -> str:
    """The base URL, or exit 2 naming how to give one."""
    if not url:
        fail(NO_URL, TROUBLE)
    if not url.lower().startswith(("http://", "https://")):
        fail(f"--url must start with http:// or https://, not '{shown(url)[:80]}'", TROUBLE)
    return url


@dataclass
class Page:
    """Items gathered from one or more pages, the server's total, and where it stopped."""

    data: list[Any] = field(default_factory=list)
    count: int = 0
    next: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. usage's complete_until

    def as_json(self) -> dict[str, Any]:
        """The server's page shape: ``{"data", "count", "next"}`` and its other members."""
        return {"data": self.data, "count": self.count, **self.extra, "next": self.next}


class ApiClient:
    """One service, one token: JSON requests whose failures exit the command.

    `as_json`: a failure prints the problem document on stdout too (scripts read its extension
    members, e.g. counterexamples), besides the one line on stderr.
    """

    def __init__(
        self,
        url: str | None,
        token: str | None,
        *,
        as_json: bool = False,
        http: httpx2.Client | None = None,
    ) -> None:
        self.base = require_url(url).rstrip("/")
        self.as_json = as_json
        headers = {"Accept": "application/json, application/problem+json, */*"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = http or httpx2.Client(timeout=TIMEOUT)
        self.headers = headers

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        dry_run: bool = False,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> httpx2.Response:
        """Send a request to ``<url><path>``; exit with the problem's status if it fails."""
        params = dict(kwargs.pop("params", None) or {})
        if dry_run:
            params["dry_run"] = "true"
        headers = {**self.headers, **kwargs.pop("headers", {})}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        with TransportErrors(self.base):
            response = self.http.request(
                method, self.base + path, params=params, headers=headers, **kwargs
            )
        return self.checked(response)

    def checked(self, response: httpx2.Response) -> httpx2.Response:
        """`response` if it succeeded; else print its problem and exit."""
        if response.is_success or response.status_code == 304:
            return response
        response.read()
        problem = _problem(response)
        if self.as_json and problem is not None:
            typer.echo(json.dumps(problem, indent=2))
        fail(problem_line(response), exit_status(response.status_code, (problem or {}).get("type")))

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON object a request answers (None for a mutation's 204 or empty answer).

        A success whose body is no JSON object (a captive portal's or another web server's
        HTML page, a GET answered empty) is one line and exit 6, never a traceback.
        """
        response = self.request(method, path, **kwargs)
        if method != "GET" and (response.status_code == 204 or not response.content):
            return None
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            fail(self._unexpected(response, "no JSON object"), UNAVAILABLE)
        return body

    def _unexpected(self, response: httpx2.Response, what: str) -> str:
        kind = response.headers.get("content-type", "no content type")
        return (
            f"{response.request.method} {response.request.url.path} answered HTTP "
            f"{response.status_code} with {what} ({kind[:60]}): is {shown(self.base)} the "
            "isofabric API?"
        )

    def pages(self, path: str, params: dict[str, Any], limit: int | None) -> Page:
        """Every item of a list, following ``next`` cursors, or the first `limit` ones."""
        gathered, cursor = Page(), None
        while True:
            size = PAGE_SIZE if limit is None else min(PAGE_SIZE, limit - len(gathered.data))
            query = {k: v for k, v in params.items() if v is not None} | {"limit": size}
            if cursor is not None:
                query["cursor"] = cursor
            page = self.json("GET", path, params=query)
            if not isinstance(page.get("data"), list) or not _is_cursor(page.get("next")):
                fail(
                    f"GET {path} answered no page of items: is {shown(self.base)} the "
                    "isofabric API?",
                    UNAVAILABLE,
                )
            gathered.data += page["data"]
            gathered.count, gathered.next = page["count"], page["next"]
            gathered.extra |= {k: v for k, v in page.items() if k not in ("data", "count", "next")}
            cursor = page["next"]
            if cursor is None or (limit is not None and len(gathered.data) >= limit):
                return gathered

    def stream(self, method: str, path: str) -> _Stream:
        """A streamed response (checked when it opens); use as a context manager."""
        return _Stream(self, method, path)


class TransportErrors:
    """Turn a connection failure (refused, unresolvable, timed out) into one line and exit 6."""

    def __init__(self, base: str) -> None:
        self.base = shown(base)

    def __enter__(self) -> None:
        return None

    def __exit__(self, _kind: object, error: BaseException | None, _tb: object) -> None:
        if isinstance(error, httpx2.TimeoutException):
            fail(f"{self.base} did not answer in time: {_reason(error)}", UNAVAILABLE)
        if isinstance(error, httpx2.InvalidURL | httpx2.UnsupportedProtocol):
            fail(f"not a URL the client can call: {_reason(error)}", TROUBLE)
        if isinstance(error, httpx2.TransportError):
            fail(f"cannot reach the server at {self.base}: {_reason(error)}", UNAVAILABLE)


def _reason(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text.rpartition("] ")[2]  # "[Errno 111] Connection refused" -> "Connection refused"


class _Stream:
    """``with client.stream("GET", path) as response``: the body is read in chunks."""

    def __init__(self, client: ApiClient, method: str, path: str) -> None:
        self.client, self.method, self.path = client, method, path
        self._context: Any = None

    def __enter__(self) -> httpx2.Response:
        client = self.client
        with TransportErrors(client.base):
            self._context = client.http.stream(
                self.method, client.base + self.path, headers=client.headers
            )
            response: httpx2.Response = self._context.__enter__()
        return client.checked(response)

    def __exit__(self, *exc: Any) -> None:
        self._context.__exit__(*exc)

    def chunks(self, response: httpx2.Response) -> Iterator[bytes]:
        """The body, `CHUNK` bytes at a time (a dropped connection exits 6)."""
        with TransportErrors(self.client.base):
            yield from response.iter_bytes(CHUNK)


def stderr_is_terminal() -> bool:
    """Whether progress would be seen: stderr is a terminal."""
    return sys.stderr.isatty()
