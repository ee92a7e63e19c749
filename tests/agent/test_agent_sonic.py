"""The SONiC leaf agent's cycle: a fake service with phases, a real redis-server, fake FRR."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.config_db import ConfigDb, RedisConfigDb, touched
from agent.frr import FrrLeaf, FrrTools
from agent.loop import run_loop
from agent.sonic import SonicAgent, SonicSettings
from agent.sonic_state import load_sonic_state
from agent.trust import Trust
from policies.evidence.key_transition import sign_transition
from policies.evidence.keyring import Retirement
from tests.agent.fakes import FABRIC
from tests.agent.redis_server import RedisServer, running_redis
from tests.agent.sonic_fakes import (
    ACME,
    DECLARED,
    FOREIGN,
    FRR_ACME,
    FRR_ACME_GRANT,
    FRR_BASE,
    LEAF,
    FakeDaemons,
    FakeSonicServer,
    document,
    leaf_bundle,
)

KEY = Ed25519PrivateKey.generate()
BASE = document(DECLARED, FOREIGN)
WITH_ACME = document(DECLARED, FOREIGN, ACME)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as started:
        yield started


@dataclass
class Leaf:
    """One leaf: the service, its CONFIG_DB, its FRR, the agent."""

    server: FakeSonicServer
    store: RedisConfigDb
    daemons: FakeDaemons
    conf: Path
    agent: SonicAgent

    def publish(self, config_db: ConfigDb, frr: str = FRR_BASE, phase: int | None = 2) -> str:
        self.server.phase = phase
        return self.server.publish(leaf_bundle(json.dumps(config_db), frr))

    def cycle(self) -> str:
        return self.agent.cycle().outcome

    @property
    def last(self) -> dict[str, Any]:
        return self.server.reports[-1]


def make_leaf(
    redis_server: RedisServer, tmp_path: Path, running: ConfigDb, frr: str, **settings: Any
) -> Leaf:
    redis_server.client().flushall()
    store = RedisConfigDb.from_url(redis_server.url())
    store.write(*touched({}, running))
    conf = tmp_path / "frr.conf"
    conf.write_text(frr)
    daemons = FakeDaemons(running=frr)
    server = FakeSonicServer(KEY)
    frr_leaf = FrrLeaf(conf, FrrTools(), run=daemons)
    options = SonicSettings(FABRIC, LEAF, Trust.of([KEY.public_key()]), tmp_path, **settings)
    return Leaf(server, store, daemons, conf, SonicAgent(options, server, store, frr_leaf))


@pytest.fixture
def leaf(redis_server: RedisServer, tmp_path: Path) -> Leaf:
    return make_leaf(redis_server, tmp_path, BASE, FRR_BASE)


def test_phase_2_onboards_a_tenant_and_keeps_foreign_keys(leaf: Leaf) -> None:
    digest = leaf.publish(WITH_ACME, FRR_ACME)
    assert leaf.cycle() == "applied"
    assert leaf.last["phase"] == 2 and leaf.last["observed_digest"] == digest
    assert "add /VRF" in leaf.last["detail"] and "frr.conf reloaded" in leaf.last["detail"]
    assert leaf.store.read() == WITH_ACME
    assert leaf.conf.read_text() == FRR_ACME
    assert load_sonic_state(leaf.conf.parent).applied_digest == digest
    assert leaf.cycle() == "nothing"  # read back in place: the report is repeated only
    assert leaf.server.states == ["applied"] and leaf.server.heartbeats == 1
    assert leaf.last["covers"] == ["config_db", "frr"]


def test_without_frr_conf_the_reports_cover_config_db_only(leaf: Leaf) -> None:
    config_db_only = SonicAgent(leaf.agent.settings, leaf.server, leaf.store, None)
    leaf.publish(WITH_ACME, FRR_ACME)

    assert config_db_only.cycle().outcome == "applied"

    assert leaf.last["covers"] == ["config_db"] and "frr.conf left as it is" in leaf.last["detail"]
    assert leaf.conf.read_text() == FRR_BASE


def test_phase_1_removes_access_only_then_phase_2_offboards(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    leaf = make_leaf(redis_server, tmp_path, WITH_ACME, FRR_ACME_GRANT)
    leaf.publish(BASE, FRR_BASE, phase=1)
    assert leaf.cycle() == "applied"
    assert leaf.last["phase"] == 1 and leaf.last["observed_digest"] is None
    running = leaf.store.read()
    assert "VLAN_MEMBER" not in running and running["VRF"] == ACME["VRF"]
    assert leaf.conf.read_text() == FRR_ACME  # the grant's import and its label are gone
    assert leaf.cycle() == "nothing"
    leaf.server.phase = 2
    assert leaf.cycle() == "applied"
    assert leaf.store.read() == BASE and leaf.conf.read_text() == FRR_BASE


def test_a_disruptive_patch_is_refused_without_the_flag(leaf: Leaf) -> None:
    port_change = document(DECLARED, {"PORT": {"Ethernet0": {"mtu": "9216"}}}, ACME)
    leaf.publish(port_change, FRR_ACME)
    assert leaf.cycle() == "refused"
    assert "replace /PORT/Ethernet0/mtu" in leaf.last["detail"]
    assert leaf.store.read() == BASE and leaf.conf.read_text() == FRR_BASE


def test_the_flag_applies_a_disruptive_patch(redis_server: RedisServer, tmp_path: Path) -> None:
    leaf = make_leaf(redis_server, tmp_path, BASE, FRR_BASE, allow_disruptive=True)
    leaf.publish(document(DECLARED, {"PORT": {"Ethernet0": {"mtu": "9216"}}}), FRR_BASE)
    assert leaf.cycle() == "applied"
    assert leaf.store.read()["PORT"]["Ethernet0"] == {"mtu": "9216"}
    assert leaf.store.read()["NTP_SERVER"] == FOREIGN["NTP_SERVER"]


def test_an_frr_mismatch_rolls_back_the_leaf_as_a_whole(leaf: Leaf) -> None:
    leaf.daemons.lose = " vni 5001\n"
    leaf.publish(WITH_ACME, FRR_ACME)
    assert leaf.cycle() == "rolled_back"
    assert "vrf Vrf5001 > vni 5001" in leaf.last["detail"]
    assert leaf.store.read() == BASE and leaf.conf.read_text() == FRR_BASE
    assert leaf.daemons.running.endswith(FRR_BASE)
    assert leaf.cycle() == "rolled_back"  # held: not tried again by this process
    assert leaf.store.read() == BASE


def test_a_write_failure_reports_failed_and_changes_nothing(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    leaf = make_leaf(redis_server, tmp_path, BASE, FRR_BASE)
    leaf.agent.store = RedisConfigDb.from_url(redis_server.reader_url())
    leaf.publish(WITH_ACME, FRR_ACME)
    assert leaf.cycle() == "failed"
    assert "NoPermissionError" in leaf.last["detail"]
    assert leaf.store.read() == BASE and leaf.conf.read_text() == FRR_BASE


def test_the_agent_waits_for_sync_to_desire_the_manifest(leaf: Leaf) -> None:
    leaf.publish(WITH_ACME, FRR_ACME)
    leaf.server.desired = "sha256:" + "0" * 64
    assert leaf.cycle() == "not_desired"
    assert leaf.server.reports == [] and leaf.store.read() == BASE


def test_an_older_sequence_and_a_tampered_file_are_refused(leaf: Leaf) -> None:
    leaf.publish(WITH_ACME, FRR_ACME)
    assert leaf.cycle() == "applied"
    leaf.server.publish(leaf_bundle(json.dumps(BASE), FRR_BASE), sequence=0)
    assert leaf.cycle() == "refused" and "older" in leaf.last["detail"]
    leaf.publish(BASE, FRR_BASE)
    leaf.server.tamper[f"sonic/{LEAF}/config_db.json"] = b"{}"
    result = leaf.agent.cycle()  # the same files as the replay: the service counts a repeat
    assert result.outcome == "refused" and "sha256" in result.detail
    assert leaf.store.read() == WITH_ACME


def test_a_manifest_without_this_leafs_files_is_refused(leaf: Leaf) -> None:
    leaf.server.publish({"sonic/leaf02/config_db.json": b"{}\n"})
    assert leaf.cycle() == "refused"
    assert "must list" in leaf.last["detail"]


def test_frr_down_restores_config_db_and_reports_failed(leaf: Leaf) -> None:
    leaf.daemons.fail_reload = True  # the previous file cannot be reloaded either
    leaf.publish(WITH_ACME, FRR_ACME)
    assert leaf.cycle() == "failed"
    assert "reloading the previous frr.conf failed" in leaf.last["detail"]
    assert "previous content is back" in leaf.last["detail"]
    assert leaf.store.read() == BASE and leaf.conf.read_text() == FRR_BASE


def test_frr_drift_is_reloaded_without_touching_the_previous_file(leaf: Leaf) -> None:
    leaf.publish(WITH_ACME, FRR_ACME)
    assert leaf.cycle() == "applied"
    leaf.daemons.running = FRR_BASE  # someone reloaded another file by hand
    assert leaf.cycle() == "applied"  # the same report again: the service counts a repeat
    assert leaf.daemons.running.endswith(FRR_ACME)
    assert (leaf.conf.parent / "frr.conf.prev").read_text() == FRR_BASE


def test_the_loop_runs_sonic_cycles_every_interval(leaf: Leaf) -> None:
    leaf.publish(WITH_ACME, FRR_ACME)
    leaf.server.desired = "sha256:" + "0" * 64  # not desired yet: the loop must not spin
    sleeps: list[float] = []
    run_loop(leaf.agent, 7.0, sleep=sleeps.append, cycles=2)
    assert sleeps == [7.0, 7.0] and leaf.server.reports == []
    leaf.server.desired = None
    run_loop(leaf.agent, 7.0, sleep=sleeps.append, cycles=1)
    assert leaf.server.states == ["applied"] and leaf.store.read() == WITH_ACME


def test_a_report_the_service_did_not_take_is_sent_next_cycle(leaf: Leaf) -> None:
    leaf.publish(WITH_ACME, FRR_ACME)
    leaf.server.reports_down = True
    assert leaf.cycle() == "applied" and leaf.server.reports == []
    leaf.server.reports_down = False
    assert leaf.cycle() == "nothing"
    assert leaf.server.states == ["applied"] and leaf.server.reports[0]["phase"] == 2


def test_an_frr_only_change_that_fails_rolls_back_frr_alone(leaf: Leaf) -> None:
    leaf.publish(BASE, FRR_ACME)  # CONFIG_DB already holds BASE: FRR changes alone
    leaf.daemons.lose = " vni 5001\n"
    assert leaf.cycle() == "rolled_back"
    assert "CONFIG_DB was not changed" in leaf.last["detail"]
    assert leaf.store.read() == BASE and leaf.conf.read_text() == FRR_BASE


def test_the_leaf_agent_follows_a_key_rotation_and_then_refuses_the_retired_key(
    leaf: Leaf,
) -> None:
    new = Ed25519PrivateKey.generate()
    bounds = Retirement(datetime(2026, 12, 6, tzinfo=UTC), epoch=0, log_size=10)
    leaf.server.transitions.append(sign_transition(("audit", KEY), ("audit.r2", new), bounds))
    leaf.server.key = new
    leaf.publish(WITH_ACME, FRR_ACME)

    assert leaf.cycle() == "applied"
    assert [e.retired for e in leaf.agent.settings.keys.entries] == [bounds, None]
    leaf.server.key = KEY  # whoever kept the retired key signs a later manifest
    leaf.publish(BASE, FRR_BASE)
    assert leaf.cycle() == "refused"
    assert leaf.store.read() == WITH_ACME
