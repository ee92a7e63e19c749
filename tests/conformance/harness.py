"""Drive a real OpenSM against an ibsim-simulated fabric.

Lab facts this module relies on (ibsim 0.10, OpenSM 3.3.23, infiniband-diags 44.0):

* ibsim listens on abstract unix sockets ``@<IBSIM_SOCKNAME>:ctl`` etc.; the control socket is
  bound only after the net file parsed, so its presence in ``/proc/net/unix`` means "ready".
* Clients (OpenSM, ibnetdiscover, smpquery, saquery) attach through ``LD_PRELOAD=libumad2sim.so``.
  ``SIM_HOST`` names the attach point: the quoted node id of the net file, or a NodeDescription
  (``"sm01 mlx5_0"``); unset means the first node of the file. ibsim allows 10 clients at once
  and one SM per node.
* OpenSM buffers its log unless started with ``-d 2`` (force flush); ``SUBNET UP`` (INFO level,
  on by default) is logged at the end of every heavy sweep, including the one SIGHUP forces.
* ibsim does not implement M_Key: PortInfo Set ignores M_Key/protect bits and incoming SMPs are
  never checked, so ``smpquery`` works with or without ``-y``. The harness still passes the
  configured M_Key (as a real fabric with ``m_key_protection_level`` >= 1 would need for Sets and,
  at level 3, for Gets).
* The SA silently drops MADs whose SM_Key is non-zero and != ``sa_key`` (``ERR 1A04``; the
  client times out), and answers PKeyTableRecord queries with SM_Key 0 with
  ``SA_ERR_REQ_INVALID`` (``ERR 4608``). PathRecord queries need no key.
* ``saquery PR`` prints nothing and exits 0 when there is no path.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from policies.infiniband import opensm_conf

DEFAULT_TIMEOUT = 30.0
# The deploy agents' own console script, as a fabric host runs it (agent/command.py).
AGENT_SCRIPT = str(Path(sys.executable).parent / "isofabric-agent")
QUERY_TIMEOUT = 20.0
POLL_INTERVAL = 0.05
MAD_TIMEOUT_MS = 2000

DEFAULT_PKEY = 0x7FFF
FULL_BIT = 0x8000

# OpenSM log lines that mean the rendered configuration was (partly) rejected (the agent's list).
CONFIG_ERROR_PATTERNS = opensm_conf.CONFIG_ERROR_PATTERNS

# opensm.conf problems are printed to OpenSM's stdout only, never to its log.
OPTION_ERROR_PATTERNS = ("Unrecognized token", "Invalid Cached Option Value")

UMAD2SIM_PACKAGE = "libumad2sim0"
UMAD2SIM_GLOBS = (
    "/usr/lib/*/umad2sim/libumad2sim.so*",
    "/usr/lib*/umad2sim/libumad2sim.so*",
    "/usr/local/lib*/umad2sim/libumad2sim.so*",
    "/usr/lib/*/libumad2sim.so*",
)

_sockname_counter = itertools.count()
_live_processes: dict[int, subprocess.Popen[bytes]] = {}


class HarnessError(RuntimeError):
    """A simulator or diagnostic tool misbehaved (not an assertion about the fabric)."""


class ToolsMissingError(HarnessError):
    """ibsim / OpenSM / infiniband-diags are not installed."""


# ------------------------------------------------------------------------------------- tools


def full(pkey: int) -> int:
    """Return the full-member form of ``pkey``."""
    return pkey | FULL_BIT


def base(pkey: int) -> int:
    """Return the partition number of ``pkey`` (membership bit cleared)."""
    return pkey & ~FULL_BIT


def is_full(pkey: int) -> bool:
    return bool(pkey & FULL_BIT)


def _umad2sim_from_dpkg() -> str | None:
    dpkg = shutil.which("dpkg")
    if not dpkg:
        return None
    try:
        out = subprocess.run(
            [dpkg, "-L", UMAD2SIM_PACKAGE], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines():
        if re.search(r"/libumad2sim\.so(\.\d+)*$", line) and os.path.isfile(line):
            return line
    return None


def find_umad2sim() -> str | None:
    """Locate libumad2sim.so (dpkg first, then well-known library directories)."""
    found = _umad2sim_from_dpkg()
    if found:
        return found
    for pattern in UMAD2SIM_GLOBS:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    return None


@dataclass(frozen=True)
class IbTools:
    """Absolute paths of the external programs the harness drives."""

    ibsim: str
    opensm: str
    ibnetdiscover: str
    smpquery: str
    saquery: str
    umad2sim: str

    @classmethod
    def locate(cls) -> IbTools:
        """Find every tool or raise :class:`ToolsMissingError` naming the missing ones."""
        extra = ["/usr/sbin", "/sbin", "/usr/local/sbin"]
        path = os.pathsep.join([os.environ.get("PATH", ""), *extra])
        names = ("ibsim", "opensm", "ibnetdiscover", "smpquery", "saquery")
        found = {name: shutil.which(name, path=path) for name in names}
        found["umad2sim"] = find_umad2sim()
        missing = sorted(name for name, where in found.items() if not where)
        if missing:
            raise ToolsMissingError("missing InfiniBand lab tools: " + ", ".join(missing))
        return cls(**{k: str(v) for k, v in found.items()})


# ------------------------------------------------------------------------------ process care


def _spawn(
    argv: list[str], *, env: dict[str, str], log: Path, cwd: Path
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a ^C to pytest must not race our own teardown
        )
    _live_processes[proc.pid] = proc
    return proc


def stop_process(proc: subprocess.Popen[bytes] | None, grace: float = 5.0) -> None:
    """Terminate one child by PID: SIGTERM, bounded wait, then SIGKILL."""
    if proc is None:
        return
    try:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=grace)
    finally:
        _live_processes.pop(proc.pid, None)


@atexit.register
def _stop_leftovers() -> None:  # pragma: no cover - only runs if a teardown was skipped
    for proc in list(_live_processes.values()):
        stop_process(proc, grace=2.0)


def wait_until(
    predicate: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    alive: Callable[[], None] | None = None,
) -> None:
    """Poll ``predicate`` until true; raise :class:`HarnessError` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if alive is not None:
            alive()
        if time.monotonic() >= deadline:
            raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(POLL_INTERVAL)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "<no output>"
    return "\n".join(text.splitlines()[-lines:])


