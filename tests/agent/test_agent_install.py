"""Atomic installs: the target is never missing, empty or partial, and a generation is kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent import install
from agent.install import install_file, prev_path, restore_previous, sha256_of, tmp_path
from agent.state import AgentState, Pending, load_state, save_state

OLD, NEW = b"old generation\n", b"new generation\n"
STEPS = ("tmp-written", "prev-kept", "renamed")


class Killed(BaseException):
    """What kill -9 does to the install: it stops between two steps."""


def test_install_replaces_the_file_and_keeps_the_previous_generation(tmp_path: Path):
    target = tmp_path / "partitions.conf"
    target.write_bytes(OLD)
    target.chmod(0o640)

    install_file(target, NEW)

    assert target.read_bytes() == NEW and prev_path(target).read_bytes() == OLD
    assert target.stat().st_mode & 0o777 == 0o640
    assert not tmp_path.joinpath(".partitions.conf.isofabric-tmp").exists()


def test_a_first_install_has_no_previous_generation_and_is_private(tmp_path: Path):
    target = tmp_path / "opensm.conf"

    install_file(target, NEW)

    assert target.read_bytes() == NEW and not prev_path(target).exists()
    assert target.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("step", STEPS)
def test_killed_at_any_step_the_target_is_old_or_new_never_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
):
    target = tmp_path / "partitions.conf"
    target.write_bytes(OLD)

    def kill(at: str) -> None:
        if at == step:
            raise Killed

    monkeypatch.setattr(install, "pause_point", kill)
    with pytest.raises(Killed):
        install_file(target, NEW)

    assert target.read_bytes() == (NEW if step == "renamed" else OLD)
    monkeypatch.undo()
    install_file(target, NEW)  # the next cycle converges over the leftovers
    assert target.read_bytes() == NEW


def test_a_failing_rename_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    target = tmp_path / "partitions.conf"
    target.write_bytes(OLD)
    real_replace = os.replace

    def refuse(src, dst):
        if Path(dst) == target:
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        install_file(target, NEW)

    assert target.read_bytes() == OLD


def test_restore_puts_the_previous_generation_back_and_keeps_it(tmp_path: Path):
    target = tmp_path / "partitions.conf"
    target.write_bytes(OLD)
    install_file(target, NEW)

    assert restore_previous(target) is True

    assert target.read_bytes() == OLD and prev_path(target).read_bytes() == OLD
    assert not tmp_path_exists(target)


def test_restore_without_a_previous_generation_changes_nothing(tmp_path: Path):
    target = tmp_path / "partitions.conf"
    target.write_bytes(NEW)

    assert restore_previous(target) is False and target.read_bytes() == NEW


def test_sha256_of_a_missing_file_is_none(tmp_path: Path):
    assert sha256_of(tmp_path / "nothing") is None


def test_the_pause_point_sleeps_only_at_the_named_step(monkeypatch, capsys):
    naps: list[float] = []
    monkeypatch.setattr("agent.install.time.sleep", naps.append)
    monkeypatch.setenv(install.PAUSE_ENV, "renamed")
    monkeypatch.setenv(install.PAUSE_SECONDS_ENV, "0.5")

    install.pause_point("tmp-written")
    install.pause_point("renamed")

    assert naps == [0.5]
    assert capsys.readouterr().err == "isofabric-agent: paused at renamed\n"


def test_the_state_file_round_trips_and_an_unreadable_one_is_empty(tmp_path: Path):
    state = AgentState(pending=Pending("sha256:" + "0" * 64, ["partitions.conf"], None))
    save_state(tmp_path, state)

    assert load_state(tmp_path) == state
    (tmp_path / ".isofabric-agent.json").write_text("{not json")
    assert load_state(tmp_path) == AgentState()


def tmp_path_exists(target: Path) -> bool:
    return tmp_path(target).exists()


def test_a_state_file_written_before_installed_digest_and_sequence_loads(tmp_path: Path):
    digest = "sha256:" + "1" * 64
    settled = {"digest": digest, "files": {"partitions.conf": "0" * 64}, "pid": 7}
    old = {"applied_digest": digest, "settled": {**settled, "start_ticks": 9, "state": "applied"}}
    (tmp_path / ".isofabric-agent.json").write_text(json.dumps(old))

    state = load_state(tmp_path)

    assert state.settled is not None and state.settled.digest == digest
    assert state.installed_digest is None and state.installed_sequence is None
