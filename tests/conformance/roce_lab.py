"""The RoCE deploy lab: a private Redis, and switches as network namespaces running real FRR.

* `RedisServer`: our own ``redis-server`` on a Unix socket in a tmp dir (never the machine's
  shared Redis), ``url(db)`` in redis-py's ``from_url`` form, ``add_user`` for ACL users.
* `RoceLab`: one `Router` per switch of a `RoceSnapshot`: a network namespace with zebra and
  bgpd started with ``-N <pathspace>`` (sockets under /var/run/frr/<pathspace>/, unique per
  run), the loopback and VTEP /32s on ``lo``, and a veth pair per snapshot link, each end named
  as the link names the port (``Ethernet248``). Leaves get isofabric's frr.conf through
  ``frr-reload.py`` (`Router.frr_reload`); spines run `spine_config`, a hand-written eBGP EVPN
  route server (next hop unchanged), not isofabric's.
* `apply_vxlanmgrd`: what SONiC's vxlanmgrd creates from a leaf's CONFIG_DB, per L2VNI.

FRR prints the host name of the process (uname) in ``show running-config`` (vtysh's own and the
daemons'), and on a switch that is the leaf's name. So every daemon, vtysh and frr-reload run in
their own UTS namespace named after the switch: `Router.vtysh_path` and
`Router.frr_reload_path` are wrapper scripts doing that (and passing the pathspace and a private
``--config_dir``), usable by an agent as ``--vtysh`` / ``--frr-reload``.

Usage (a module-scoped fixture: starting costs about a second per switch)::

    tools = LabTools.locate()            # ToolsMissingError -> skip_or_fail(str(exc))
    with RoceLab(snapshot, tmp_dir, tools) as lab, RedisServer(tmp_dir / "redis") as db:
        leaf = lab.router("leaf01")
        apply_vxlanmgrd(leaf, config_db_document)       # after each CONFIG_DB change
        leaf.load(frr_conf_text)                          # frr-reload --reload, exit 0
        lab.wait_evpn_established()
        leaf.vtysh_json("show bgp l2vpn evpn vni json"); leaf.running_config()
        # an agent: --frr-reload {leaf.frr_reload_path} --vtysh {leaf.vtysh_path}
        #           --frr-pathspace {leaf.namespace} --config-db {db.url(4)}
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies.roce.model import RoceSnapshot, Switch, SwitchRole

from .harness import ToolsMissingError, _spawn, stop_process, wait_until
from .redis_server import RedisServer
from .vxlanmgrd import apply_vxlanmgrd

__all__ = [
    "FRR_RUN_DIR",
    "LAB_TIMEOUT",
    "LabTools",
    "RedisServer",
    "RoceLab",
    "Router",
    "apply_vxlanmgrd",
    "run",
    "spine_config",
]

LAB_TIMEOUT = 30.0
FRR_RUN_DIR = Path("/var/run/frr")
FRR_USER = "frr"
_DAEMON_DIR = Path("/usr/lib/frr")
_WRAPPER = """#!/bin/sh
exec {unshare} --uts -- /bin/sh -c 'hostname "$0" && exec "$@"' {host} {argv} "$@"
"""


@dataclass(frozen=True)
class LabTools:
    """Paths of everything the lab runs; `locate` raises ToolsMissingError when one is missing."""

    zebra: str
    bgpd: str
    vtysh: str
    frr_reload: str
    ip: str
    unshare: str
    redis_server: str

    @classmethod
    def locate(cls) -> LabTools:
        if os.geteuid() != 0:
            raise ToolsMissingError("the RoCE lab needs root (network namespaces, FRR daemons)")
        found = {
            "zebra": _executable(_DAEMON_DIR / "zebra"),
            "bgpd": _executable(_DAEMON_DIR / "bgpd"),
            "frr_reload": _executable(_DAEMON_DIR / "frr-reload.py"),
            **{tool: shutil.which(tool) for tool in ("vtysh", "ip", "unshare")},
            "redis_server": shutil.which("redis-server"),
        }
        missing = sorted(name for name, path in found.items() if path is None)
        if missing or not _has_user(FRR_USER):
            raise ToolsMissingError(f"RoCE lab tools missing: {missing or ['user frr']}")
        return cls(**{name: str(path) for name, path in found.items()})


def _executable(path: Path) -> str | None:
    return str(path) if os.access(path, os.X_OK) else None


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a lab command; with `check`, a non-zero exit raises with its output."""
    env = {**os.environ, "VTYSH_PAGER": "cat"}
    done = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=LAB_TIMEOUT, check=False, env=env
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {done.returncode}: {done.stderr}{done.stdout}"
        )
    return done


# --------------------------------------------------------------------------------------- FRR