def unique_sockname() -> str:
    return f"isofabric-{os.getpid()}-{next(_sockname_counter)}"


# ------------------------------------------------------------------------------------ parsing


@dataclass(frozen=True)
class SmKeys:
    """Management keys a diagnostic client must present (``None``: not configured)."""

    m_key: int | None = None
    sa_key: int | None = None

    @classmethod
    def from_opensm_conf(cls, text: str) -> SmKeys:
        """Read ``m_key`` / ``sa_key`` from opensm.conf text as OpenSM does (last one wins)."""
        m_key, sa_key = opensm_conf.management_keys(text)  # m_key 0 = protection disabled
        return cls(m_key=m_key, sa_key=sa_key)


@dataclass(frozen=True)
class CaPort:
    """One CA port as ``ibnetdiscover -p`` reports it."""

    description: str  # NodeDescription, "gpu0001 mlx5_0"
    guid: int  # port GUID
    lid: int
    port: int
    switch: str
    switch_port: int

    @property
    def host(self) -> str:
        return self.description.split(" ", 1)[0]

    @property
    def hca(self) -> str:
        parts = self.description.split(" ", 1)
        return parts[1] if len(parts) > 1 else ""


# CA  23  1 0x0000000000100025 4x SDR - SW  3  9 0x0000000000200001 ( 'stor02 mlx5_0' - 'leaf02' )
_PORTS_LINE = re.compile(
    r"^CA\s+(?P<lid>\d+)\s+(?P<port>\d+)\s+(?P<guid>0x[0-9a-fA-F]+)\s.*?"
    r"-\s+SW\s+\d+\s+(?P<swport>\d+)\s+0x[0-9a-fA-F]+\s+"
    r"\(\s*'(?P<desc>[^']*)'\s+-\s+'(?P<switch>[^']*)'\s*\)"
)


