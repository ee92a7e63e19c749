"""Facts about the local OpenSM: its process, its log, its role; and the SIGHUP that reloads it.

* The process: from a pid file (``--pid-file``) or systemd (``systemctl show -p MainPID --value
  UNIT``; Debian's ``opensm@.service`` runs OpenSM in the foreground and has no pid file). Its
  identity is (pid, start time in clock ticks, ``/proc/<pid>/stat`` field 22), so a recycled pid
  is a new process; its command line (``/proc/<pid>/cmdline``) names the files it reads.
* The signal: ``os.kill(pid, SIGHUP)``, or ``systemctl kill -s HUP UNIT``.
* The log: a heavy sweep ends with ``SUBNET UP`` (INFO); the agent notes the log's size before
  the SIGHUP and waits for the first ``SUBNET UP`` written after it.
* The role: ``sminfo -D 0`` asks the local port's SM (SMInfo attribute) for its state:
  ``SMINFO_MASTER`` or ``SMINFO_STANDBY``; the answer also names the local port GUID.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent import ibdiag
from agent.ibdiag import (
    DEFAULT_CONCURRENCY,
    CollectError,
    Tools,
    discover_ca_ports,
    read_pkey_tables,
)

PROC = Path("/proc")
COMMAND_TIMEOUT = 20.0
POLL_SECONDS = 0.1
MAD_TIMEOUT_MS = 2000
SUBNET_UP = "SUBNET UP"
# sminfo: sm lid 1 sm guid 0x100001, activity count 747 priority 10 state 3 SMINFO_MASTER
_SMINFO = re.compile(r"sm guid (?P<guid>0x[0-9a-fA-F]+),.*\bstate (?P<state>\d+)")
_ROLES = {3: "master", 2: "standby"}


class SmError(RuntimeError):
    """OpenSM is not running, or its process, log or tools cannot be read."""


@dataclass(frozen=True, slots=True)
class SmProcess:
    """A running OpenSM: pid, start time (ticks since boot and epoch seconds), command line."""

    pid: int
    start_ticks: int
    started_at: float
    argv: tuple[str, ...]
    cwd: Path


def run_tool(argv: list[str], env: Mapping[str, str] | None = None) -> str:
    """Run a local tool (sminfo, systemctl); its stdout, or `SmError`."""
    try:
        return ibdiag.run_tool(argv, env, COMMAND_TIMEOUT)
    except CollectError as error:
        raise SmError(str(error)) from error


@dataclass(frozen=True)
class SmLocator:
    """How to find and signal OpenSM: a pid file, or a systemd unit."""

    pid_file: Path | None = None
    unit: str | None = None
    systemctl: str = "systemctl"

    def process(self) -> SmProcess:
        """The running OpenSM; `SmError` when there is none (no pid, dead pid, not opensm)."""
        pid = self._pid()
        facts = read_process(pid)
        if "opensm" not in Path(facts.argv[0] if facts.argv else "").name:
            raise SmError(f"pid {pid} is {facts.argv[:1]}, not opensm (a stale pid file?)")
        return facts

    def hup(self, process: SmProcess) -> None:
        """Send SIGHUP: OpenSM starts a heavy sweep, re-reading its files."""
        if self.unit is not None:
            run_tool([self.systemctl, "kill", "-s", "HUP", self.unit])
            return
        try:
            os.kill(process.pid, signal.SIGHUP)
        except ProcessLookupError as error:
            raise SmError(f"OpenSM (pid {process.pid}) exited before the SIGHUP") from error

    def _pid(self) -> int:
        if self.unit is not None:
            text = run_tool([self.systemctl, "show", "-p", "MainPID", "--value", self.unit])
            where = f"systemd unit {self.unit}"
        elif self.pid_file is not None:
            try:
                text = self.pid_file.read_text()
            except OSError as error:
                raise SmError(
                    f"OpenSM is not running: pid file {self.pid_file}: {error}"
                ) from error
            where = f"pid file {self.pid_file}"
        else:
            raise SmError("neither a pid file nor a systemd unit names OpenSM")
        try:
            pid = int(text.strip())
        except ValueError as error:
            raise SmError(f"{where} holds no pid: {text.strip()!r}") from error
        if pid <= 0:
            raise SmError(f"OpenSM is not running ({where}: MainPID {pid})")
        return pid


def read_process(pid: int, proc: Path = PROC) -> SmProcess:
    """The process's start time, command line and working directory from ``/proc``."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
        cwd = Path(os.readlink(proc / str(pid) / "cwd"))
    except OSError as error:
        raise SmError(f"OpenSM is not running: no process {pid} ({error.strerror})") from error
    # Field 2 (comm) is parenthesised and may hold spaces: split after its last ')'.
    start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
    return SmProcess(
        pid=pid,
        start_ticks=start_ticks,
        started_at=boot_time(proc) + start_ticks / os.sysconf("SC_CLK_TCK"),
        argv=tuple(arg.decode(errors="replace") for arg in argv if arg),
        cwd=cwd,
    )


