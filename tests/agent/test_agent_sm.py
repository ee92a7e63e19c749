"""Facts about the local OpenSM: pid, process identity, role, and the sweep in its log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent.sm import (
    SmError,
    SmLocator,
    SmLog,
    parse_sminfo,
    read_process,
    wait_for_sweep,
)


def fake_proc(root: Path, pid: int, argv: list[str], ticks: int = 500) -> Path:
    (root / str(pid)).mkdir(parents=True)
    fields = ["S", *["0"] * 18, str(ticks), "0"]
    (root / str(pid) / "stat").write_text(f"{pid} (open sm) {' '.join(fields)}\n")
    (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    os.symlink("/var/lib/opensm", root / str(pid) / "cwd")
    (root / "stat").write_text("cpu 1 2 3\nbtime 1700000000\n")
    return root


def test_the_process_identity_comes_from_proc(tmp_path: Path):
    proc = fake_proc(tmp_path, 42, ["/usr/sbin/opensm", "-F", "/etc/opensm/opensm.conf"])

    facts = read_process(42, proc)

    assert facts.pid == 42 and facts.start_ticks == 500
    assert facts.argv == ("/usr/sbin/opensm", "-F", "/etc/opensm/opensm.conf")
    assert facts.started_at == 1700000000 + 500 / os.sysconf("SC_CLK_TCK")
    assert facts.cwd == Path("/var/lib/opensm")


def test_a_dead_pid_is_opensm_not_running(tmp_path: Path):
    with pytest.raises(SmError, match="not running"):
        read_process(42, tmp_path)


def test_a_pid_file_naming_another_program_is_refused(tmp_path: Path):
    pid_file = tmp_path / "opensm.pid"
    pid_file.write_text(f"{os.getpid()}\n")

    with pytest.raises(SmError, match="not opensm"):
        SmLocator(pid_file=pid_file).process()


def test_a_missing_pid_file_is_opensm_not_running(tmp_path: Path):
    with pytest.raises(SmError, match="not running"):
        SmLocator(pid_file=tmp_path / "none.pid").process()


def test_the_systemd_unit_gives_the_main_pid_and_takes_the_signal(tmp_path: Path):
    calls = tmp_path / "calls"
    systemctl = tmp_path / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho 0\n')
    systemctl.chmod(0o755)
    locator = SmLocator(unit="opensm@0x1234", systemctl=str(systemctl))

    with pytest.raises(SmError, match="MainPID 0"):
        locator.process()

    assert calls.read_text() == "show -p MainPID --value opensm@0x1234\n"


def test_sighup_reaches_the_process_of_the_pid_file(tmp_path: Path):
    script = "import signal,sys,time\nsignal.signal(signal.SIGHUP, lambda *a: sys.exit(7))\n"
    argv = [sys.executable, "-c", script + "print(1, flush=True)\ntime.sleep(30)"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == b"1\n"
            SmLocator(pid_file=tmp_path / "pid").hup(read_process(child.pid))
            assert child.wait(timeout=10) == 7
        finally:
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("text", "role"),
    [
        ("sminfo: sm lid 1 sm guid 0x100001, activity count 747 priority 10 state 3 "
         "SMINFO_MASTER\n", "master"),
        ("sminfo: sm lid 0 sm guid 0x100023, activity count 317 priority 1 state 2 "
         "SMINFO_STANDBY\n", "standby"),
        ("sminfo: sm lid 0 sm guid 0x100023, activity count 0 priority 1 state 1 "
         "SMINFO_DISCOVERING\n", "unknown"),
        ("sminfo: iberror: failed: query\n", "unknown"),
    ],
)  # fmt: skip
def test_the_role_is_the_local_sms_state(text: str, role: str):
    assert parse_sminfo(text)[0] == role


def test_sminfo_names_the_local_port_guid():
    text = "sminfo: sm lid 0 sm guid 0x100023, activity count 317 priority 1 state 2 x\n"

    assert parse_sminfo(text) == ("standby", 0x100023)


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_sweep_is_the_first_subnet_up_after_the_offset(tmp_path: Path):
    log = SmLog(tmp_path / "opensm.log")
    log.path.write_text("old SUBNET UP\n")
    offset = log.offset()
    ticks = Ticks()

    def sleep(seconds: float) -> None:
        ticks.sleep(seconds)
        with log.path.open("a") as handle:
            handle.write("ERR 0510: failed\nSUBNET UP\n")

    text = wait_for_sweep(log, offset, 60, clock=ticks, sleep=sleep)

    assert text == "ERR 0510: failed\nSUBNET UP\n"


def test_no_subnet_up_within_the_timeout_is_an_error(tmp_path: Path):
    log = SmLog(tmp_path / "opensm.log")
    log.path.write_text("SUBNET UP\n")
    ticks = Ticks()

    with pytest.raises(SmError, match="within 5 s"):
        wait_for_sweep(log, log.offset(), 5, clock=ticks, sleep=ticks.sleep)
    assert ticks.now >= 5


def test_a_truncated_log_is_read_from_its_start(tmp_path: Path):
    log = SmLog(tmp_path / "opensm.log")
    log.path.write_text("a long history\n" * 10)
    offset = log.offset()
    log.path.write_text("SUBNET UP\n")

    assert log.since(offset) == "SUBNET UP\n"
    assert SmLog(tmp_path / "none").since(0) == "" and SmLog(tmp_path / "none").offset() == 0
