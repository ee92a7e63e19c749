"""The agent's command line: bad options are usage errors (exit 2, no traceback), and ``--once``
says why it could not reach the service."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.command import agent_app
from tests.agent.conftest import UNREACHABLE

runner = CliRunner()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--interval", "0"),
        ("--interval", "-5"),
        ("--min-interval", "-1"),
        ("--sample", "-1"),
        ("--concurrency", "0"),
        ("--concurrency", "11"),
        ("--sweep-timeout", "0"),
    ],
)
def test_an_out_of_range_option_is_a_usage_error(base: list[str], option: str, value: str):
    extra = [] if option == "--interval" else ["--once"]

    result = runner.invoke(agent_app, [*base, *extra, option, value])

    assert result.exit_code == 2, result.output
    assert option in result.stderr and "Traceback" not in result.stderr
    assert isinstance(result.exception, SystemExit)  # a usage error, not a crash


def test_a_missing_public_key_or_conf_dir_is_a_usage_error(base: list[str], tmp_path: Path):
    for option in ("--public-key", "--conf-dir"):
        args = [*base, "--once"]
        args[args.index(option) + 1] = str(tmp_path / "missing")

        result = runner.invoke(agent_app, args)

        assert result.exit_code == 2, (option, result.output)
        assert option in result.stderr and "Traceback" not in result.stderr


def test_once_against_an_unreachable_server_says_so_and_exits_1(base: list[str]):
    result = runner.invoke(agent_app, [*base, "--once"])

    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "unreachable" in lines[0] and UNREACHABLE in lines[0]


@pytest.mark.parametrize("technology", ["opensm", "sonic"])
def test_the_shims_run_the_same_agent_commands(technology):
    """``isofabric agent …`` and ``python -m api.agent …`` are thin shims over isofabric-agent."""
    import subprocess
    import sys

    from cli import app

    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "TERM": "dumb"}
    script = Path(sys.executable).with_name("isofabric-agent")
    own = subprocess.run(
        [script, technology, "--help"], capture_output=True, text=True, env=env, check=True
    ).stdout
    shim = subprocess.run(
        [sys.executable, "-m", "api.agent", technology, "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    nested = CliRunner().invoke(app, ["agent", technology, "--help"], env=env, terminal_width=200)

    assert nested.exit_code == 0
    assert "--server" in own and "--public-key" in own
    assert own.replace("isofabric-agent", "isofabric agent") == shim
    for option in ("--server", "--fabric", "--target", "--public-key", "--once", "--interval"):
        assert option in nested.output
