"""The example systemd unit (examples/systemd/) is one systemd accepts and runs our real CLI.

`systemd-analyze verify` reads the unit as systemd would: an unknown or misspelt directive, a bad
value or a missing executable is reported. Its exit status stays 0 for an unknown key (it only
warns), so any output fails the test. The ExecStart path is the installed `isofabric` of this
venv, and the unit's arguments must be ones `isofabric serve` takes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cli import app
from tests.conformance.conftest import skip_or_fail
from tests.docs.examples import host_argv

UNIT = Path(__file__).resolve().parents[2] / "examples" / "systemd" / "isofabric.service"
INSTALLED = "/opt/isofabric/venv/bin/isofabric"


def exec_start_argv(unit_text: str) -> list[str]:
    (line,) = [ln for ln in unit_text.splitlines() if ln.startswith("ExecStart=")]
    return line.removeprefix("ExecStart=").split()


def test_systemd_accepts_the_example_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        skip_or_fail("systemd-analyze is not installed")
    here = str(Path(sys.executable).with_name("isofabric"))
    # Run as this user: the example's `isofabric` user need not exist on a test machine.
    text = UNIT.read_text().replace(INSTALLED, here)
    text = text.replace("User=isofabric", "User=root").replace("Group=isofabric", "Group=root")
    unit = tmp_path / "isofabric.service"
    unit.write_text(text)
    result = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout + result.stderr == "", "systemd warns about the unit"


def test_the_unit_starts_serve_with_options_it_takes() -> None:
    argv = exec_start_argv(UNIT.read_text())
    assert argv[0] == INSTALLED and argv[1] == "serve"
    # docs/operators/deployment.md's `sh {.host #replica-serve}` line is the unit's command.
    [documented] = host_argv("docs/operators/deployment.md", "replica-serve")
    assert [Path(argv[0]).name, *argv[1:]] == documented
    # --help after the unit's options: click parses (and would refuse) them first.
    result = CliRunner().invoke(app, [*argv[1:], "--help"])
    assert result.exit_code == 0, result.output


def test_the_unit_reads_the_example_environment_file() -> None:
    text = UNIT.read_text()
    assert "EnvironmentFile=/etc/isofabric/isofabric.env" in text
    env_file = UNIT.with_name("isofabric.env").read_text()
    names = [ln.split("=", 1)[0] for ln in env_file.splitlines() if ln and not ln.startswith("#")]
    assert "ISOFABRIC_DATABASE_URL" in names
    # Every name is a setting the service reads (a misspelt one would be ignored silently).
    settings_source = (UNIT.parents[2] / "tenancy" / "store" / "settings.py").read_text()
    assert [name for name in names if f'"{name}"' not in settings_source] == []
