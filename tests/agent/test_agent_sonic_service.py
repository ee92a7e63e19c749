"""Two leaf agents against the real service (TestClient), real Redis, fake FRR daemons.

The demo RoCE fabric is onboarded; each leaf's CONFIG_DB starts as a switch would hold it before
isofabric: the declared keys of its rendered config (ports, QoS, VTEP) and foreign keys, nothing
owned. The agents deploy; an offboarding then goes through phase 1 (access removed on affected
leaves, VRFs kept) before phase 2, `sync` shows the phases and who is behind, and the released
nodes drain until every leaf read the new snapshot back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent.client import ServerError
from agent.command import agent_app
from agent.config_db import ConfigDb, RedisConfigDb, flatten, touched, unflatten
from agent.frr import FrrLeaf, FrrTools
from agent.sonic import SonicAgent, SonicSettings
from agent.trust import Trust
from policies.evidence.keyring import keyring_keys
from policies.roce.ownership import LeafOwnership
from policies.roce.patch import owned_entries
from tenancy.store import key_store
from tests.agent.redis_server import RedisServer, running_redis
from tests.agent.sonic_fakes import FOREIGN, FakeDaemons, document
from tests.builders import ROCE_FABRIC, ROCE_LEAVES, RoceOnboarded, created, ok
from tests.live_server import live_server

FABRIC = f"/v1/fabrics/{ROCE_FABRIC}"
TOKEN_ENV = "ISOFABRIC_TOKEN"


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as started:
        yield started


@dataclass(frozen=True)
class ApiServer:
    """The service's routes for one leaf agent, through the test client."""

    client: Any
    target: str

    def signed_manifest(self) -> dict[str, Any]:
        return self._json(self.client.get(f"{FABRIC}/signed-manifest"))

    def sync(self) -> dict[str, Any]:
        return self._json(self.client.get(f"{FABRIC}/sync"))

    def key_transitions(self) -> list[Any]:
        return list(self._json(self.client.get("/v1/keys/transitions"))["transitions"])

    def artifact(self, digest: str, path: str) -> bytes:
        response = self.client.get(f"{FABRIC}/snapshots/{digest}/artifacts/{path}")
        self._check(response)
        return bytes(response.content)

    def post_report(self, report: dict[str, Any]) -> dict[str, Any]:
        url = f"{FABRIC}/targets/{self.target}/reports"
        return self._json(self.client.post(url, json=report))

    def _json(self, response: Any) -> dict[str, Any]:
        self._check(response)
        document: dict[str, Any] = response.json()
        return document

    def _check(self, response: Any) -> None:
        if response.status_code >= 400:
            raise ServerError(f"{response.status_code} {response.text}", response.status_code)


@dataclass
class LeafAgent:
    name: str
    store: RedisConfigDb
    daemons: FakeDaemons
    agent: SonicAgent


def rendered(client: Any, leaf: str) -> tuple[ConfigDb, LeafOwnership]:
    config_db = ok(client.get(f"{FABRIC}/artifacts/sonic/{leaf}/config_db.json"))
    ownership = client.get(f"{FABRIC}/artifacts/sonic/{leaf}/ownership.json").text
    return unflatten(flatten(config_db)), LeafOwnership.from_json(ownership)


def before_isofabric(client: Any, leaf: str) -> ConfigDb:
    """The switch before any deployment: the rendered declared keys, foreign keys, no owned."""
    target, ownership = rendered(client, leaf)
    owned = owned_entries(target, ownership)
    declared = {
        table: {k: v for k, v in entries.items() if k not in owned.get(table, {})}
        for table, entries in target.items()
    }
    return document({t: e for t, e in declared.items() if e}, FOREIGN)


def leaf_agent(
    client: Any, redis_server: RedisServer, tmp_path: Path, leaf: str, db: int
) -> LeafAgent:
    created(client.put(f"{FABRIC}/targets/{leaf}", json={"kind": "sonic"}))
    store = RedisConfigDb.from_url(redis_server.url(db))
    store.write(*touched({}, before_isofabric(client, leaf)))
    daemons = FakeDaemons()
    state = tmp_path / leaf
    state.mkdir()
    frr = FrrLeaf(state / "frr.conf", FrrTools(), run=daemons)
    settings = SonicSettings(ROCE_FABRIC, leaf, Trust.of(trusted_keys(client)), state)
    agent = SonicAgent(settings, ApiServer(client, leaf), store, frr)
    return LeafAgent(leaf, store, daemons, agent)


@pytest.fixture
def leaves(
    client: Any, roce_onboarded: RoceOnboarded, redis_server: RedisServer, tmp_path: Path
) -> list[LeafAgent]:
    redis_server.client().flushall()
    return [
        leaf_agent(client, redis_server, tmp_path, leaf, db)
        for db, leaf in enumerate(ROCE_LEAVES, start=4)
    ]


