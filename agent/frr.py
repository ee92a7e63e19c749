"""FRR on a leaf: install an intended ``frr.conf``, reload it, read it back, reload the previous.

Steps of `FrrLeaf.deploy` (docs/facts/deploy.md, FRR): keep the previous file (``<name>.prev``)
and write the intended one atomically (agent/install.py); when the intended file adds VRFs,
first reload the installed file plus the new ``vrf`` blocks (`with_new_vrfs`: FRR 8.4's
frr-reload.py otherwise sends a new ``vrf VrfN`` inside ``router bgp`` and the VRF loses its
L3VNI); ``frr-reload.py --test`` prints the delta (kept for the report); ``frr-reload.py
--reload`` applies it; ``vtysh -c 'show
running-config'`` is compared with the file by `policies.roce.frr_running.running_differences`
(frr-reload has a record of reload bugs around VRFs and EVPN route targets, so a reload is never
trusted on its own). `FrrLeaf.revert` puts the previous file back and reloads it.

frr-reload.py is given (FRR 8.4 ``tools/frr-reload.py``, its argparse options):

* ``--pathspace NAME`` (``-N``) when the daemons run in a pathspace (vtysh gets ``-N NAME`` too);
* ``--bindir`` the directory of ``--vtysh`` (frr-reload runs ``<bindir>/vtysh``);
* ``--confdir`` the file's directory: frr-reload runs ``vtysh write`` (overwriting the daemons'
  frr.conf with the running config) unless the file is ``<confdir>/frr.conf``;
* ``--rundir`` a scratch directory (its ``reload-*.txt`` files of commands);
* ``--stdout`` with ``--reload``: its log on stdout, not ``/var/log/frr/frr-reload.log``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.ibdiag import CollectError, run_tool
from agent.install import install_file, prev_path, restore_previous
from policies.roce.frr_running import running_differences, with_new_vrfs

COMMAND_TIMEOUT = 120.0
DEFAULT_FRR_RELOAD = "/usr/lib/frr/frr-reload.py"
MAX_DELTA = 2048  # of the --test output kept for the report

Runner = Callable[[list[str]], str]


class FrrError(RuntimeError):
    """A reload or a read-back failed; `differences` are the mismatched running entries."""

    def __init__(self, message: str, differences: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.differences = differences


def run_command(argv: list[str]) -> str:
    """Run frr-reload.py or vtysh; stdout, or `FrrError` with the status and stderr."""
    try:
        return run_tool(argv, None, COMMAND_TIMEOUT)
    except CollectError as error:
        raise FrrError(str(error)) from error


@dataclass(frozen=True)
class FrrTools:
    """How to reach the daemons: frr-reload.py, vtysh and the pathspace."""

    frr_reload: str = DEFAULT_FRR_RELOAD
    vtysh: str = "vtysh"
    pathspace: str | None = None

    def vtysh_argv(self, *commands: str) -> list[str]:
        """Vtysh (in the pathspace) running `commands`."""
        space = ["-N", self.pathspace] if self.pathspace else []
        return [self.vtysh, *space, *(arg for c in commands for arg in ("-c", c))]

    def reload_argv(self, mode: str, conf: Path, rundir: Path) -> list[str]:
        """``frr-reload.py --test|--reload`` of `conf`."""
        argv = [self.frr_reload, mode, "--confdir", str(conf.parent), "--rundir", str(rundir)]
        if Path(self.vtysh).parent != Path():
            argv += ["--bindir", str(Path(self.vtysh).parent)]
        if self.pathspace:
            argv += ["--pathspace", self.pathspace]
        if mode == "--reload":
            argv.append("--stdout")
        return [*argv, str(conf)]


@dataclass(frozen=True)
class Deployed:
    """A verified reload: the delta frr-reload.py printed, and whether the file changed."""

    delta: str
    changed: bool


class FrrLeaf:
    """The leaf's frr.conf (`conf`) and its daemons."""

    def __init__(self, conf: Path, tools: FrrTools, *, run: Runner = run_command) -> None:
        self.conf, self.tools, self.run = conf, tools, run

    def current(self) -> str:
        """The installed file's text ("" when there is none yet)."""
        try:
            return self.conf.read_text()
        except FileNotFoundError:
            return ""

    def running(self) -> str:
        """``show running-config`` of the daemons."""
        return self.run(self.tools.vtysh_argv("show running-config"))

    def differences(self, intended: str) -> list[str]:
        """What the running config lacks or has beyond `intended` (empty: they match)."""
        return running_differences(intended, self.running())

    def deploy(self, intended: str) -> Deployed:
        """Install `intended` (the old file kept as ``.prev``), reload, read back.

        Raises:
            FrrError: frr-reload.py failed, or the running config differs from `intended`
                (the new file stays installed: the caller decides to `revert`).
        """
        original = self.current()
        changed = original != intended
        with tempfile.TemporaryDirectory(prefix="isofabric-frr-") as scratch:
            rundir = Path(scratch)
            step = with_new_vrfs(original, intended) if original else original
            if step != original:
                install_file(self.conf, step.encode())
                self.run(self.tools.reload_argv("--reload", self.conf, rundir))
            if changed:
                install_file(self.conf, intended.encode(), keep_previous=step == original)
            delta = self.run(self.tools.reload_argv("--test", self.conf, rundir))
            self.run(self.tools.reload_argv("--reload", self.conf, rundir))
        differences = self.differences(intended)
        if differences:
            shown = "; ".join(differences[:10])
            raise FrrError(
                f"the running config differs from frr.conf after the reload ({shown})",
                tuple(differences),
            )
        return Deployed(delta.strip()[:MAX_DELTA], changed)

    def revert(self, deployed_changed: bool) -> str:
        """Put the previous file back (if this deployment replaced it) and reload it.

        Returns what is running now against that file: "" when it matches.

        Raises:
            FrrError: the reload of the previous file failed.
        """
        if deployed_changed and not restore_previous(self.conf):
            raise FrrError(f"no previous file {prev_path(self.conf)} to reload")
        previous = self.current()
        with tempfile.TemporaryDirectory(prefix="isofabric-frr-") as rundir:
            self.run(self.tools.reload_argv("--reload", self.conf, Path(rundir)))
        return "; ".join(self.differences(previous)[:10])
