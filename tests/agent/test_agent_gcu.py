"""``--gcu`` mode against a STAND-IN ``config``/``show`` (tests/agent/gcu_standin.py; no SONiC).

The stand-in acts on a real redis-server, so what GCU would leave in CONFIG_DB is read back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.config_db import ConfigDb, RedisConfigDb, StoreError, touched
from agent.gcu import GcuConfigDb
from tests.agent.gcu_standin import DRIFT_ENV, FAIL_ENV, calls, install_standin, run_in_process
from tests.agent.redis_server import RedisServer, running_redis

RUNNING: ConfigDb = {
    "VLAN": {"Vlan100": {"vlanid": "100"}},
    "VLAN_MEMBER": {"Vlan100|Ethernet0": {"tagging_mode": "untagged"}},
    "SYSLOG": {"global": {"servers": ["10.2.2.2"]}},
}
PATCH: list[dict[str, Any]] = [
    {"op": "remove", "path": "/VLAN_MEMBER"},
    {"op": "add", "path": "/VRF", "value": {"Vrf5001": {"vni": "5001"}}},
]
INTENDED: ConfigDb = {
    "VLAN": {"Vlan100": {"vlanid": "100"}},
    "VRF": {"Vrf5001": {"vni": "5001"}},
    "SYSLOG": {"global": {"servers": ["10.2.2.2"]}},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as started:
        yield started


@pytest.fixture
def standin(
    server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, RedisConfigDb]:
    server.client().flushall()
    store = RedisConfigDb.from_url(server.url())
    store.write(*touched({}, RUNNING))
    for name, value in install_standin(tmp_path / "bin", tmp_path / "gcu", server.url()).items():
        monkeypatch.setenv(name, value)
    return tmp_path / "gcu", store


def subcommands(state: Path) -> list[str]:
    return [" ".join(call[1:2]) for call in calls(state) if call[0] == "config"]


def test_apply_checkpoints_dry_runs_applies_and_finish_saves(
    standin: tuple[Path, RedisConfigDb],
) -> None:
    """The commands on PATH (the stand-in's executables); the other tests run it in-process."""
    state, store = standin
    gcu = GcuConfigDb()
    assert gcu.read() == RUNNING
    applied = gcu.apply(RUNNING, PATCH, INTENDED)
    assert store.read() == INTENDED
    gcu.finish(applied)
    assert subcommands(state) == [
        "checkpoint",
        "apply-patch",
        "apply-patch",
        "save",
        "delete-checkpoint",
    ]
    dry, real = (c for c in calls(state) if c[1:2] == ["apply-patch"])
    assert dry[2] == "--dry-run" and real[2] != "--dry-run"
    assert not list(state.glob("*.cp.json"))


def test_a_refused_dry_run_changes_nothing(
    standin: tuple[Path, RedisConfigDb], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, store = standin
    bad: list[dict[str, Any]] = [{"op": "remove", "path": "/VRF/Vrf9999"}]
    with pytest.raises(StoreError) as raised:
        GcuConfigDb(run=run_in_process).apply(RUNNING, bad, INTENDED)
    assert raised.value.state == "failed"
    assert "--dry-run refused" in str(raised.value)
    assert store.read() == RUNNING
    assert subcommands(state) == ["checkpoint", "apply-patch", "delete-checkpoint"]


def test_a_drifting_read_back_rolls_back_to_the_checkpoint(
    standin: tuple[Path, RedisConfigDb], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, store = standin
    monkeypatch.setenv(DRIFT_ENV, "VRF|Vrf5001")
    with pytest.raises(StoreError) as raised:
        GcuConfigDb(run=run_in_process).apply(RUNNING, PATCH, INTENDED)
    assert raised.value.state == "rolled_back"
    assert "VRF|Vrf5001" in str(raised.value)
    assert store.read() == RUNNING
    assert subcommands(state)[-2:] == ["rollback", "delete-checkpoint"]


def test_a_failed_rollback_keeps_the_checkpoint(
    standin: tuple[Path, RedisConfigDb], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, _ = standin
    monkeypatch.setenv(DRIFT_ENV, "VRF|Vrf5001")
    monkeypatch.setenv(FAIL_ENV, "rollback")
    with pytest.raises(StoreError) as raised:
        GcuConfigDb(run=run_in_process).apply(RUNNING, PATCH, INTENDED)
    assert raised.value.state == "failed"
    assert "kept for the operator" in str(raised.value)
    assert len(list(state.glob("*.cp.json"))) == 1


def test_undo_after_a_finished_apply_rolls_back(standin: tuple[Path, RedisConfigDb]) -> None:
    _, store = standin
    gcu = GcuConfigDb(run=run_in_process)
    applied = gcu.apply(RUNNING, PATCH, INTENDED)
    with pytest.raises(StoreError) as raised:
        gcu.undo(applied, "FRR did not match")
    assert raised.value.state == "rolled_back"
    assert store.read() == RUNNING
