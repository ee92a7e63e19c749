"""The deploy agent's lab: OpenSMs with pid files, tool wrappers, the agent as a subprocess.

* `SmNode`: one OpenSM the test starts itself (``-p`` priority, attached at ``SIM_HOST``), its
  conf dir, its pid file (written by the test, as an init system would), its deploy target and
  agent token, and a ``bin`` directory of infiniband-diags wrappers that attach to ibsim
  (``LD_PRELOAD=libumad2sim.so``), so the agent itself runs without the preload, as on an SM
  host. The ``smpquery`` wrapper lies once, for one LID, when ``bin/lie-lid`` names it.
* `run_agent` / `start_agent`: ``isofabric-agent opensm …`` against a service URL.
* `TamperServer`: a small HTTP server playing a compromised or broken service.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .harness import AGENT_SCRIPT, HarnessError, OpenSM, SimFabric, stop_process, wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENT_TIMEOUT = 120.0
WRAPPED_TOOLS = ("ibnetdiscover", "sminfo")
# The first empty slot (0x0000) of the table becomes 0x8777 in the lying smpquery's answer.
LIE_KEY = 0x8777
_LYING_SMPQUERY = """#!/bin/sh
{exports}
for last; do :; done
if [ -f {lie} ] && [ "$last" = "$(cat {lie})" ]; then
    rm -f {lie}
    out=$({tool} "$@") || exit $?
    printf '%s\\n' "$out" | sed '0,/0x0000/s//0x8777/'
    exit 0
fi
exec {tool} "$@"
"""


# A standby that starts sets IS_SM on its port (trap 144 to the master), and the master's next
# sweep asks it for its SMInfo. libumad2sim hands a MAD to ibsim and never times it out (its
# write path ignores timeout_ms; umad2sim.c in linux-rdma/ibsim), so when that exchange is
# lost while the standby's OpenSM starts, the master's sweep waits forever: its log ends at the
# trap, and `clear_madw: ERR 5401` evicts the MAD at exit. On real hardware the MAD times out
# and the sweep goes on, so the lab restarts a master that does not finish that sweep.
MASTER_SWEEP_SECONDS = 10.0
STANDBY_TRAP = "num:144"


def start_standby(master: SmNode, standby: SmNode) -> None:
    """Start `standby` and wait for the master's sweep after its trap (restarting a stuck one)."""
    offset = len(master.log_text())

    def swept() -> bool:
        written = master.log_text()[offset:]
        trap = written.find(STANDBY_TRAP)
        return trap >= 0 and "SUBNET UP" in written[trap:]

    standby.start(standby=True)
    try:
        wait_until(swept, timeout=MASTER_SWEEP_SECONDS, what="the master's sweep after the trap")
    except HarnessError:
        master.stop()
        master.start()


