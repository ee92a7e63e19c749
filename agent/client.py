"""The agent's calls to the service (stdlib HTTP: an SM host needs no extra client library).

Routes (the issue-11 contract): ``GET /v1/fabrics/{fabric}/signed-manifest``, ``GET
/v1/fabrics/{fabric}/snapshots/{digest}/artifacts/{path}`` (files by snapshot digest, never the
live route, so a change between manifest and download cannot mix snapshots) and ``POST
/v1/fabrics/{fabric}/targets/{target}/reports``. Every failure is a `ServerError`; the agent
retries on its next cycle.
"""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

DEFAULT_TIMEOUT = 30.0
# A manifest is a few hundred bytes; partitions.conf of a 100k-port fabric a few megabytes.
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class ServerError(RuntimeError):
    """The service could not be reached or answered with an error (`status` None: no answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ServerClient:
    """One fabric and target on one service, with a bearer token."""

    url: str
    token: str | None
    fabric: str
    target: str
    timeout: float = DEFAULT_TIMEOUT

    def signed_manifest(self) -> dict[str, Any]:
        """The DSSE envelope of the fabric's current artifact manifest (not yet verified)."""
        document = json.loads(self._request("GET", self._fabric_path("signed-manifest")))
        if not isinstance(document, dict):
            raise ServerError("the signed manifest is not a JSON object")
        return document

    def key_transitions(self) -> list[Any]:
        """``GET /v1/keys/transitions``: the statements (verified by agent/trust.py, not here)."""
        url = f"{self.url.rstrip('/')}/v1/keys/transitions"
        document = json.loads(self._request("GET", url))
        statements = document.get("transitions") if isinstance(document, dict) else None
        if not isinstance(statements, list):
            raise ServerError("the key transitions are not a JSON object with a list")
        return statements

    def artifact(self, digest: str, path: str) -> bytes:
        """The bytes of `path` in the snapshot `digest` (checked by the caller, not here)."""
        quoted = urllib.parse.quote(path)
        return self._request("GET", self._fabric_path(f"snapshots/{digest}/artifacts/{quoted}"))

    def sync(self) -> dict[str, Any]:
        """``GET /v1/fabrics/{fabric}/sync``: the desired digest, its phase, every target."""
        document = json.loads(self._request("GET", self._fabric_path("sync")))
        if not isinstance(document, dict):
            raise ServerError("the sync status is not a JSON object")
        return document

    def post_report(self, report: dict[str, Any]) -> dict[str, Any]:
        """POST one deploy report for this target; returns the stored report."""
        target = urllib.parse.quote(self.target, safe="")
        body = json.dumps(report).encode()
        answer = json.loads(
            self._request("POST", self._fabric_path(f"targets/{target}/reports"), body)
        )
        return answer if isinstance(answer, dict) else {}

    def _fabric_path(self, rest: str) -> str:
        fabric = urllib.parse.quote(self.fabric, safe="")
        return f"{self.url.rstrip('/')}/v1/fabrics/{fabric}/{rest}"

    def _request(self, method: str, url: str, body: bytes | None = None) -> bytes:
        headers = {"Accept": "application/json, text/plain"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                data = bytes(response.read(MAX_RESPONSE_BYTES + 1))
        except urllib.error.HTTPError as error:
            raise ServerError(
                f"{method} {url}: {error.code} {_problem(error)}", error.code
            ) from error
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise ServerError(f"{method} {url}: {error}") from error
        if len(data) > MAX_RESPONSE_BYTES:
            raise ServerError(f"{method} {url}: the response exceeds {MAX_RESPONSE_BYTES} bytes")
        return data


def origin(url: str) -> tuple[str, str, int | None]:
    """RFC 6454 origin of `url`: scheme, host and port (the scheme's default when unsaid)."""
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect within the service's origin only: the token never goes elsewhere.

    urllib's own handler follows any redirect and keeps every header but the body's, so a
    redirect (to another host, or from https to http) would hand the agent's token to whoever
    answers there. A redirect elsewhere is an error that names where it pointed.
    """

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        """The request to `newurl` when it is on the request's origin; else refuse it."""
        if origin(newurl) != origin(req.full_url):
            scheme, host, port = origin(newurl)
            raise urllib.error.HTTPError(
                req.full_url,
                code,
                f"the service redirected to {scheme}://{host}:{port}, another origin; the agent "
                "sends its token to its --server only (give the service's own URL there)",
                headers,
                io.BytesIO(),
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(SameOriginRedirects)


def _problem(error: urllib.error.HTTPError) -> str:
    """The problem's detail (or title) of an error response, else its reason."""
    try:
        document = json.loads(error.read(64 * 1024))
    except (ValueError, OSError):
        return str(error.reason)
    if isinstance(document, dict):
        return str(document.get("detail") or document.get("title") or error.reason)
    return str(error.reason)