def parse_ports_report(text: str) -> list[CaPort]:
    """Parse the CA lines of ``ibnetdiscover -p`` (CA-to-CA links are ignored)."""
    ports = []
    for line in text.splitlines():
        match = _PORTS_LINE.match(line.strip())
        if match:
            ports.append(
                CaPort(
                    description=match["desc"],
                    guid=int(match["guid"], 16),
                    lid=int(match["lid"]),
                    port=int(match["port"]),
                    switch=match["switch"],
                    switch_port=int(match["swport"]),
                )
            )
    return ports


def parse_pkey_table(text: str) -> list[int]:
    """Return the non-zero P_Keys of ``smpquery pkeys`` output, in table order."""
    keys: list[int] = []
    for line in text.splitlines():
        match = re.match(r"\s*\d+:\s+((?:0x[0-9a-fA-F]{4}\s*)+)$", line)
        if match:
            keys += [int(word, 16) for word in match.group(1).split()]
    if not keys and "pkeys capacity" not in text:
        raise HarnessError(f"unexpected smpquery pkeys output:\n{text}")
    return [key for key in keys if key & 0x7FFF]


@dataclass(frozen=True)
class PathRecord:
    """The fields of a SA PathRecord the tests care about."""

    slid: int
    dlid: int
    pkey: int
    sl: int
    mtu: int
    rate: int


def parse_path_records(text: str) -> list[PathRecord]:
    """Parse ``saquery PR`` output (zero, one or more ``PathRecord dump:`` blocks)."""
    records = []
    for block in text.split("PathRecord dump:")[1:]:
        fields = dict(re.findall(r"^\s*(\w+)\.{2,}(\S+)", block, flags=re.MULTILINE))
        records.append(
            PathRecord(
                slid=int(fields["slid"], 0),
                dlid=int(fields["dlid"], 0),
                pkey=int(fields["pkey"], 16),
                sl=int(fields["sl"], 0),
                mtu=int(fields["mtu"], 0),
                rate=int(fields["rate"], 0),
            )
        )
    return records


def config_errors(log_text: str, patterns: Iterable[str] = CONFIG_ERROR_PATTERNS) -> list[str]:
    """Return the OpenSM log lines matching any configuration-error pattern."""
    wanted = tuple(patterns)
    return [line for line in log_text.splitlines() if any(p in line for p in wanted)]


# --------------------------------------------------------------------------------- simulator


@dataclass
class SimFabric:
    """An ibsim process plus the environment its clients need."""

    tools: IbTools
    netfile: Path
    workdir: Path
    sim_host: str = "sm01 mlx5_0"
    sockname: str = field(default_factory=unique_sockname)
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def output(self) -> Path:
        return self.workdir / "ibsim.out"

    def start(self, timeout: float = DEFAULT_TIMEOUT) -> SimFabric:
        env = {**os.environ, "IBSIM_SOCKNAME": self.sockname}
        argv = [self.tools.ibsim, "-s", "-n", str(self.netfile)]
        self.proc = _spawn(argv, env=env, log=self.output, cwd=self.workdir)
        try:
            wait_until(self._socket_bound, timeout=timeout, what="ibsim", alive=self._check_alive)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        stop_process(self.proc)

    def __enter__(self) -> SimFabric:
        return self if self.proc else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _socket_bound(self) -> bool:
        needle = f"@{self.sockname}:ctl"
        try:
            table = Path("/proc/net/unix").read_text()
        except OSError:  # not Linux: fall back to the banner
            return "Network simulator ready" in self.output.read_text(errors="replace")
        return any(line.split()[-1].rstrip("@") == needle for line in table.splitlines()[1:])

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise HarnessError(f"ibsim exited with {self.proc.returncode}:\n{_tail(self.output)}")

    def client_env(self, sim_host: str | None = None) -> dict[str, str]:
        return {
            **os.environ,
            "LD_PRELOAD": self.tools.umad2sim,
            "IBSIM_SOCKNAME": self.sockname,
            "SIM_HOST": sim_host or self.sim_host,
        }

    def run(self, argv: list[str], *, timeout: float = QUERY_TIMEOUT) -> str:
        """Run one diagnostic client against the simulator; return stdout, raise on failure."""
        try:
            done = subprocess.run(
                argv,
                env=self.client_env(),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"{argv} did not finish within {timeout}s") from exc
        if done.returncode != 0:
            raise HarnessError(f"{argv} exited {done.returncode}:\n{done.stderr}{done.stdout}")
        return done.stdout

    def ibnetdiscover(self, *args: str) -> str:
        return self.run([self.tools.ibnetdiscover, *args])

    def ca_ports(self) -> list[CaPort]:
        """Every CA port with its LID (0 until an SM has swept)."""
        return parse_ports_report(self.ibnetdiscover("-p"))