@dataclass
class SmNode:
    """One OpenSM on the simulated fabric, with its deploy target and agent token."""

    name: str
    fabric: SimFabric
    sim_host: str
    conf_dir: Path
    priority: int
    token: str = ""
    fabric_name: str = "ib-east"
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def pid_file(self) -> Path:
        return self.conf_dir / "opensm.pid"

    @property
    def log(self) -> Path:
        return self.conf_dir / "opensm.log"

    @property
    def bin_dir(self) -> Path:
        return self.conf_dir.parent / f"{self.conf_dir.name}-bin"

    def path(self, name: str) -> Path:
        return self.conf_dir / name

    def install(self, files: Mapping[str, bytes]) -> None:
        """Write the files OpenSM starts with (by the test, before OpenSM runs)."""
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            self.path(name).write_bytes(content)

    def argv(self) -> list[str]:
        conf = self.conf_dir
        return [
            *(self.fabric.tools.opensm, "-F", str(conf / OpenSM.OPTIONS)),
            *("-P", str(conf / OpenSM.PARTITIONS), "-Q", "-Y", str(conf / OpenSM.QOS_POLICY)),
            *("-f", str(self.log), "-p", str(self.priority), "--console", "off"),
            *("--dump_files_dir", str(conf / "cache")),
        ]

    def start(self, *, standby: bool = False) -> None:
        """Start OpenSM, write its pid file, wait until it is master (SUBNET UP) or standby."""
        (self.conf_dir / "cache").mkdir(parents=True, exist_ok=True)
        seen = self.log_text().count("SUBNET UP")
        cache = str(self.conf_dir / "cache")
        env = {
            **self.fabric.client_env(self.sim_host),
            "OSM_TMP_DIR": cache,
            "OSM_CACHE_DIR": cache,
        }
        with (self.conf_dir / "opensm.stdout").open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv(), env=env, cwd=self.conf_dir, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.pid_file.write_text(f"{self.proc.pid}\n")
        if standby:
            wait_until(
                lambda: "Entering STANDBY state" in self.log_text(), timeout=30, what="standby"
            )
        else:
            wait_until(lambda: self.log_text().count("SUBNET UP") > seen, timeout=30, what="master")

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def sweeps(self) -> int:
        return self.log_text().count("SUBNET UP")

    def write_wrappers(self) -> None:
        """The infiniband-diags the agent runs, attached to ibsim at this node's HCA."""
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        env = self.fabric.client_env(self.sim_host)
        names = ("LD_PRELOAD", "IBSIM_SOCKNAME", "SIM_HOST")
        exports = "\n".join(f"export {k}={shlex.quote(env[k])}" for k in names)
        tools = {"ibnetdiscover": self.fabric.tools.ibnetdiscover, "sminfo": _which("sminfo")}
        for name, tool in tools.items():
            self._script(name, f'#!/bin/sh\n{exports}\nexec {tool} "$@"\n')
        lie = shlex.quote(str(self.bin_dir / "lie-lid"))
        smpquery = self.fabric.tools.smpquery
        self._script("smpquery", _LYING_SMPQUERY.format(exports=exports, lie=lie, tool=smpquery))

    def lie_once_for(self, lid: int) -> None:
        (self.bin_dir / "lie-lid").write_text(f"{lid}\n")

    def _script(self, name: str, text: str) -> None:
        path = self.bin_dir / name
        path.write_text(text)
        path.chmod(0o755)

    def agent_argv(self, server: str, keyring: Path, *extra: str) -> list[str]:
        return [
            *(AGENT_SCRIPT, "opensm", "--server", server),
            *("--fabric", self.fabric_name, "--target", self.name),
            *("--conf-dir", str(self.conf_dir), "--public-key", str(keyring)),
            *("--pid-file", str(self.pid_file), "--log-file", str(self.log)),
            *("--sample", "8", "--sweep-timeout", "30", *extra),
        ]

    def agent_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        path = f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        return {**os.environ, "PATH": path, "ISOFABRIC_TOKEN": self.token, **(extra or {})}


def _which(name: str) -> str:
    for directory in [*os.environ.get("PATH", "").split(os.pathsep), "/usr/sbin", "/sbin"]:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise FileNotFoundError(name)


def run_agent(
    node: SmNode, server: str, keyring: Path, *extra: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """One ``--once`` cycle of the real agent; its exit status and output."""
    return subprocess.run(
        node.agent_argv(server, keyring, "--once", *extra),
        env=node.agent_env(env),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=AGENT_TIMEOUT,
        check=False,
    )


def start_agent(
    node: SmNode, server: str, keyring: Path, *extra: str, env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    """The real agent in the background (stderr piped: it says what it does there)."""
    return subprocess.Popen(
        node.agent_argv(server, keyring, *extra),
        env=node.agent_env(env),
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float = 60.0) -> None:
    """Read the process's stderr until a line contains `needle` (a reader thread bounds it)."""
    found = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if needle in line:
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    if not found.wait(timeout):
        proc.kill()
        raise AssertionError(f"the agent never said {needle!r}")


def kill_hard(proc: subprocess.Popen[str]) -> None:
    """kill -9, by pid."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    if proc.stderr is not None:
        proc.stderr.close()


def stop_agent(proc: subprocess.Popen[str]) -> str:
    """SIGTERM a background agent, by pid; what it said on stderr."""
    proc.terminate()
    _out, err = proc.communicate(timeout=30)
    return err


@dataclass
class TamperServer:
    """Serves a given envelope and files, and records the reports it is sent."""

    envelope: dict[str, Any]
    files: dict[str, bytes]
    reports: list[dict[str, Any]] = field(default_factory=list)

    @contextmanager
    def serving(self) -> Iterator[str]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.endswith("/signed-manifest"):
                    self._send(200, json.dumps(owner.envelope).encode(), "application/json")
                elif "/artifacts/" in self.path:
                    path = self.path.split("/artifacts/", 1)[1]
                    body = owner.files.get(path)
                    self._send(200 if body else 404, body or b"{}", "text/plain")
                else:
                    self._send(404, b"{}", "application/json")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                owner.reports.append(json.loads(self.rfile.read(length)))
                self._send(201, b"{}", "application/json")

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
