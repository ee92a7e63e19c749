"""``isofabric agent sonic``: usage errors exit 2; ``--once`` exits 0 applied, 1 otherwise.

The service is the fake (the command's ServerClient replaced); CONFIG_DB is a real redis-server,
written directly (``--config-db``) or through the STAND-IN ``config``/``show`` (``--gcu``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

import agent.client
from agent.command import agent_app
from agent.config_db import RedisConfigDb, touched
from agent.sonic_change import disruptive_refusal
from tenancy.store.key_store import public_pem
from tests.agent.fakes import FABRIC
from tests.agent.gcu_standin import calls, install_standin
from tests.agent.redis_server import RedisServer, running_redis
from tests.agent.sonic_fakes import ACME as ACME_KEYS
from tests.agent.sonic_fakes import DECLARED, FOREIGN, LEAF, FakeSonicServer, document, leaf_bundle

runner = CliRunner()
KEY = Ed25519PrivateKey.generate()
BASE = document(DECLARED, FOREIGN)
WITH_ACME = document(DECLARED, FOREIGN, ACME_KEYS)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as started:
        yield started


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> FakeSonicServer:
    server = FakeSonicServer(KEY)
    server.publish(leaf_bundle(json.dumps(WITH_ACME)))
    monkeypatch.setattr(agent.client, "ServerClient", lambda *args: server)
    return server


@pytest.fixture
def base(tmp_path: Path, redis_server: RedisServer) -> list[str]:
    redis_server.client().flushall()
    RedisConfigDb.from_url(redis_server.url()).write(*touched({}, BASE))
    key = tmp_path / "service.pub"
    key.write_text(public_pem(KEY.public_key()))
    return [
        "sonic", "--server", "http://127.0.0.1:1", "--fabric", FABRIC, "--target", LEAF,
        "--public-key", str(key), "--state-dir", str(tmp_path / "state"), "--token", "isf_x",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "extra",
    [
        ["--once"],  # neither --config-db nor --gcu
        ["--once", "--gcu", "--config-db", "unix:///x.sock?db=4"],
        ["--config-db", "unix:///x.sock?db=4"],  # neither --once nor --interval
        ["--once", "--interval", "5", "--gcu"],
        ["--interval", "0", "--gcu"],
        ["--once", "--config-db", "ftp://host/4"],
    ],
)
def test_usage_errors_exit_2(base: list[str], extra: list[str]) -> None:
    result = runner.invoke(agent_app, [*base, *extra])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.stderr and isinstance(result.exception, SystemExit)


def test_once_against_an_unreachable_server_exits_1(
    base: list[str], redis_server: RedisServer
) -> None:
    result = runner.invoke(agent_app, [*base, "--once", "--config-db", redis_server.url()])
    assert result.exit_code == 1
    assert "unreachable" in result.stderr


def test_once_applies_to_redis_and_exits_0(
    base: list[str], redis_server: RedisServer, service: FakeSonicServer
) -> None:
    result = runner.invoke(agent_app, [*base, "--once", "--config-db", redis_server.url()])
    assert result.exit_code == 0, result.stderr
    assert RedisConfigDb.from_url(redis_server.url()).read() == WITH_ACME
    assert service.states == ["applied"] and service.reports[0]["phase"] == 2


def test_once_refused_exits_1(
    base: list[str], redis_server: RedisServer, service: FakeSonicServer
) -> None:
    service.publish(leaf_bundle(json.dumps(document(BASE, {"PORT": {"Ethernet8": {"mtu": "1"}}}))))
    result = runner.invoke(agent_app, [*base, "--once", "--config-db", redis_server.url()])
    assert result.exit_code == 1
    assert service.states == ["refused"] and "disruptive" in service.reports[0]["detail"]


def test_once_with_gcu_runs_the_standin_config_and_exits_0(
    base: list[str],
    redis_server: RedisServer,
    service: FakeSonicServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env: dict[str, Any] = install_standin(tmp_path / "bin", tmp_path / "gcu", redis_server.url())
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(agent_app, [*base, "--once", "--gcu"])
    assert result.exit_code == 0, result.stderr
    assert RedisConfigDb.from_url(redis_server.url()).read() == WITH_ACME
    done = [call[1] for call in calls(tmp_path / "gcu") if call[0] == "config"]
    assert done == ["checkpoint", "apply-patch", "apply-patch", "save", "delete-checkpoint"]


def factory_leaf(redis_server: RedisServer) -> RedisConfigDb:
    """A leaf before its first deployment: none of the declared keys, its own keys only."""
    redis_server.client().flushall()
    store = RedisConfigDb.from_url(redis_server.url())
    store.write(*touched({}, FOREIGN))
    return store


def test_a_first_deployment_is_refused_in_one_short_line_naming_the_tables(
    base: list[str], redis_server: RedisServer, service: FakeSonicServer
) -> None:
    store = factory_leaf(redis_server)
    result = runner.invoke(agent_app, [*base, "--once", "--config-db", redis_server.url()])

    detail = service.reports[0]["detail"]
    assert result.exit_code == 1 and service.states == ["refused"]
    assert "in tables DEVICE_METADATA, PORT, VXLAN_TUNNEL (" in detail
    assert "give --bootstrap" in detail and len(detail) < 400
    assert "add /DEVICE_METADATA, add /PORT, add /VXLAN_TUNNEL)" in detail  # whole tables
    assert store.read() == FOREIGN


def test_bootstrap_takes_ownership_once_then_disruptive_changes_need_the_other_flag(
    base: list[str], redis_server: RedisServer, service: FakeSonicServer
) -> None:
    store = factory_leaf(redis_server)
    bootstrap = [*base, "--once", "--config-db", redis_server.url(), "--bootstrap"]

    first = runner.invoke(agent_app, bootstrap)
    assert first.exit_code == 0, first.stderr
    assert store.read() == WITH_ACME and service.states == ["applied"]

    service.publish(
        leaf_bundle(json.dumps(document(WITH_ACME, {"PORT": {"Ethernet0": {"mtu": "1"}}})))
    )
    later = runner.invoke(agent_app, bootstrap)
    assert later.exit_code == 1 and service.states[-1] == "refused"
    assert "give --allow-disruptive" in service.reports[-1]["detail"]
    assert store.read() == WITH_ACME


def test_a_long_refusal_names_three_paths_and_counts_the_rest() -> None:
    additions = tuple({"op": "add", "path": f"/PORT/Ethernet{4 * i}"} for i in range(40))

    refusal = disruptive_refusal(additions, first_deployment=False)

    assert "40 disruptive change(s)" in refusal.detail and "and 37 more" in refusal.detail
    assert "in tables PORT (" in refusal.detail and "give --allow-disruptive" in refusal.detail
    assert len(refusal.detail) < 300 and len(refusal.extensions["refused"]) == 40