@dataclass
class Diag:
    """SMP / SA queries, issued from the SM's host with the configured keys."""

    fabric: SimFabric
    keys: SmKeys = field(default_factory=SmKeys)

    def _smp_key_args(self) -> list[str]:
        return ["-y", f"0x{self.keys.m_key:016x}"] if self.keys.m_key else []

    def pkeys(self, lid: int, port: int | None = None) -> list[int]:
        """Non-zero P_Keys of ``lid`` (a switch external port needs ``port``)."""
        argv = [self.fabric.tools.smpquery, "-t", str(MAD_TIMEOUT_MS), *self._smp_key_args()]
        argv += ["pkeys", str(lid), *([str(port)] if port is not None else [])]
        return parse_pkey_table(self.fabric.run(argv))

    def sa_pkeys(self, lid: int, port: int = 1, block: int = 0) -> list[int]:
        """The SA's copy of one P_Key table block (PKeyTableRecord needs SM_Key == sa_key)."""
        sa_key = self.keys.sa_key if self.keys.sa_key is not None else 1
        argv = [self.fabric.tools.saquery, "-t", str(MAD_TIMEOUT_MS), "--smkey", hex(sa_key)]
        out = self.fabric.run([*argv, "PKTR", f"{lid}/{port}/{block}"])
        words = re.findall(r"\b0x[0-9a-fA-F]{4}\b", out.split("PKey Table:", 1)[-1])
        return [int(w, 16) for w in words if int(w, 16) & 0x7FFF]

    def path_records(self, slid: int, dlid: int, pkey: int | None = None) -> list[PathRecord]:
        argv = [self.fabric.tools.saquery, "-t", str(MAD_TIMEOUT_MS), "PR"]
        argv += ["--slid", str(slid), "--dlid", str(dlid)]
        if pkey is not None:
            argv += ["--pkey", f"0x{pkey:04x}"]
        return parse_path_records(self.fabric.run(argv))

    def path(self, slid: int, dlid: int, pkey: int | None = None) -> PathRecord | None:
        """The PathRecord the SA returns, or ``None`` for "no path"."""
        records = self.path_records(slid, dlid, pkey)
        return records[0] if records else None


# ------------------------------------------------------------------------------------ OpenSM


def _stay_in_foreground(opensm_conf: str) -> str:
    """Neutralise ``daemon TRUE``: a forked OpenSM would escape teardown by PID.

    OpenSM applies options in file order, so an appended ``daemon FALSE`` wins.
    """
    if not re.search(r"^\s*daemon\s+TRUE\b", opensm_conf, flags=re.MULTILINE | re.IGNORECASE):
        return opensm_conf
    return opensm_conf.rstrip("\n") + "\n# isofabric conformance harness override\ndaemon FALSE\n"


