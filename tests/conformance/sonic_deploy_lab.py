"""The SONiC deploy lab: a live service, the RoCE lab's leaves, one Redis, the agent per leaf.

* `LeafNode`: one leaf: its `Router` (namespace with zebra and bgpd), its CONFIG_DB (a database
  of the module's `RedisServer`), its ``sonic`` target and agent token, its state directory
  (the agent's frr.conf and state). `LeafNode.agent_argv` is ``python -m api.agent sonic …``
  with the lab's vtysh/frr-reload wrappers and the leaf's pathspace.
* `seed_config_db`: a switch as isofabric finds it: a rendered config_db.json plus keys and fields
  isofabric does not own (`FOREIGN`, `EXTRA_FIELDS`), written as ConfigDBConnector writes.
* `with_foreign`: what a leaf must hold after a deployment: the signed target with the foreign
  keys and fields still there.
* `install_dropping_reload`: a STAND-IN ``frr-reload`` (wrapping the lab's real one) that, while
  armed, drops the lines matching a pattern from every file it reloads: a reload that loses
  configuration, as frr-reload.py has done around VRFs and EVPN route targets (issue 16), so the
  read-back fails.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api.agent.config_db import ConfigDb, RedisConfigDb, flatten, touched, unflatten

from .roce_lab import Router

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENT_TIMEOUT = 120.0

# Keys isofabric neither owns nor declares: a management VLAN outside the fabric's VLAN range
# (100-3999) and a BGP neighbor of the management network (both have SONiC YANG models, so the
# whole CONFIG_DB still validates).
FOREIGN: ConfigDb = {
    "VLAN": {"Vlan10": {"vlanid": "10", "description": "mgmt"}},
    "BGP_NEIGHBOR": {"10.255.0.1": {"asn": "64999", "name": "mgmt-rr"}},
}
# Fields of declared entries the renderer does not write (set by the switch's own config).
EXTRA_FIELDS: ConfigDb = {
    "PORT": {"Ethernet0": {"alias": "etp1", "description": "gpu uplink"}},
    "DEVICE_METADATA": {"localhost": {"mac": "52:54:00:12:34:56"}},
}
_DROPPING_RELOAD = """#!{python}
# STAND-IN frr-reload: while armed, drops the lines matching a pattern from what it reloads.
import os, re, sys
args, flag, scratch = sys.argv[1:], {flag!r}, {scratch!r}
if os.path.exists(flag) and args[:1] == ["--reload"]:
    os.makedirs(scratch, exist_ok=True)
    with open(args[-1]) as conf, open(os.path.join(scratch, "frr.conf"), "w") as out:
        out.writelines(line for line in conf if not re.search({pattern!r}, line))
    args = [*args[:-1], "--confdir", scratch, os.path.join(scratch, "frr.conf")]
os.execv({real!r}, [{real!r}, *args])
"""


def stored(document: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> ConfigDb:
    """`document` as it reads back from Redis (numbers as strings, lists as lists)."""
    return unflatten(flatten(document))


def merged(*parts: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> ConfigDb:
    """The parts merged entry by entry, field by field (later parts win)."""
    out: ConfigDb = {}
    for part in parts:
        for table, entries in part.items():
            for key, fields in entries.items():
                out.setdefault(table, {}).setdefault(key, {}).update(fields)
    return out


def with_foreign(target: ConfigDb) -> ConfigDb:
    """The signed target plus what isofabric never touches."""
    return merged(target, FOREIGN, EXTRA_FIELDS)


def seed_config_db(store: RedisConfigDb, rendered: ConfigDb) -> None:
    """Write `rendered` plus the foreign keys and fields, as ConfigDBConnector would."""
    store.client.flushdb()
    store.write(*touched({}, with_foreign(stored(rendered))))
    store.client.set("CONFIG_DB_INITIALIZED", "1")  # a plain key, as on a switch: no entry


@dataclass
class LeafNode:
    """One leaf of the lab and what its agent needs."""

    name: str
    router: Router
    db: int
    config_db_url: str
    state_dir: Path
    token: str = ""

    @property
    def store(self) -> RedisConfigDb:
        return RedisConfigDb.from_url(self.config_db_url)

    @property
    def frr_conf(self) -> Path:
        return self.state_dir / "frr.conf"

    def agent_argv(self, server: str, keyring: Path, *extra: str) -> list[str]:
        options = {
            "--server": server, "--fabric": "roce-west", "--target": self.name,
            "--public-key": str(keyring), "--state-dir": str(self.state_dir),
            "--frr-conf": str(self.frr_conf), "--frr-pathspace": self.router.namespace,
            "--vtysh": str(self.router.vtysh_path),
            "--frr-reload": str(self.router.frr_reload_path),
        }  # fmt: skip
        if "--gcu" not in extra and not any(e.startswith("--config-db") for e in extra):
            options["--config-db"] = self.config_db_url
        given = {e.split("=", 1)[0] for e in extra}
        argv = [a for name, value in options.items() if name not in given for a in (name, value)]
        return [sys.executable, "-m", "api.agent", "sonic", *argv, "--once", *extra]

    def run_agent(
        self, server: str, keyring: Path, *extra: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """One ``--once`` cycle of the real agent (options as ``--name=value`` override)."""
        import os

        environment = {**os.environ, "ISOFABRIC_TOKEN": self.token, **(env or {})}
        return subprocess.run(
            self.agent_argv(server, keyring, *extra),
            env=environment,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=AGENT_TIMEOUT,
            check=False,
        )


def install_dropping_reload(leaf: LeafNode, pattern: str) -> tuple[Path, Path]:
    """A stand-in frr-reload for `leaf` dropping `pattern`'s lines; (its path, its flag).

    It drops them while the flag file exists (the test writes and removes it); otherwise, and for
    ``--test``, it is the lab's real frr-reload.
    """
    directory = leaf.state_dir.parent / f"{leaf.name}-dropping"
    directory.mkdir(exist_ok=True)
    path, flag = directory / "frr-reload", directory / "armed"
    path.write_text(
        _DROPPING_RELOAD.format(
            python=sys.executable,
            pattern=pattern,
            flag=str(flag),
            scratch=str(directory / "scratch"),
            real=str(leaf.router.frr_reload_path),
        )
    )
    path.chmod(0o755)
    return path, flag


def l2vni_route_targets(router: Router, vni: int) -> dict[str, list[str]]:
    """Prefix -> the RTs of its paths in the VNI's table (``show bgp l2vpn evpn route vni``)."""
    table = router.vtysh_json(f"show bgp l2vpn evpn route vni {vni} json")
    routes = {}
    for prefix, entry in table.items():
        if isinstance(entry, dict) and "paths" in entry:
            texts = [p["extendedCommunity"]["string"] for ps in entry["paths"] for p in ps]
            routes[prefix] = sorted({rt for t in texts for rt in re.findall(r"RT:(\S+)", t)})
    return routes