@dataclass
class Router:
    """One switch: a network namespace (also its FRR pathspace) with zebra and bgpd."""

    switch: Switch
    namespace: str
    workdir: Path
    tools: LabTools
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @property
    def name(self) -> str:
        return self.switch.name

    @property
    def confdir(self) -> Path:
        """frr-reload's ``--confdir``: ``<pathspace>/vtysh.conf``; its ``write`` lands here."""
        return self.workdir / "etc"

    @property
    def vtysh_path(self) -> Path:
        return self.workdir / "bin" / "vtysh"

    @property
    def frr_reload_path(self) -> Path:
        return self.workdir / "bin" / "frr-reload"

    @property
    def sockets(self) -> Path:
        return FRR_RUN_DIR / self.namespace

    def start(self) -> None:
        run([self.tools.ip, "netns", "add", self.namespace])
        self.ip("link", "set", "lo", "up")
        for address in (self.switch.loopback, self.switch.vtep):
            if address is not None:
                self.ip("addr", "add", f"{address}/32", "dev", "lo")
        self._write_files()
        for daemon, ready in ((self.tools.zebra, "zserv.api"), (self.tools.bgpd, "bgpd.vty")):
            self._start_daemon(daemon)
            wait_until(
                (self.sockets / ready).exists,
                timeout=LAB_TIMEOUT,
                what=f"{daemon} of {self.name}",
                alive=self._alive,
            )

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop_process(proc)
        run([self.tools.ip, "netns", "del", self.namespace], check=False)
        shutil.rmtree(self.sockets, ignore_errors=True)

    def ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``ip -n <namespace> …``."""
        return run([self.tools.ip, "-n", self.namespace, *args], check=check)

    def vtysh(self, *commands: str) -> str:
        """The output of ``vtysh -N <pathspace> -c …`` (one ``-c`` per command)."""
        return run([str(self.vtysh_path), *(a for c in commands for a in ("-c", c))]).stdout

    def vtysh_json(self, command: str) -> Any:
        """``command`` (which must end in ``json``) parsed."""
        return json.loads(self.vtysh(command))

    def running_config(self) -> str:
        return self.vtysh("show running-config")

    def frr_reload(self, conf: Path, *, test: bool = False) -> subprocess.CompletedProcess[str]:
        """``frr-reload.py --test|--reload <conf>`` on this router (exit code not checked)."""
        return run(
            [str(self.frr_reload_path), "--test" if test else "--reload", str(conf)], check=False
        )

    def load(self, text: str, name: str = "frr.conf") -> Path:
        """Write `text` to the router's intended-config dir and reload it (exit 0 required)."""
        conf = self.workdir / "intended" / name
        conf.parent.mkdir(exist_ok=True)
        conf.write_text(text)
        done = self.frr_reload(conf)
        assert done.returncode == 0, f"frr-reload on {self.name}: {done.stderr}{done.stdout}"
        return conf

    def evpn_peers(self) -> dict[str, str]:
        """EVPN neighbor -> BGP state (``Established`` when up)."""
        summary = self.vtysh_json("show bgp l2vpn evpn summary json")
        return {peer: info.get("state", "") for peer, info in summary.get("peers", {}).items()}

    def _write_files(self) -> None:
        (self.confdir / self.namespace).mkdir(parents=True)
        vtysh_conf = self.confdir / self.namespace / "vtysh.conf"
        vtysh_conf.write_text("service integrated-vtysh-config\n")
        (self.workdir / "run").mkdir()
        (self.workdir / "empty.conf").write_text("")
        self.sockets.mkdir(parents=True, exist_ok=True)
        shutil.chown(self.sockets, FRR_USER, FRR_USER)
        for path in (self.workdir, self.workdir / "empty.conf"):
            path.chmod(0o755 if path.is_dir() else 0o644)  # bgpd reads as user frr
        self._write_wrappers()

    def _write_wrappers(self) -> None:
        bindir = self.vtysh_path.parent
        bindir.mkdir()
        vtysh = [self.tools.vtysh, "--config_dir", str(self.confdir), "-N", self.namespace]
        reload = [self.tools.frr_reload, "--bindir", str(bindir), "--confdir", str(self.confdir),
                  "--rundir", str(self.workdir / "run"), "-N", self.namespace]  # fmt: skip
        for path, argv in ((self.vtysh_path, vtysh), (self.frr_reload_path, reload)):
            unshare, host = shlex.quote(self.tools.unshare), shlex.quote(self.name)
            path.write_text(_WRAPPER.format(unshare=unshare, host=host, argv=shlex.join(argv)))
            path.chmod(0o755)

    def _start_daemon(self, daemon: str) -> None:
        name = Path(daemon).name
        argv = [
            self.tools.ip, "netns", "exec", self.namespace,
            self.tools.unshare, "--uts", "--", "/bin/sh", "-c", 'hostname "$0" && exec "$@"',
            self.name, daemon, "-N", self.namespace, "-u", FRR_USER, "-g", FRR_USER, "-P", "0",
            "-f", str(self.workdir / "empty.conf"), "--log", f"file:{self.workdir / name}.log",
        ]  # fmt: skip
        log = self.workdir / f"{name}.out"
        self.procs.append(_spawn(argv, env=dict(os.environ), log=log, cwd=self.workdir))

    def _alive(self) -> None:
        for proc in self.procs:
            if proc.poll() is not None:
                raise AssertionError(f"{proc.args!r} of {self.name} exited {proc.returncode}")