@dataclass
class OpenSM:
    """One OpenSM daemon (a child process, so we own its PID) on a :class:`SimFabric`."""

    fabric: SimFabric
    confdir: Path
    opensm_conf: str
    partitions_conf: str
    qos_policy_conf: str | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    OPTIONS = "opensm.conf"
    PARTITIONS = "partitions.conf"
    QOS_POLICY = "qos-policy.conf"

    @property
    def log(self) -> Path:
        return self.confdir / "opensm.log"

    @property
    def console(self) -> Path:
        return self.confdir / "opensm.stdout"

    @property
    def keys(self) -> SmKeys:
        return SmKeys.from_opensm_conf(self.opensm_conf)

    @property
    def diag(self) -> Diag:
        return Diag(self.fabric, self.keys)

    def install(self, name: str, text: str) -> Path:
        """Write one config file atomically (OpenSM may read it at any heavy sweep)."""
        target = self.confdir / name
        scratch = target.with_name(f".{name}.tmp")
        if name == self.OPTIONS:
            self.opensm_conf = text
            text = _stay_in_foreground(text)
        self.confdir.mkdir(parents=True, exist_ok=True)
        scratch.write_text(text)
        os.replace(scratch, target)
        return target

    def _argv(self) -> list[str]:
        cache = self.confdir / "cache"
        argv = [self.fabric.tools.opensm, "-F", str(self.confdir / self.OPTIONS)]
        argv += ["-P", str(self.confdir / self.PARTITIONS)]
        if self.qos_policy_conf is not None:
            argv += ["-Q", "-Y", str(self.confdir / self.QOS_POLICY)]
        argv += ["-f", str(self.log), "-d", "2", "--console", "off"]
        return [*argv, "--dump_files_dir", str(cache)]

    def start(self, timeout: float = DEFAULT_TIMEOUT) -> OpenSM:
        """Start OpenSM and wait for the first ``SUBNET UP``."""
        cache = self.confdir / "cache"
        cache.mkdir(parents=True, exist_ok=True)
        self.install(self.OPTIONS, self.opensm_conf)
        self.install(self.PARTITIONS, self.partitions_conf)
        if self.qos_policy_conf is not None:
            self.install(self.QOS_POLICY, self.qos_policy_conf)
        env = {**self.fabric.client_env(), "OSM_TMP_DIR": str(cache), "OSM_CACHE_DIR": str(cache)}
        self.proc = _spawn(self._argv(), env=env, log=self.console, cwd=self.confdir)
        try:
            self.wait_for_subnet_up(0, timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        stop_process(self.proc)

    def __enter__(self) -> OpenSM:
        return self if self.proc else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def subnet_up_count(self) -> int:
        return self.log_text().count("SUBNET UP")

    def wait_for_subnet_up(self, seen: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until more than ``seen`` heavy sweeps have completed."""
        wait_until(
            lambda: self.subnet_up_count() > seen,
            timeout=timeout,
            what="OpenSM 'SUBNET UP'",
            alive=self._check_alive,
        )

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise HarnessError(
                f"opensm exited with {self.proc.returncode}:\n{_tail(self.console)}\n"
                f"--- log ---\n{_tail(self.log)}"
            )

    def reload(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        """SIGHUP OpenSM and wait for the heavy sweep it forces; return the log offset before it.

        The offset lets callers inspect only what the reload logged (``log_text()[offset:]``).
        On a static ibsim fabric OpenSM runs no heavy sweep of its own after start-up (only
        light sweeps, which log nothing), so the next ``SUBNET UP`` is the one SIGHUP caused.
        """
        self._check_alive()
        assert self.proc is not None
        offset = len(self.log_text())
        seen = self.subnet_up_count()
        os.kill(self.proc.pid, signal.SIGHUP)
        self.wait_for_subnet_up(seen, timeout=timeout)
        return offset

    def config_errors(self, since: int = 0) -> list[str]:
        """Log lines showing that partitions.conf / qos-policy.conf were (partly) rejected."""
        return config_errors(self.log_text()[since:])

    def option_errors(self) -> list[str]:
        """Unknown option names or invalid values in opensm.conf (from OpenSM's stdout)."""
        try:
            text = self.console.read_text(errors="replace")
        except FileNotFoundError:
            return []
        return config_errors(text, OPTION_ERROR_PATTERNS)
