"""After a restore of an older backup, agents apply the restored service's changes.

A manifest's sequence is the audit index of its change, and a restore moves the index back.
Before manifests had an epoch, agents refused every manifest after a restore as a replay, so an
offboarding made after it never reached the fabric. Backup -> changes -> restore -> changes ->
the agent applies, on SQLite (`isofabric db backup|restore`) and PostgreSQL (`pg_dump`,
`pg_restore`, then `isofabric db restored`); a manifest of the epoch before is still refused.
"""

from __future__ import annotations

import base64
import json
import random
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agent.client import ServerError
from agent.opensm import Agent
from agent.state import load_state
from agent.trust import Trust
from api.app import create_app
from cli import app as cli
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import signing_keys
from tests.agent.fakes import Clock, FakeHost
from tests.agent.fakes import settings as agent_settings
from tests.builders import LOCAL_URL, api_onboard
from tests.conftest import BACKENDS, LOOPBACK_CLIENT
from tests.keys import key_settings

IB = "/v1/fabrics/ib-east"
UNUSED_KEY = Ed25519PrivateKey.generate()  # the fake settings' default trust, replaced
runner = CliRunner()


@dataclass
class Deployment:
    """One backend's database and key files, and how an operator backs it up and restores it."""

    settings: Settings
    env: dict[str, str]

    @property
    def postgres(self) -> bool:
        return self.settings.database_url.startswith("postgresql")

    def cli(self, *args: str) -> str:
        result = runner.invoke(cli, [*args, "--db", self.settings.database_url], env=self.env)
        assert result.exit_code == 0, result.output
        return str(result.output)

    def backup(self, file: Path) -> None:
        if self.postgres:
            _run(["pg_dump", "-Fc", "-f", str(file), self._tool_url()])
        else:
            self.cli("db", "backup", str(file))

    def restore(self, file: Path) -> str:
        """Restore `file`; what isofabric's part of the restore printed."""
        if not self.postgres:
            return self.cli("db", "restore", str(file))
        _run(["pg_restore", "--clean", "--if-exists", "-d", self._tool_url(), str(file)])
        return self.cli("db", "restored")

    def _tool_url(self) -> str:
        return self.settings.database_url.replace("postgresql+psycopg://", "postgresql://")


def sqlite_deployment(tmp_path: Path) -> Deployment:
    path = tmp_path / "srv" / "isofabric.db"
    path.parent.mkdir()
    deployment = Deployment(Settings(database_url=f"sqlite:///{path}"), {})
    deployment.cli("keys", "create")
    return deployment


def postgres_deployment(url: str, tmp_path: Path) -> Deployment:
    settings = key_settings(Settings(database_url=url), copy_to=tmp_path / "keys")
    engine = make_engine(url)
    signing_keys.create(UnitOfWork(engine, settings))
    engine.dispose()
    env = {
        "ISOFABRIC_SIGNING_KEY_FILE": str(settings.signing_key_file),
        "ISOFABRIC_KEYRING_FILE": str(settings.keyring_file),
        "ISOFABRIC_OPENSM_SECRET_FILE": str(settings.opensm_secret_file),
    }
    return Deployment(settings, env)


def _run(argv: list[str]) -> None:
    if shutil.which(argv[0]) is None:
        pytest.fail(f"{argv[0]} is not installed (postgresql-client)")
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


@pytest.fixture(params=BACKENDS)
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Deployment:
    if request.param == "sqlite":
        return sqlite_deployment(tmp_path)
    return postgres_deployment(request.getfixturevalue("postgres_url"), tmp_path)


@contextmanager
def serving(deployment: Deployment) -> Iterator[TestClient]:
    """The service on the deployment's database, for one phase (stopped before a restore)."""
    app = create_app(deployment.settings)
    with TestClient(app, client=LOOPBACK_CLIENT, base_url=LOCAL_URL) as client:
        yield client
    app.state.uow.engine.dispose()


@dataclass
class ApiServer:
    """The routes the OpenSM agent calls, through whichever client serves now."""

    client: TestClient | None = None

    def signed_manifest(self) -> dict[str, Any]:
        return self._json(f"{IB}/signed-manifest")

    def key_transitions(self) -> list[Any]:
        return list(self._json("/v1/keys/transitions")["transitions"])

    def artifact(self, digest: str, path: str) -> bytes:
        return bytes(self._answer("GET", f"{IB}/snapshots/{digest}/artifacts/{path}").content)

    def post_report(self, report: dict[str, Any]) -> dict[str, Any]:
        return dict(self._answer("POST", f"{IB}/targets/sm-a/reports", json=report).json())

    def _json(self, path: str) -> dict[str, Any]:
        return dict(self._answer("GET", path).json())

    def _answer(self, method: str, path: str, **kwargs: Any) -> Any:
        assert self.client is not None
        response = self.client.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise ServerError(f"{response.status_code} {response.text}", response.status_code)
        return response


def position(envelope: dict[str, Any]) -> tuple[int, int]:
    document = json.loads(base64.b64decode(envelope["payload"]))
    return (document.get("epoch", 0), document["sequence"])


def offboard(client: TestClient, tenant: str) -> None:
    assert client.delete(f"/v1/tenants/{tenant}").status_code in (200, 202, 204)


def test_agents_apply_changes_made_after_a_restore_and_refuse_the_epoch_before(
    deployment: Deployment, tmp_path: Path
):
    conf_dir, backup = tmp_path / "opensm", tmp_path / "backup.dump"
    conf_dir.mkdir()
    keyring = deployment.settings.keyring_path
    assert keyring is not None
    server = ApiServer()
    agent = Agent(
        agent_settings(conf_dir, UNUSED_KEY, fabric="ib-east", keys=Trust.load(keyring)),
        server,
        FakeHost(conf_dir),
        clock=Clock(),
        rng=random.Random(7),
    )
    with serving(deployment) as server.client:
        api_onboard(server.client)
        server.client.put(f"{IB}/targets/sm-a", json={"kind": "opensm"})
        assert agent.cycle().outcome == "applied"
        deployment.backup(backup)
        for tenant in ("globex", "research"):  # the audit index moves on
            offboard(server.client, tenant)
        assert agent.cycle().outcome == "applied"
        before_restore = server.signed_manifest()

    said = deployment.restore(backup)

    declared = re.search(r"manifest epoch (\d+)", said)
    assert declared is not None, said
    with serving(deployment) as server.client:
        offboard(server.client, "acme")  # e.g. a revocation after the restore
        restored = server.signed_manifest()
        assert position(restored)[0] == int(declared.group(1)) > position(before_restore)[0]
        assert position(restored)[1] < position(before_restore)[1]
        assert agent.cycle().outcome == "applied"
        assert "acme" not in (conf_dir / "partitions.conf").read_text()
        assert load_state(conf_dir).installed_position == position(restored)
        server.client = _replaying(server.client, before_restore)
        assert agent.cycle().outcome == "refused"


def _replaying(client: TestClient, envelope: dict[str, Any]) -> Any:
    """The client, except that the signed manifest is an older one (a replay)."""

    class Replaying:
        def request(self, method: str, path: str, **kwargs: Any) -> Any:
            if path.endswith("/signed-manifest"):
                return _Answer(envelope)
            return client.request(method, path, **kwargs)

    return Replaying()


@dataclass
class _Answer:
    document: dict[str, Any]
    status_code: int = 200

    def json(self) -> dict[str, Any]:
        return self.document