def boot_time(proc: Path = PROC) -> float:
    """Seconds since the epoch at boot (``btime`` of ``/proc/stat``)."""
    for line in (proc / "stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise SmError(f"{proc / 'stat'} has no btime")


def parse_sminfo(text: str) -> tuple[str, int | None]:
    """(role, SM port GUID) from ``sminfo`` output; role is master, standby or unknown."""
    match = _SMINFO.search(text)
    if match is None:
        return "unknown", None
    return _ROLES.get(int(match["state"]), "unknown"), int(match["guid"], 16)


def local_role(
    sminfo: str = "sminfo", m_key: int | None = None, env: Mapping[str, str] | None = None
) -> tuple[str, int | None]:
    """The local SM's role and port GUID (SMInfo of the local port, ``sminfo -D 0``)."""
    key_args = ["-y", f"0x{m_key:016x}"] if m_key else []
    try:
        text = run_tool([sminfo, "-t", str(MAD_TIMEOUT_MS), *key_args, "-D", "0"], env)
    except SmError:
        return "unknown", None
    return parse_sminfo(text)


@dataclass(frozen=True)
class SmLog:
    """OpenSM's log file (``--log-file``): its size now and what was written after an offset."""

    path: Path

    def offset(self) -> int:
        """The log's size in bytes (0 when it does not exist yet)."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def since(self, offset: int) -> str:
        """Text written after `offset` (all of it if the log was truncated or rotated)."""
        try:
            with self.path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                handle.seek(offset if size >= offset else 0)
                return handle.read().decode(errors="replace")
        except FileNotFoundError:
            return ""


def wait_for_sweep(
    log: SmLog,
    offset: int,
    timeout: float,
    *,
    alive: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Wait for the first ``SUBNET UP`` after `offset`; returns the log text written since.

    Raises:
        SmError: no ``SUBNET UP`` within `timeout` seconds, or `alive` says OpenSM died.
    """
    deadline = clock() + timeout
    while True:
        text = log.since(offset)
        if SUBNET_UP in text:
            return text
        alive()
        if clock() >= deadline:
            raise SmError(f"no '{SUBNET_UP}' in {log.path} within {timeout:g} s of the SIGHUP")
        sleep(POLL_SECONDS)


class LocalSmHost:
    """The OpenSM on this host and the fabric through its HCA, as the agent's cycle uses them.

    Tools inherit this process's environment (so ``LD_PRELOAD``/``IBSIM_SOCKNAME``/``SIM_HOST``
    wrappers make them run against ibsim) and are looked up on PATH.
    """

    def __init__(
        self,
        locator: SmLocator,
        log: SmLog,
        *,
        tools: Tools | None = None,
        sminfo: str = "sminfo",
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        self.locator, self.log = locator, log
        self.tools, self.sminfo, self.concurrency = tools or Tools(), sminfo, concurrency

    def process(self) -> SmProcess:
        """The running OpenSM (`SmError` when none)."""
        return self.locator.process()

    def hup(self, process: SmProcess) -> None:
        """SIGHUP OpenSM."""
        self.locator.hup(process)

    def role(self, m_key: int | None) -> tuple[str, int | None]:
        """master, standby or unknown, and the local port GUID."""
        return local_role(self.sminfo, m_key)

    def log_offset(self) -> int:
        """The log's size now."""
        return self.log.offset()

    def wait_for_sweep(self, offset: int, timeout: float, process: SmProcess) -> str:
        """Log text up to the first ``SUBNET UP`` after `offset`."""
        return wait_for_sweep(self.log, offset, timeout, alive=lambda: _alive(process))

    def ca_ports(self) -> list[tuple[int, int]]:
        """(GUID, LID) of every CA port (``ibnetdiscover -p``)."""
        try:
            return discover_ca_ports(tools=self.tools)
        except CollectError as error:
            raise SmError(str(error)) from error

    def pkey_tables(
        self, ports: Sequence[tuple[int, int]], m_key: int | None
    ) -> dict[int, list[int]]:
        """The P_Key tables of `ports`, as ``isofabric collect ib`` reads them."""
        try:
            return read_pkey_tables(
                ports, m_key=m_key, tools=self.tools, concurrency=self.concurrency
            )
        except CollectError as error:
            raise SmError(str(error)) from error


def _alive(process: SmProcess) -> None:
    try:
        current = read_process(process.pid)
    except SmError as error:
        raise SmError(f"OpenSM (pid {process.pid}) exited during the sweep") from error
    if current.start_ticks != process.start_ticks:
        raise SmError(f"OpenSM (pid {process.pid}) was replaced during the sweep")
