"""The SONiC deploy lab: a live service, the RoCE lab's leaves, one Redis, the agent per leaf.

* `DeployLab`: the module's live service (admin `Api`), RoCE lab, Redis and `LeafNode`s: agent
  runs, ``sync``, the signed target of a leaf, the model (`load_snapshot`), vxlanmgrd.
* `LeafNode`: one leaf: its `Router` (namespace with zebra and bgpd), its CONFIG_DB (a database
  of the module's `RedisServer`), its ``sonic`` target and agent token, its state directory
  (the agent's frr.conf and state). `LeafNode.agent_argv` is ``isofabric-agent sonic …``
  with the lab's vtysh/frr-reload wrappers and the leaf's pathspace.
* `seed_config_db`: a switch as isofabric finds it: a rendered config_db.json plus keys and fields
  isofabric does not own (`FOREIGN`, `EXTRA_FIELDS`), written as ConfigDBConnector writes
  (sonic-swss-common configdb.py ``typed_to_raw``: ``TABLE|key`` hashes, lists as ``field@``
  joined by ``,``, an entry without fields as ``NULL``=``NULL``) by this module's own code, not
  the agent's; `read_config_db` reads it back as ``raw_to_typed`` does, `dump` is every key raw.
* `with_foreign`: what a leaf must hold after a deployment: the signed target with the foreign
  keys and fields still there.
* `install_dropping_reload`: a STAND-IN ``frr-reload`` (wrapping the lab's real one) that, while
  armed, drops the lines matching a pattern from every file it reloads: a reload that loses
  configuration, as frr-reload.py has done around VRFs and EVPN route targets (issue 16), so the
  read-back fails.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx2
import redis
from redis.typing import EncodableT, FieldT
from sqlalchemy import Engine

from policies.roce.model import RoceSnapshot
from policies.roce.ownership import LeafOwnership
from tenancy.record.snapshot.roce import load_roce_snapshot
from tenancy.store.lookups import fabric_named
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tests.builders import ROCE_FABRIC, ROCE_STORAGE_NODES, SERVICE, api_create_roce_fabric

from .harness import AGENT_SCRIPT
from .redis_server import RedisServer
from .roce_lab import RoceLab, Router, apply_vxlanmgrd
from .test_opensm_end_to_end import Api

ConfigDb = dict[str, dict[str, dict[str, Any]]]

FABRIC = f"/v1/fabrics/{ROCE_FABRIC}"
ADMIN = {"Authorization": "Bearer admin-secret"}
REPO_ROOT = Path(__file__).resolve().parents[2]
AGENT_TIMEOUT = 120.0

# Keys isofabric neither owns nor declares: a management VLAN outside the fabric's VLAN range
# (100-3999) and a BGP neighbor of the management network (both have SONiC YANG models, so the
# whole CONFIG_DB still validates).
FOREIGN: ConfigDb = {
    "VLAN": {"Vlan10": {"vlanid": "10", "description": "mgmt", "dhcp_servers": ["10.255.0.5"]}},
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
    """`document` as it reads back from Redis: scalars as strings, lists as lists of strings."""
    return {
        table: {
            key: {
                name: [str(v) for v in value] if isinstance(value, list) else str(value)
                for name, value in fields.items()
            }
            for key, fields in entries.items()
        }
        for table, entries in document.items()
    }


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


def seed_config_db(client: redis.Redis, rendered: ConfigDb) -> None:
    """Flush, then write `rendered` plus the foreign keys and fields as ConfigDBConnector does."""
    client.flushdb()
    pipe = client.pipeline()
    for table, entries in with_foreign(stored(rendered)).items():
        for key, fields in entries.items():
            raw: dict[FieldT, EncodableT] = {
                (f"{name}@" if isinstance(value, list) else name): (
                    ",".join(value) if isinstance(value, list) else value
                )
                for name, value in fields.items()
            }
            pipe.hset(f"{table}|{key}", mapping=raw or {"NULL": "NULL"})
    pipe.set("CONFIG_DB_INITIALIZED", "1")  # a plain key, as on a switch: no entry
    pipe.execute()


def dump(client: redis.Redis) -> dict[str, Any]:
    """Every key of the database, raw: a hash as a dict, a string as itself."""
    out: dict[str, Any] = {}
    for name in client.scan_iter(count=1000):
        kind = client.type(name)
        out[name] = client.hgetall(name) if kind == "hash" else client.get(name)
    return out


def read_config_db(client: redis.Redis) -> ConfigDb:
    """The entries (``TABLE|key`` hashes) as ConfigDBConnector's ``raw_to_typed`` reads them."""
    document: ConfigDb = {}
    for name, value in dump(client).items():
        if "|" not in name or not isinstance(value, dict):
            continue
        table, key = name.split("|", 1)
        document.setdefault(table, {})[key] = {
            (field[:-1] if field.endswith("@") else field): (
                raw.split(",") if field.endswith("@") else raw
            )
            for field, raw in value.items()
            if field != "NULL"
        }
    return document


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
    def client(self) -> redis.Redis:
        """The leaf's CONFIG_DB as the default user, strings decoded."""
        return redis.Redis.from_url(self.config_db_url, decode_responses=True)

    def read(self) -> ConfigDb:
        return read_config_db(self.client)

    def dump(self) -> dict[str, Any]:
        return dump(self.client)

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
        return [AGENT_SCRIPT, "sonic", *argv, "--once", *extra]

    def start_agent(
        self, server: str, keyring: Path, *extra: str, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """One ``--once`` cycle of the real agent, started (options as ``--name=value``
        override the lab's)."""
        environment = {**os.environ, "ISOFABRIC_TOKEN": self.token, **(env or {})}
        return subprocess.Popen(
            self.agent_argv(server, keyring, *extra),
            env=environment,
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def finished(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    """Wait for an agent started by `LeafNode.start_agent`; its status and output."""
    try:
        out, err = proc.communicate(timeout=AGENT_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@dataclass
class DeployLab:
    """The module's service, RoCE lab, Redis and leaves."""

    url: str
    api: Api
    keyring: Path
    engine: Any
    settings: Settings
    lab: RoceLab
    redis: RedisServer
    leaves: dict[str, LeafNode]
    ids: dict[str, str] = field(default_factory=dict)

    def agent(self, leaf: str, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
        return finished(self.leaves[leaf].start_agent(self.url, self.keyring, *extra, env=env))

    def deploy_all(self) -> None:
        """Every leaf's agent once, at the same time (agents pull independently); exit 0 each."""
        procs = {
            name: leaf.start_agent(self.url, self.keyring) for name, leaf in self.leaves.items()
        }
        for name, proc in procs.items():
            done = finished(proc)
            assert done.returncode == 0, f"{name}: {done.stderr}"

    def deploy(self, leaf: str, *extra: str, **env: str) -> str:
        """One agent cycle that must exit 0; what it said."""
        done = self.agent(leaf, *extra, **env)
        assert done.returncode == 0, f"{leaf}: {done.stderr}"
        return done.stderr

    def sync(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.api.call("GET", f"{FABRIC}/sync"))

    def target_view(self, leaf: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.api.call("GET", f"{FABRIC}/targets/{leaf}"))

    def progress(self, leaf: str) -> dict[str, Any]:
        """The leaf's entry in ``sync`` (``phase``, ``behind``, ``affected``)."""
        return next(t for t in self.sync()["targets"] if t["name"] == leaf)

    def signed(self, leaf: str) -> tuple[dict[str, Any], LeafOwnership]:
        """The leaf's config_db.json (as stored) and ownership of the signed manifest's snapshot."""
        envelope = self.api.call("GET", f"{FABRIC}/signed-manifest")
        digest = json.loads(base64.b64decode(envelope["payload"]))["snapshot_digest"]
        base = f"{FABRIC}/snapshots/{digest}/artifacts/sonic/{leaf}"
        document = json.loads(self.api.call("GET", f"{base}/config_db.json"))
        ownership = LeafOwnership.from_json(self.api.call("GET", f"{base}/ownership.json"))
        return stored(document), ownership

    def raw_config_db(self, leaf: str) -> dict[str, Any]:
        """The leaf's config_db.json of the current snapshot, parsed as served."""
        document = json.loads(
            self.api.call("GET", f"{FABRIC}/artifacts/sonic/{leaf}/config_db.json")
        )
        return cast(dict[str, Any], document)

    def as_agent(self, leaf: str) -> httpx2.Client:
        """An HTTP client holding the leaf's agent token."""
        auth = {"Authorization": f"Bearer {self.leaves[leaf].token}"}
        return httpx2.Client(base_url=self.url, headers=auth, timeout=60)

    def snapshot(self) -> RoceSnapshot:
        return load_snapshot(self.engine, self.settings)

    def vxlanmgrd(self) -> None:
        """Every leaf's VXLAN devices as vxlanmgrd makes them from its patched CONFIG_DB."""
        for leaf in self.leaves.values():
            apply_vxlanmgrd(leaf.router, leaf.read())


def load_snapshot(engine: Engine, settings: Settings) -> RoceSnapshot:
    """The fabric as the service's database holds it now (the model)."""
    with UnitOfWork(engine, settings).transaction(read_only=True) as tx:
        return load_roce_snapshot(tx.session, fabric_named(tx.session, ROCE_FABRIC))


def first_state(api: Api) -> None:
    """roce-west with its storage service: the first rendered state of every leaf."""
    api_create_roce_fabric(cast(httpx2.Client, api.client))
    for node in ROCE_STORAGE_NODES:
        api.call("PATCH", f"{FABRIC}/nodes/{node}", json={"role": "storage"})
    body = {"name": SERVICE, "nodes": list(ROCE_STORAGE_NODES)}
    api.call("POST", f"{FABRIC}/services", json=body)


def register(lab: DeployLab, leaf: LeafNode) -> None:
    """The leaf as a sonic target with its own agent token; its CONFIG_DB seeded."""
    leaf.state_dir.mkdir(parents=True)
    lab.api.call("PUT", f"{FABRIC}/targets/{leaf.name}", json={"kind": "sonic"})
    body = {"name": f"agent-{leaf.name}", "role": "agent", "fabric": ROCE_FABRIC}
    leaf.token = lab.api.call("POST", "/v1/tokens", json={**body, "target": leaf.name})["token"]
    document, _ = lab.signed(leaf.name)
    seed_config_db(leaf.client, document)


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
