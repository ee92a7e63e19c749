"""Calling the UFM-compatible API (api/ufm/) in tests: credentials in each of UFM's styles.

Shared by tests/api/test_ufm_facade.py, test_ufm_auth.py and test_ufm_cross_tenant.py.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import httpx2
from fastapi.testclient import TestClient

from api.ufm.auth import SESSION_COOKIE
from tenancy.schemas import TokenCreate, TokenCreated
from tenancy.usecases import tokens
from tests.builders import FABRIC, PORT_GUIDS

UFM_ERROR_MEMBERS = frozenset({"error", "status", "reason"})
# Port GUIDs as UFM emits them: bare, lower case, 16 digits.
PORTS = {host: tuple(g.removeprefix("0x") for g in guids) for host, guids in PORT_GUIDS.items()}
FREE = PORTS["gpu0007"][0]  # a port of a free compute node
ACME_PORT, GLOBEX_PORT = PORTS["gpu0001"][0], PORTS["gpu0005"][0]
MANAGEMENT_PORT, STORAGE_PORT = PORTS["sm01"][0], PORTS["stor01"][0]
# Onboarding hands out: the service 0x100, then acme 0x101, research 0x102, globex 0x103.
SERVICE_KEY, ACME_KEY, GLOBEX_KEY = "0x100", "0x101", "0x103"
VIRTUAL_RANGE = "0x0200000000000000-0x02000000000000ff"
VIRTUAL = "0200000000000001"
VIRTUAL_GUIDS = {"enabled": True, "ranges": [VIRTUAL_RANGE], "sm": "nvidia"}


def mint(
    client: TestClient,
    role: str,
    tenant: str | None = None,
    fabric: str | None = None,
    target: str | None = None,
    name: str = "ufm",
) -> TokenCreated:
    """A token of `role` made through the use case (as `isofabric token create` does)."""
    spec = TokenCreate(name=name, role=role, tenant=tenant, fabric=fabric, target=target)
    return tokens.create_token(client.app.state.uow, spec=spec)  # type: ignore[attr-defined]


def orchestrator(client: TestClient, tenant: str | None = None, fabric: str = FABRIC) -> str:
    """The secret of an orchestrator token of `fabric`, bound to `tenant` or fabric-wide."""
    return mint(client, "orchestrator", tenant, fabric, name=f"orch-{tenant or 'all'}").token


def basic(secret: str, user: str = "ufm-user") -> dict[str, str]:
    """HTTP Basic as /ufmRest takes it: any user name, the token as the password."""
    pair = base64.b64encode(f"{user}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {pair}"}


def access_token(secret: str) -> dict[str, str]:
    """UFM's access-token header as /ufmRestV3 takes it: ``Authorization: Basic <token>``."""
    return {"Authorization": f"Basic {secret}"}


def operator_bearer(client: TestClient) -> dict[str, str]:
    """A fresh operator token, as a /v1 bearer header."""
    return {"Authorization": f"Bearer {mint(client, 'operator', name='ops').token}"}


def sign_in(client: TestClient, secret: str, prefix: str = "") -> httpx2.Response:
    """``POST /dologin`` with UFM's form; `prefix` is '' or '/fabrics/<fabric>'."""
    form = {"httpd_username": "ufm-user", "httpd_password": secret}
    return client.post(f"{prefix}/dologin", data=form)


def session_cookie(response: httpx2.Response) -> str:
    """The facade session's secret a /dologin answer set."""
    value = response.cookies.get(SESSION_COOKIE)
    assert value, response.headers.get("set-cookie")
    return str(value)


def session(secret_cookie: str) -> dict[str, str]:
    """The header a client sends with a facade session (whatever the path)."""
    return {"Cookie": f"{SESSION_COOKIE}={secret_cookie}"}


@dataclass(frozen=True)
class Style:
    """One authentication style of the facade: its base path and how a token is sent."""

    name: str
    base: str

    def headers(self, client: TestClient, secret: str) -> dict[str, str]:
        """The credentials of `secret` in this style (a /dologin session for /ufmRestV2)."""
        if self.base.endswith("ufmRestV2"):
            prefix = self.base.removesuffix("/ufmRestV2")
            answer = sign_in(client, secret, prefix)
            assert answer.status_code == 200, answer.text
            return session(session_cookie(answer))
        if self.base.endswith("ufmRestV3"):
            return access_token(secret)
        return basic(secret)


ON_FABRIC = f"/fabrics/{FABRIC}"
STYLES = [
    Style("basic", "/ufmRest"),
    Style("session", "/ufmRestV2"),
    Style("token", "/ufmRestV3"),
    Style("fabric-basic", f"{ON_FABRIC}/ufmRest"),
    Style("fabric-session", f"{ON_FABRIC}/ufmRestV2"),
    Style("fabric-token", f"{ON_FABRIC}/ufmRestV3"),
]


def ufm_error(response: httpx2.Response, status: int) -> dict[str, Any]:
    """A UFM-shaped refusal: JSON (never problem+json) with error, status and reason."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json", response.headers
    body: dict[str, Any] = response.json()
    assert body.keys() >= UFM_ERROR_MEMBERS, body
    assert body["status"] == status and isinstance(body["error"], str) and body["error"]
    return body


def ufm_ok(response: httpx2.Response) -> Any:
    """Exactly 200 with a JSON body (UFM's clients compare the status with 200)."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json", response.headers
    return response.json()
