"""Open mode (no admin token, no API token yet) answers loopback clients only (issue 10, 2 and 25).

The loopback check trusts the ASGI client address (the TCP peer) and nothing the client writes:
X-Forwarded-For and Forwarded are ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.app import create_app
from tenancy.schemas import TokenCreate
from tenancy.store.settings import Settings
from tenancy.usecases import tokens
from tests.builders import LOCAL_URL, FakeClock, assert_problem, created, ok

ADMIN_TOKEN = "open-mode-admin-token"
REMOTE = ("203.0.113.9", 40000)
PeerFactory = Callable[..., TestClient]


@pytest.fixture
def peer(engine: Engine, settings: Settings, clock: FakeClock) -> Iterator[PeerFactory]:
    """``peer(host, **settings_overrides)``: a client of the test's database seen from `host`."""
    with ExitStack() as stack:

        def make(host: str, **overrides: Any) -> TestClient:
            app = create_app(dataclasses.replace(settings, **overrides), engine=engine, clock=clock)
            return stack.enter_context(TestClient(app, client=(host, 40000), base_url=LOCAL_URL))

        yield make


def assert_bootstrap_problem(response: Any) -> None:
    body = assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    for hint in ("ISOFABRIC_ADMIN_TOKEN", "isofabric token create", "POST /v1/tokens"):
        assert hint in body["detail"], body["detail"]


@pytest.mark.parametrize(
    "host", ["203.0.113.9", "10.1.2.3", "::ffff:203.0.113.9", "2001:db8::1", "testclient"]
)
def test_open_mode_refuses_a_client_off_the_host_saying_how_to_bootstrap(peer, host):
    assert_bootstrap_problem(peer(host).get("/v1/tenants"))


def test_a_remote_client_cannot_claim_a_fresh_service_by_minting_a_token(peer, uow):
    response = peer(REMOTE[0]).post("/v1/tokens", json={"name": "x", "role": "operator"})

    assert_bootstrap_problem(response)
    assert not tokens.tokens_exist(uow)


def test_a_made_up_bearer_does_not_let_a_remote_client_into_open_mode(peer):
    headers = {"Authorization": "Bearer isf_" + "A" * 43}

    assert_bootstrap_problem(peer(REMOTE[0]).get("/v1/tenants", headers=headers))


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Forwarded-For": "127.0.0.1"},
        {"X-Forwarded-For": "127.0.0.1, 127.0.0.1"},
        {"Forwarded": "for=127.0.0.1"},
        {"Forwarded": 'for="[::1]"'},
        {"X-Real-IP": "127.0.0.1"},
    ],
    ids=["x-forwarded-for", "x-forwarded-for-chain", "forwarded", "forwarded-v6", "x-real-ip"],
)
def test_forwarding_headers_do_not_make_a_remote_client_local(peer, headers):
    assert_bootstrap_problem(peer(REMOTE[0]).get("/v1/tenants", headers=headers))


def test_a_trusted_proxy_gives_the_scheme_only_never_the_client_address(peer):
    """Behind a proxy trusted for X-Forwarded-Proto, the proxy's own peer is still remote."""
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "127.0.0.1"}
    remote = peer(REMOTE[0], forwarded_allow_ips=("*",))
    assert_bootstrap_problem(remote.get("/v1/tenants", headers=forwarded))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_open_mode_answers_a_loopback_client_as_the_operator(peer, host):
    client = peer(host)

    assert ok(client.get("/v1/tenants"))["count"] == 0
    created(client.post("/v1/tokens", json={"name": "ops", "role": "operator"}))


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST"])
def test_a_loopback_client_may_name_this_host_by_any_loopback_name(peer, host):
    assert ok(peer("127.0.0.1").get("/v1/tenants", headers={"Host": host}))["count"] == 0


@pytest.mark.parametrize(
    "host", ["rebind.example", "rebind.example:8000", "127.0.0.1.rebind.example", "10.0.0.1"]
)
def test_a_loopback_client_naming_another_host_is_not_the_operator(peer, uow, host):
    # A browser on this host running a page of a domain that resolves to 127.0.0.1 (DNS
    # rebinding) connects from loopback and sends that domain in Host: it must not mint tokens.
    client = peer("127.0.0.1")
    minted = client.post(
        "/v1/tokens", json={"name": "x", "role": "operator"}, headers={"Host": host}
    )

    assert_bootstrap_problem(minted)
    assert_bootstrap_problem(client.get("/v1/tenants", headers={"Host": host}))
    assert not tokens.tokens_exist(uow)


def test_open_mode_closes_for_everyone_once_a_token_exists(peer):
    local, remote = peer("127.0.0.1"), peer(REMOTE[0])
    secret = created(local.post("/v1/tokens", json={"name": "ops", "role": "operator"}))["token"]
    bearer = {"Authorization": f"Bearer {secret}"}

    for client in (local, remote):
        body = assert_problem(client.get("/v1/tenants"), 401, "unauthorized")
        assert "ISOFABRIC_ADMIN_TOKEN" not in body["detail"]  # closed: no bootstrap advice
        assert ok(client.get("/v1/tenants", headers=bearer))["count"] == 0


def test_a_token_created_on_the_host_closes_open_mode_for_a_running_service(peer, uow):
    remote = peer(REMOTE[0])
    assert_bootstrap_problem(remote.get("/v1/tenants"))
    secret = tokens.create_token(uow, spec=TokenCreate(name="ops", role="operator")).token

    assert ok(remote.get("/v1/tenants", headers={"Authorization": f"Bearer {secret}"}))
    assert "ISOFABRIC_ADMIN_TOKEN" not in remote.get("/v1/tenants").json()["detail"]


def test_with_an_admin_token_configured_a_remote_client_needs_just_the_token(peer):
    remote = peer(REMOTE[0], admin_token=ADMIN_TOKEN)

    body = assert_problem(remote.get("/v1/tenants"), 401, "unauthorized")
    assert "ISOFABRIC_ADMIN_TOKEN" not in body["detail"]
    assert ok(remote.get("/v1/tenants", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}))


def test_health_stays_open_to_remote_clients(peer):
    assert peer(REMOTE[0]).get("/healthz").json() == {"status": "ok"}
