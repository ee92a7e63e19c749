"""The agent's cycle against a fake server and a fake OpenSM that programs what it reads."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent import install
from agent.loop import run_loop
from agent.opensm import Agent
from agent.plan import plan
from agent.state import load_state

from .fakes import (
    ACME,
    GLOBEX,
    OPTIONS,
    SM_GUID,
    Clock,
    FakeHost,
    FakeServer,
    bundle,
    partitions,
    settings,
)

KEY = Ed25519PrivateKey.generate()


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def server() -> FakeServer:
    return FakeServer(KEY)


@pytest.fixture
def host(conf_dir: Path) -> FakeHost:
    return FakeHost(conf_dir)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def agent_for(conf_dir, server, host, clock=None, **changes) -> Agent:
    return Agent(
        settings(conf_dir, KEY, **changes),
        server,
        host,
        clock=clock or Clock(),
        rng=random.Random(7),
    )


def installed(conf_dir: Path) -> dict[str, str]:
    names = ("opensm.conf", "partitions.conf", "qos-policy.conf")
    return {n: (conf_dir / n).read_text() for n in names if (conf_dir / n).exists()}


# ---------------------------------------------------------------------------------- applied


def test_the_master_installs_sweeps_reads_back_and_reports_applied(conf_dir, server, host):
    digest = server.publish(bundle(partitions(ACME)))

    result = agent_for(conf_dir, server, host).cycle()

    assert result.ok and result.outcome == "applied"
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME)
    assert host.hups == 1
    [report] = server.reports
    assert report["state"] == "applied" and report["digest"] == digest
    assert report["observed_digest"] == digest and report["role"] == "master"
    assert report["mismatches"] == [] and report["ports_read"] == 5
    assert {"fetch", "download", "install", "sweep", "readback", "total"} <= set(
        report["durations"]
    )


def test_a_second_cycle_with_the_same_manifest_has_nothing_to_do(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()

    result = agent.cycle()

    assert result.outcome == "nothing" and result.ok
    assert host.hups == 1 and len(server.reports) == 1
    assert server.heartbeats == 1  # the same report again: the service moves last-seen only


def test_a_new_agent_process_sees_the_installed_files_and_does_nothing(conf_dir, server, host):
    digest = server.publish(bundle(partitions(ACME)))
    agent_for(conf_dir, server, host).cycle()

    assert agent_for(conf_dir, server, host).cycle().outcome == "nothing"
    assert host.hups == 1
    # ...but it says it is alive, with the state it finds settled and the role it reads now
    assert server.heartbeats == 1
    assert (server.reports[-1]["state"], server.reports[-1]["digest"]) == ("applied", digest)


def test_an_idle_agent_reports_its_settled_state_every_cycle(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()

    for _ in range(3):
        assert agent.cycle().outcome == "nothing"

    assert server.states == ["applied"] and server.heartbeats == 3


def test_a_new_snapshot_with_the_same_files_is_reported_without_a_sweep(conf_dir, server, host):
    # e.g. a cable moved: the snapshot's digest changes, the rendered OpenSM files do not
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    moved = server.publish(bundle(partitions(ACME)), digest="sha256:" + "c" * 64)

    assert agent.cycle().outcome == "nothing" and host.hups == 1

    report = server.reports[-1]
    assert (report["state"], report["digest"], report["observed_digest"]) == (
        "applied",
        moved,
        moved,
    )
    assert load_state(conf_dir).installed_digest == moved
    assert agent_for(conf_dir, server, host).cycle().outcome == "nothing"  # and after a restart
    assert server.reports[-1]["digest"] == moved


def test_only_changed_files_are_downloaded_and_the_previous_generation_is_kept(
    conf_dir, server, host
):
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    server.publish(bundle(partitions(ACME, GLOBEX)))
    server.tamper["opensm/opensm.conf"] = b"would be refused if downloaded"

    assert agent.cycle().outcome == "applied"
    assert (conf_dir / "partitions.conf.prev").read_text() == partitions(ACME)
    assert not (conf_dir / "opensm.conf.prev").exists()


def test_a_standby_installs_without_a_sweep_and_reports_applied(conf_dir, server, host):
    host.role_name = "standby"
    server.publish(bundle(partitions()))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    hups = host.hups
    server.publish(bundle(partitions(ACME)))

    result = agent.cycle()

    assert result.outcome == "applied" and host.hups == hups  # opensm.conf did not change
    assert server.reports[-1]["role"] == "standby" and server.reports[-1]["ports_read"] == 0
    assert "durations" in server.reports[-1] and "sweep" not in server.reports[-1]["durations"]
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME)


def test_a_standby_reloads_a_new_opensm_conf_so_it_keeps_the_masters_sm_key(conf_dir, server, host):
    host.role_name = "standby"
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    hups = host.hups
    server.publish(bundle(partitions(ACME), OPTIONS.replace("0x00000000000000ab", "0x0cd")))

    result = agent.cycle()

    assert result.outcome == "applied" and host.hups == hups + 1
    assert "SIGHUP reloaded its options" in server.reports[-1]["detail"]
    assert "sweep" not in server.reports[-1]["durations"]
    assert "m_key 0x0cd" in installed(conf_dir)["opensm.conf"]


def test_a_standby_that_becomes_master_sweeps_and_reads_back(conf_dir, server, host):
    host.role_name = "standby"
    digest = server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    hups = host.hups  # the standby reloaded the new opensm.conf
    host.role_name = "master"  # the master died; this OpenSM took over

    assert agent.cycle().outcome == "applied"

    assert host.hups == hups + 1 and host.reads == 5
    report = server.reports[-1]
    assert (report["role"], report["observed_digest"]) == ("master", digest)
    assert agent.cycle().outcome == "nothing" and host.hups == hups + 1  # settled as master


def test_a_new_process_on_a_standby_turned_master_reads_back_too(conf_dir, server, host):
    host.role_name = "standby"
    server.publish(bundle(partitions(ACME)))
    agent_for(conf_dir, server, host).cycle()
    hups = host.hups
    host.role_name = "master"

    assert agent_for(conf_dir, server, host).cycle().outcome == "applied"
    assert host.hups == hups + 1 and server.reports[-1]["role"] == "master"


def test_the_changed_ports_and_a_sample_are_read_without_full(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    agent_for(conf_dir, server, host, full=False, sample=1).cycle()

    assert server.reports[0]["ports_read"] == 3  # 0xa1, 0xa2 changed, one sampled


# ---------------------------------------------------------------------------------- refused


def test_a_manifest_signed_by_another_key_is_refused_and_nothing_installed(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)), key=Ed25519PrivateKey.generate())

    result = agent_for(conf_dir, server, host).cycle()

    assert result.outcome == "refused" and not result.ok
    assert installed(conf_dir) == {} and host.hups == 0
    assert server.reports[0]["digest"] is None
    assert "signature verification failed" in server.reports[0]["detail"]


def test_a_manifest_for_another_fabric_is_refused(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host, fabric="ib-west")

    assert agent.cycle().outcome == "refused"
    assert "ib-west" in server.reports[0]["detail"] and installed(conf_dir) == {}


def test_a_download_with_the_wrong_sha256_is_refused_and_nothing_installed(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    server.tamper["opensm/partitions.conf"] = partitions(ACME, GLOBEX).encode()

    result = agent_for(conf_dir, server, host).cycle()

    assert result.outcome == "refused"
    assert "does not match the signed manifest" in server.reports[0]["detail"]
    assert installed(conf_dir) == {}


def test_a_download_corrupted_once_is_tried_again_with_the_same_manifest(conf_dir, server, host):
    server.publish(bundle(partitions()))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    digest = server.publish(bundle(partitions(ACME)))
    server.tamper["opensm/partitions.conf"] = b"garbage"
    assert agent.cycle().outcome == "refused"
    server.tamper.clear()  # the server (or the proxy) serves the right bytes again

    assert agent.cycle().outcome == "applied"
    assert server.reports[-1]["digest"] == digest
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME)


def test_a_signed_fail_open_partitions_file_is_refused(conf_dir, server, host):
    (conf_dir / "partitions.conf").write_text(partitions(ACME))
    digest = server.publish(bundle("Default=0x7fff : ALL=full ;\n"))

    result = agent_for(conf_dir, server, host).cycle()

    assert result.outcome == "refused" and server.reports[0]["digest"] == digest
    assert "default-all-full" in server.reports[0]["detail"]
    assert installed(conf_dir) == {"partitions.conf": partitions(ACME)}


def test_a_refused_snapshot_is_not_tried_again_by_the_same_agent(conf_dir, server, host):
    server.publish(bundle("Default=0x7fff : ALL=full ;\n"))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()

    assert agent.cycle().outcome == "refused"
    assert len(server.reports) == 1


def test_a_replayed_older_manifest_is_refused_and_nothing_installed(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    old = dict(server.envelope)  # signed, so a tampered server can serve it again later
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    server.publish(bundle(partitions()))  # acme offboarded
    assert agent.cycle().outcome == "applied"
    server.envelope = old

    result = agent.cycle()

    assert result.outcome == "refused" and host.hups == 2
    assert "older than the installed one" in server.reports[-1]["detail"]
    assert installed(conf_dir)["partitions.conf"] == partitions()
    assert 0x8101 not in host.programmed[0xA1]
    # a new process remembers it too (the sequence is in the state file)
    assert agent_for(conf_dir, server, host).cycle().outcome == "refused"
    assert installed(conf_dir)["partitions.conf"] == partitions()


def test_a_manifest_with_the_installed_sequence_is_accepted(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)), sequence=7)
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    server.publish(bundle(partitions(ACME, GLOBEX)), sequence=7)  # e.g. re-signed, same index

    assert agent.cycle().outcome == "applied"
    assert load_state(conf_dir).installed_sequence == 7


def test_an_up_to_date_cycle_remembers_a_newer_sequence(conf_dir, server, host):
    # A -> B -> A while the agent slept: the files equal the newest manifest, so B (older) is a
    # replay even though this agent never installed B.
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    server.publish(bundle(partitions(ACME, GLOBEX)))
    stale = dict(server.envelope)
    server.publish(bundle(partitions(ACME)))
    assert agent.cycle().outcome == "nothing"
    server.envelope = stale

    assert agent.cycle().outcome == "refused"
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME)


def test_a_held_refusal_is_reported_again_every_cycle(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    server.publish(bundle(partitions(ACME, GLOBEX)), key=Ed25519PrivateKey.generate())
    assert agent.cycle().outcome == "refused"

    for _ in range(3):
        assert agent.cycle().outcome == "refused"

    # the same report again: the service moves last_seen_at, so the agent does not look dead
    assert server.states == ["applied", "refused"] and server.heartbeats == 3


def test_after_a_replay_of_the_same_snapshot_the_agent_reports_its_settled_state_again(
    conf_dir, server, host
):
    server.publish(bundle(partitions(ACME)))
    old = dict(server.envelope)
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    server.publish(bundle(partitions(ACME, GLOBEX)))
    agent.cycle()
    current = server.publish(bundle(partitions(ACME)))  # the state recurs: same digest
    agent.cycle()
    envelope, server.envelope = server.envelope, old
    assert agent.cycle().outcome == "refused" and server.reports[-1]["digest"] == current
    server.envelope = envelope

    assert agent.cycle().outcome == "nothing"
    assert (server.reports[-1]["state"], server.reports[-1]["digest"]) == ("applied", current)


# ------------------------------------------------------------------------ failed, restarts


def test_opensm_not_running_is_failed_never_applied(conf_dir, server, host):
    host.running = False
    server.publish(bundle(partitions(ACME)))

    result = agent_for(conf_dir, server, host).cycle()

    assert result.outcome == "failed" and not result.ok
    assert "OpenSM is not running" in server.reports[0]["detail"]


def test_opensm_reading_another_directory_fails_and_nothing_is_installed(conf_dir, server, host):
    host.argv = ("/usr/sbin/opensm", "-F", f"{conf_dir}/opensm.conf", "-P", "/etc/x/p.conf")
    server.publish(bundle(partitions(ACME)))

    result = agent_for(conf_dir, server, host).cycle()

    assert result.outcome == "failed" and "/etc/x/p.conf" in result.detail
    assert installed(conf_dir) == {}


def test_a_restart_only_option_that_differs_is_restart_required(conf_dir, server, host):
    (conf_dir / "opensm.conf").write_text(OPTIONS)
    server.publish(bundle(partitions(ACME), options=OPTIONS.replace("FALSE", "TRUE")))

    result = agent_for(conf_dir, server, host).cycle()

    assert result.outcome == "restart_required" and not result.ok
    assert "allow_both_pkeys: FALSE -> TRUE" in server.reports[0]["detail"]
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME)


def test_after_opensm_restarts_with_the_new_options_the_agent_applies(conf_dir, server, host):
    (conf_dir / "opensm.conf").write_text(OPTIONS)
    server.publish(bundle(partitions(ACME), options=OPTIONS.replace("FALSE", "TRUE")))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    assert agent.cycle().outcome == "nothing"

    host.start_ticks += 1  # restarted: started with the installed opensm.conf

    assert agent.cycle().outcome == "applied"
    assert server.states == ["restart_required", "applied"]


def test_an_options_file_newer_than_the_process_is_noted(conf_dir, server, host):
    (conf_dir / "opensm.conf").write_text(OPTIONS)
    host.started_at = 0.0  # started in 1970: the file is newer
    server.publish(bundle(partitions(ACME)))

    agent_for(conf_dir, server, host).cycle()

    assert "modified after OpenSM" in server.reports[0]["detail"]
    started = load_state(conf_dir).started_with
    assert started is not None and started.conf_newer is True


def test_an_options_file_written_within_a_second_before_the_start_is_not_newer(
    conf_dir, server, host
):
    # /proc/stat's btime is whole seconds, so a start time computed from it can be up to a
    # second early: a file written 0.6 s before the real start looks 0.4 s "after" it.
    conf = conf_dir / "opensm.conf"
    conf.write_text(OPTIONS)
    host.started_at = conf.stat().st_mtime - 0.4
    server.publish(bundle(partitions(ACME)))

    agent_for(conf_dir, server, host).cycle()

    assert "modified after OpenSM" not in server.reports[0]["detail"]
    started = load_state(conf_dir).started_with
    assert started is not None and started.conf_newer is False


# ----------------------------------------------------------------------------- rolled back


def test_a_read_back_mismatch_restores_the_previous_files_and_reports_rolled_back(
    conf_dir, server, host
):
    first = server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    second = server.publish(bundle(partitions(ACME, GLOBEX)))
    host.lie_for, host.lie_times = 0xB1, 1

    result = agent.cycle()

    assert result.outcome == "rolled_back"
    report = server.reports[-1]
    assert report["digest"] == second and report["observed_digest"] == first
    assert report["mismatches"] == [
        {"guid": "0x00000000000000b1", "missing": [], "unexpected": ["0x8777"]}
    ]
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME)
    assert host.hups == 3
    assert host.programmed[0xB1] == {0x7FFF}  # the previous tables are back
    assert agent.cycle().outcome == "rolled_back" and host.hups == 3  # not retried


def test_a_rollback_reports_the_digest_whose_files_it_restored_not_the_last_applied(
    conf_dir, server, host
):
    # B is installed while OpenSM is down (failed, never applied); OpenSM restarts and programs
    # B. Then A comes back: its .prev files are B's, and B is what the fabric has after a rollback.
    first = server.publish(bundle(partitions()))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    second = server.publish(bundle(partitions(ACME)))
    host.running = False
    assert agent.cycle().outcome == "failed"
    host.running, host.start_ticks = True, 200
    host.program()
    assert server.publish(bundle(partitions())) == first
    host.lie_for, host.lie_times = 0xA2, 1

    assert agent.cycle().outcome == "rolled_back"

    assert server.reports[-1]["observed_digest"] == second
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME)
    assert 0x8101 in host.programmed[0xA1]
    assert load_state(conf_dir).installed_digest == second


def test_a_rollback_to_files_changed_by_hand_reports_no_observed_digest(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    server.publish(bundle(partitions(ACME, GLOBEX)))
    agent.cycle()
    # The rollback by hand of docs/operators/deploy-opensm.md:
    (conf_dir / "partitions.conf.prev").replace(conf_dir / "partitions.conf")
    server.publish(bundle(partitions(GLOBEX)))
    host.lie_for, host.lie_times = 0xB1, 1

    assert agent.cycle().outcome == "rolled_back"

    assert server.reports[-1]["observed_digest"] is None  # nobody knows which snapshot that is
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME)


def test_a_snapshot_re_signed_with_other_files_is_tried_again_after_a_rollback(
    conf_dir, server, host
):
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    digest = server.publish(bundle(partitions(ACME, GLOBEX)))
    host.lie_for, host.lie_times = 0xB1, 1
    assert agent.cycle().outcome == "rolled_back"
    # the M_Key changes: the service re-signs the same snapshot with another opensm.conf
    new_key = OPTIONS.replace("00ab", "00cd")
    server.publish(bundle(partitions(ACME, GLOBEX), options=new_key), digest=digest)

    assert agent.cycle().outcome == "applied"
    assert installed(conf_dir)["opensm.conf"] == new_key and host.hups == 4


def test_a_held_rollback_is_reported_again_every_cycle(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    server.publish(bundle(partitions(ACME, GLOBEX)))
    host.lie_for, host.lie_times = 0xB1, 1
    assert agent.cycle().outcome == "rolled_back"

    for _ in range(3):
        assert agent.cycle().outcome == "rolled_back"

    assert server.states == ["applied", "rolled_back"] and server.heartbeats == 3
    assert host.hups == 3  # reported again, not tried again


def test_a_configuration_error_in_the_log_rolls_back(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    agent.cycle()
    server.publish(bundle(partitions(ACME, GLOBEX)))
    host.sweep_errors = ["ERR AC14: QoS policy rule for a missing pkey"]

    assert agent.cycle().outcome == "rolled_back"
    assert "ERR AC14" in server.reports[-1]["detail"]


def test_a_mismatch_on_the_first_deployment_has_nothing_to_restore(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    host.lie_for, host.lie_times = SM_GUID, 1

    result = agent_for(conf_dir, server, host).cycle()

    assert result.outcome == "failed" and "no previous generation" in result.detail
    assert server.reports[0]["mismatches"][0]["guid"] == f"0x{SM_GUID:016x}"


# ----------------------------------------------------------------- crashes and coalescing


@pytest.mark.parametrize("step", ["tmp-written", "prev-kept", "renamed", "installed"])
def test_a_crash_at_any_install_step_leaves_whole_files_and_the_next_cycle_converges(
    conf_dir, server, host, monkeypatch, step
):
    server.publish(bundle(partitions(ACME)))
    agent_for(conf_dir, server, host).cycle()
    digest = server.publish(bundle(partitions(ACME, GLOBEX)))

    def crash(at: str) -> None:
        if at == step:
            raise SystemExit(f"killed at {at}")

    monkeypatch.setattr(install, "pause_point", crash)
    monkeypatch.setattr("agent.opensm.pause_point", crash)
    with pytest.raises(SystemExit):
        agent_for(conf_dir, server, host).cycle()
    assert installed(conf_dir)["partitions.conf"] in (partitions(ACME), partitions(ACME, GLOBEX))
    monkeypatch.undo()

    result = agent_for(conf_dir, server, host).cycle()

    assert result.outcome == "applied" and server.reports[-1]["digest"] == digest
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME, GLOBEX)
    assert host.programmed[0xB1] == {0x7FFF, 0x8102}


def test_a_rollback_after_a_resumed_install_restores_every_file_of_the_first_attempt(
    conf_dir, server, host, monkeypatch
):
    first = server.publish(bundle(partitions(ACME)))
    agent_for(conf_dir, server, host).cycle()
    server.publish(bundle(partitions(ACME, GLOBEX), options=OPTIONS.replace("00ab", "00cd")))

    def crash(at: str) -> None:
        if at == "renamed":  # opensm.conf is in place, partitions.conf not yet
            raise SystemExit("killed")

    monkeypatch.setattr(install, "pause_point", crash)
    with pytest.raises(SystemExit):
        agent_for(conf_dir, server, host).cycle()
    monkeypatch.undo()
    host.lie_for, host.lie_times = 0xB1, 1

    assert agent_for(conf_dir, server, host).cycle().outcome == "rolled_back"

    assert installed(conf_dir)["opensm.conf"] == OPTIONS
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME)
    assert server.reports[-1]["observed_digest"] == first


def test_changes_within_the_min_interval_coalesce_into_one_apply(conf_dir, server, host, clock):
    agent = agent_for(conf_dir, server, host, clock, min_interval=5.0)
    server.publish(bundle(partitions(ACME)))
    assert agent.cycle(coalesce=True).outcome == "applied"

    server.publish(bundle(partitions(ACME, GLOBEX)))
    clock.advance(1)
    assert agent.cycle(coalesce=True).outcome == "waiting"
    last = server.publish(bundle(partitions(GLOBEX)))
    clock.advance(1)
    assert agent.cycle(coalesce=True).outcome == "waiting"
    clock.advance(3)

    assert agent.cycle(coalesce=True).outcome == "applied"
    assert server.states == ["applied", "applied"] and server.reports[-1]["digest"] == last
    assert host.hups == 2


def test_the_loop_survives_an_unreachable_server_and_resends_reports(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    server.reports_down = True
    agent = agent_for(conf_dir, server, host)
    naps: list[float] = []

    run_loop(agent, 2.0, sleep=naps.append, cycles=1)
    server.reports_down, server.down = False, True
    run_loop(agent, 2.0, sleep=naps.append, cycles=1)

    assert server.states == ["applied"] and naps == [2.0, 2.0]


def test_the_loop_survives_an_unexpected_error(conf_dir, server, host, monkeypatch):
    server.publish(bundle(partitions(ACME)))
    agent = agent_for(conf_dir, server, host)
    monkeypatch.setattr(host, "ca_ports", lambda: 1 / 0)
    said: list[str] = []
    agent.say = said.append

    run_loop(agent, 1.0, sleep=lambda _s: None, cycles=2)

    assert any("ZeroDivisionError" in line for line in said)


# --------------------------------------------------------------------------------------- plan


def test_plan_prints_diffs_and_tenants_and_installs_nothing(conf_dir, server, host):
    (conf_dir / "partitions.conf").write_text(partitions(ACME))
    (conf_dir / "opensm.conf").write_text(OPTIONS)
    server.publish(bundle(partitions(ACME, GLOBEX), options=OPTIONS.replace("00ab", "00cd")))
    lines: list[str] = []

    status = plan(settings(conf_dir, KEY), server, lines.append)

    text = "\n".join(lines)
    assert status == 0
    assert "+tenant_globex=0x0102, ipoib :" in text
    assert "reachability changes for: tenant:globex" in text
    assert "00cd" not in text and "+m_key <secret " in text
    assert installed(conf_dir)["partitions.conf"] == partitions(ACME)
    assert server.reports == [] and host.hups == 0


def test_plan_of_a_fail_open_file_says_it_would_be_refused(conf_dir, server, host):
    server.publish(bundle("Default=0x7fff : ALL=full ;\n"))
    lines: list[str] = []

    assert plan(settings(conf_dir, KEY), server, lines.append) == 1
    assert "refused" in lines[0] and installed(conf_dir) == {}


def test_a_file_that_cannot_be_written_is_failed_and_reported(conf_dir, server, host, monkeypatch):
    server.publish(bundle(partitions(ACME)))

    def full_disk(target: Path, content: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("agent.opensm.install_file", full_disk)

    result = agent_for(conf_dir, server, host).cycle()

    assert result.outcome == "failed" and "No space left" in result.detail
    assert server.states == ["failed"] and host.hups == 0


def test_plan_of_an_older_manifest_says_it_would_be_refused(conf_dir, server, host):
    server.publish(bundle(partitions(ACME)))
    old = dict(server.envelope)
    server.publish(bundle(partitions()))
    agent_for(conf_dir, server, host).cycle()
    server.envelope = old
    lines: list[str] = []

    assert plan(settings(conf_dir, KEY), server, lines.append) == 1
    assert "older than the installed one" in lines[0]