def spine_config(switch: Switch, ports: Sequence[str]) -> str:
    """A hand-written eBGP EVPN route server: it relays EVPN routes with their next hop."""
    return "\n".join(
        [
            "frr defaults datacenter",
            f"hostname {switch.name}",
            "!",
            f"router bgp {switch.asn}",
            f" bgp router-id {switch.loopback}",
            " no bgp default ipv4-unicast",
            " neighbor FABRIC peer-group",
            " neighbor FABRIC remote-as external",
            *(f" neighbor {port} interface peer-group FABRIC" for port in ports),
            " address-family ipv4 unicast",
            "  neighbor FABRIC activate",
            f"  network {switch.loopback}/32",
            " exit-address-family",
            " address-family l2vpn evpn",
            "  neighbor FABRIC activate",
            # RFC 7432 §7: the VTEP is the next hop; a spine that rewrote it would blackhole VXLAN.
            "  neighbor FABRIC attribute-unchanged next-hop",
            " exit-address-family",
            "exit",
            "",
        ]
    )


class RoceLab:
    """Every switch of `snapshot` as a `Router`, linked as its links say; spines configured."""

    def __init__(self, snapshot: RoceSnapshot, workdir: Path, tools: LabTools) -> None:
        self.snapshot = snapshot
        self.workdir = workdir
        self.tools = tools
        self.token = secrets.token_hex(3)  # unique per run: namespaces, pathspaces, veth names
        self.routers = {
            s.name: Router(s, f"isf-{self.token}-{s.name}", workdir / s.name, tools)
            for s in snapshot.switches
        }
        self._stack = ExitStack()

    def __enter__(self) -> RoceLab:
        try:
            for router in self.routers.values():
                self._stack.callback(router.stop)
                router.workdir.mkdir(parents=True)
                router.start()
            self._link()
            for router in self.routers.values():
                if router.switch.role is SwitchRole.SPINE:
                    router.load(spine_config(router.switch, self.ports(router.name)))
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def router(self, name: str) -> Router:
        return self.routers[name]

    def leaves(self) -> list[Router]:
        return [r for r in self.routers.values() if r.switch.role is SwitchRole.LEAF]

    def ports(self, switch: str) -> list[str]:
        """The fabric ports of `switch`, as the snapshot's links name them."""
        ends = [(link.a_switch, link.a_port) for link in self.snapshot.links]
        ends += [(link.b_switch, link.b_port) for link in self.snapshot.links]
        return sorted(port for name, port in ends if name == switch)

    def wait_evpn_established(self, *routers: Router) -> None:
        """Poll until every EVPN session of `routers` (default: all) is Established."""
        for router in routers or tuple(self.routers.values()):
            expected = len(self.ports(router.name))

            def up(router: Router = router, expected: int = expected) -> bool:
                return _established(router) == expected

            what = f"{expected} EVPN sessions of {router.name}"
            wait_until(up, timeout=LAB_TIMEOUT, what=what, alive=router._alive)

    def _link(self) -> None:
        for index, link in enumerate(self.snapshot.links):
            temp_a, temp_b = (f"isf{self.token}{index}{side}" for side in "ab")
            run([self.tools.ip, "link", "add", temp_a, "type", "veth", "peer", "name", temp_b])
            # Once an end is in a namespace, deleting the namespace deletes the pair; until
            # then (a failed setup) the pair is in the root namespace and goes here.
            self._stack.callback(run, [self.tools.ip, "link", "del", temp_a], check=False)
            for temp, switch, port in (
                (temp_a, link.a_switch, link.a_port),
                (temp_b, link.b_switch, link.b_port),
            ):
                router = self.routers[switch]
                run([self.tools.ip, "link", "set", temp, "netns", router.namespace])
                router.ip("link", "set", temp, "name", port)
                router.ip("link", "set", port, "up")


def _established(router: Router) -> int:
    return sum(state == "Established" for state in router.evpn_peers().values())