def trusted_keys(client: Any) -> list[Any]:
    """The service's signing keys, as an operator pins them (its keyring)."""
    keyring = key_store.read_keyring(client.app.state.uow.settings.keyring_path)
    return list(keyring_keys(keyring).values())


def draining(client: Any) -> list[str]:
    nodes = ok(client.get(f"{FABRIC}/nodes?limit=500"))["data"]
    return sorted(n["name"] for n in nodes if n["state"] == "draining")


def holds_target(client: Any, leaf: str, store: RedisConfigDb) -> bool:
    target, _ = rendered(client, leaf)
    return store.read() == document(target, FOREIGN)


def test_first_deployment_then_an_offboarding_in_two_phases(
    client: Any, roce_onboarded: RoceOnboarded, leaves: list[LeafAgent]
) -> None:
    for leaf in leaves:
        result = leaf.agent.cycle()
        assert result.outcome == "applied", result.detail
        assert holds_target(client, leaf.name, leaf.store)
    status = ok(client.get(f"{FABRIC}/sync"))
    assert status["in_sync"] is True and status["behind"] == []

    allocation = roce_onboarded.allocation_ids["globex"]
    response = client.delete(f"/v1/tenants/globex/allocations/{allocation}")
    assert response.status_code == 204, response.text
    status = ok(client.get(f"{FABRIC}/sync"))
    assert status["phase"] == 1 and sorted(status["behind"]) == sorted(ROCE_LEAVES)
    released = draining(client)
    assert released  # the offboarded nodes wait for every leaf's read-back
    affected = {t["name"] for t in status["targets"] if t["affected"]}
    assert affected, status

    members = {leaf.name: set(leaf.store.read().get("VLAN_MEMBER", {})) for leaf in leaves}
    vrfs = {leaf.name: set(leaf.store.read().get("VRF", {})) for leaf in leaves}
    for leaf in leaves:
        result = leaf.agent.cycle()
        assert result.outcome == "applied", result.detail
        assert result.report is not None and result.report.phase == 1
        assert result.report.observed_digest is None
        running = leaf.store.read()
        assert set(running.get("VRF", {})) == vrfs[leaf.name]  # phase 1 removes access only
        left = members[leaf.name] - set(running.get("VLAN_MEMBER", {}))
        assert bool(left) == (leaf.name in affected), (leaf.name, left)
    status = ok(client.get(f"{FABRIC}/sync"))
    assert status["phase"] == 2, status

    for leaf in leaves:
        result = leaf.agent.cycle()
        assert result.outcome == "applied", result.detail
        assert result.report is not None and result.report.phase == 2
        assert holds_target(client, leaf.name, leaf.store)
    status = ok(client.get(f"{FABRIC}/sync"))
    assert status["in_sync"] is True and status["behind"] == []
    assert draining(client) == []  # every leaf read back (observed) the new snapshot


def test_a_leaf_that_is_down_stays_behind(
    client: Any, roce_onboarded: RoceOnboarded, leaves: list[LeafAgent]
) -> None:
    up, down = leaves
    assert up.agent.cycle().outcome == "applied"
    status = ok(client.get(f"{FABRIC}/sync"))
    assert status["in_sync"] is False and status["behind"] == [down.name]
    assert json.dumps(status)  # the whole status is JSON


def test_the_command_over_http_with_an_agent_token(
    make_client: Any, roce_onboarded: RoceOnboarded, redis_server: RedisServer, tmp_path: Path
) -> None:
    """``isofabric agent sonic --once`` with its real HTTP client against a closed service."""
    client = make_client(admin_token="admin")
    client.headers.update({"Authorization": "Bearer admin"})
    created(client.put(f"{FABRIC}/targets/leaf01", json={"kind": "sonic"}))
    body = {"name": "agent-leaf01", "role": "agent", "fabric": ROCE_FABRIC, "target": "leaf01"}
    token = created(client.post("/v1/tokens", json=body))["token"]
    redis_server.client().flushall()
    store = RedisConfigDb.from_url(redis_server.url())
    store.write(*touched({}, before_isofabric(client, "leaf01")))
    keyring = client.app.state.uow.settings.keyring_path
    argv = [
        "sonic", "--fabric", ROCE_FABRIC, "--target", "leaf01", "--public-key", str(keyring),
        "--config-db", redis_server.url(), "--state-dir", str(tmp_path), "--once",
    ]  # fmt: skip
    with live_server(client.app) as url:
        result = CliRunner().invoke(agent_app, [*argv, "--server", url], env={TOKEN_ENV: token})
        assert result.exit_code == 0, result.stderr
        assert holds_target(client, "leaf01", store)
        target = ok(client.get(f"{FABRIC}/targets/leaf01"))
        assert target["state"] == "applied" and target["observed_digest"] == target["digest"]
        refused = CliRunner().invoke(agent_app, [*argv, "--server", url], env={TOKEN_ENV: "isf_x"})
        assert refused.exit_code == 1 and "401" in refused.stderr
