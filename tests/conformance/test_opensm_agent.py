"""The deploy agent (``isofabric agent opensm``) against a real service and real OpenSMs on ibsim.

One ibsim fat tree, one live service and one master OpenSM serve the whole module (a standby
joins for the last two tests); the tests run in file order and each starts from a fabric in
sync. The agent runs as a subprocess (``isofabric-agent opensm``) with infiniband-diags
wrappers that attach to ibsim; the test starts OpenSM itself and writes its pid file. What the
fabric enforces is read with smpquery, never taken from the agent's word.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx2
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from fastapi.testclient import TestClient

from agent.ibdiag import Tools, read_pkey_tables
from api.app import create_app
from policies.artifacts import Artifact
from policies.evidence.manifest import sign_manifest
from policies.infiniband.parse_partitions import parse_partitions_conf
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tests.docs.examples import host_argv, in_lab
from tests.fabricgen import FatTree, render
from tests.keys import key_directory, key_settings, register_key
from tests.live_server import live_server

from .agent_lab import (
    LIE_KEY,
    SmNode,
    TamperServer,
    kill_hard,
    run_agent,
    start_agent,
    start_standby,
    stop_agent,
    wait_for_line,
)
from .harness import AGENT_SCRIPT, DEFAULT_PKEY, IbTools, SimFabric, full, wait_until
from .test_opensm_end_to_end import FABRIC, Api, ingest_fabric, ports_of

pytestmark = pytest.mark.conformance

# 60 single-HCA GPU nodes: enough free nodes for a flood of 50 allocations.
TREE = FatTree(leaves=2, spines=2, gpu_nodes=60, hcas_per_gpu=1, storage_nodes=2)
MASTER_HOST, STANDBY_HOST = TREE.mgmt_ca(), "stor02 mlx5_0"
ADMIN = {"Authorization": "Bearer admin-secret"}
NAMES = ("opensm.conf", "partitions.conf", "qos-policy.conf")
# OpenSM's default sminfo_polling_timeout (10 s, opensm.conf(5)) and a margin.
POLL_SECONDS = 12
IB = f"/v1/fabrics/{FABRIC}"


@dataclass
class Lab:
    """The module's service, fabric and SM nodes."""

    url: str
    api: Api
    keyring: Path
    fabric: SimFabric
    master: SmNode
    root: Path
    app: Any = None
    standby: SmNode | None = None
    lids: dict[int, int] = field(default_factory=dict)

    @property
    def nodes(self) -> list[SmNode]:
        return [self.master, *([self.standby] if self.standby else [])]

    def agent(self, node: SmNode, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
        return run_agent(node, self.url, self.keyring, *extra, env=env)

    def sync(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.api.call("GET", f"{IB}/sync"))

    def target(self, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.api.call("GET", f"{IB}/targets/{name}"))

    def converge(self) -> str:
        """Run every node's agent once; the fabric is then in sync. Returns the digest."""
        for node in self.nodes:
            done = self.agent(node)
            assert done.returncode == 0, done.stderr
        sync = self.sync()
        assert sync["in_sync"], sync
        return str(sync["desired"])

    def artifacts(self) -> dict[str, bytes]:
        """The current snapshot's files by conf-dir name, as the agent downloads them."""
        envelope = self.api.call("GET", f"{IB}/signed-manifest")
        document = json.loads(base64.b64decode(envelope["payload"]))
        return {
            Path(f["path"]).name: self.download(document["snapshot_digest"], f["path"])
            for f in document["files"]
        }

    def download(self, digest: str, path: str) -> bytes:
        response = self.api.client.get(f"{IB}/snapshots/{digest}/artifacts/{path}")
        assert response.status_code == 200, response.text
        return response.content

    def tables(self, guids: set[int]) -> dict[int, set[int]]:
        """The live P_Key tables of `guids` (smpquery from the master's HCA)."""
        tools = Tools(self.fabric.tools.ibnetdiscover, self.fabric.tools.smpquery)
        ports = [(guid, self.lids[guid]) for guid in sorted(guids)]
        read = read_pkey_tables(ports, env=self.fabric.client_env(), tools=tools)
        return {guid: set(keys) for guid, keys in read.items()}

    def allocate(self, tenant: str, count: int = 1) -> dict[str, Any]:
        body = {"fabric": FABRIC, "count": count}
        return cast(
            dict[str, Any], self.api.call("POST", f"/v1/tenants/{tenant}/allocations", json=body)
        )

    def tenant(self, name: str) -> None:
        """Onboard tenant `name` unless it exists (tests may run alone)."""
        if self.api.client.get(f"/v1/tenants/{name}").status_code == 404:
            body = {"name": name, "kind": "external", "qos_class": "gold"}
            self.api.call("POST", "/v1/tenants", json=body)

    def register(self, node: SmNode) -> None:
        self.api.call("PUT", f"{IB}/targets/{node.name}", json={"kind": "opensm"})
        body = {
            "name": f"agent-{node.name}",
            "role": "agent",
            "fabric": FABRIC,
            "target": node.name,
        }
        node.token = self.api.call("POST", "/v1/tokens", json=body)["token"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def key_of(allocation: dict[str, Any]) -> int:
    return int(str(allocation["segment"]["pkey"]), 16) & 0x7FFF


def node_ports(allocation: dict[str, Any], lab: Lab) -> set[int]:
    names = {n if isinstance(n, str) else n["name"] for n in allocation["nodes"]}
    nodes = lab.api.call("GET", f"{IB}/nodes", params={"limit": 1000})["data"]
    return {int(p["guid"], 16) for n in nodes if n["name"] in names for p in n["ports"]}


@pytest.fixture(scope="module")
def lab(ib_tools: IbTools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("agent-lab")
    url = f"sqlite:///{root / 'isofabric.db'}"
    engine = make_engine(url)
    settings = key_settings(Settings(database_url=url, admin_token="admin-secret"))
    app = create_app(settings, engine=engine)
    register_key(engine)
    (root / "net.fabric").write_text(render(TREE))
    fabric = SimFabric(ib_tools, root / "net.fabric", root, sim_host=MASTER_HOST).start()
    try:
        with (
            live_server(app) as base,
            httpx2.Client(base_url=base, headers=ADMIN, timeout=60) as http,
        ):
            api = Api(cast(TestClient, http))  # the same request/response interface
            ingest_fabric(api, fabric.ibnetdiscover())
            assert settings.keyring_path is not None
            master = SmNode("sm-master", fabric, MASTER_HOST, root / "sm-master", priority=10)
            lab = Lab(base, api, settings.keyring_path, fabric, master, root, app)
            lab.register(master)
            master.install(lab.artifacts())
            master.write_wrappers()
            master.start()
            lab.lids = {port.guid: port.lid for port in fabric.ca_ports()}
            yield lab
            for node in lab.nodes:
                node.stop()
    finally:
        fabric.stop()
        engine.dispose()


# ------------------------------------------------------------------------------- lifecycle


def test_tenant_changes_reach_the_tables_through_the_agent_alone(lab: Lab) -> None:
    first = lab.agent(lab.master, "--full")  # OpenSM started with the current files: verified
    assert first.returncode == 0, first.stderr
    assert lab.sync()["in_sync"] and lab.target("sm-master")["role"] == "master"
    receipt = lab.api.call("GET", f"{IB}/deployments")["data"][-1]
    assert receipt["ports_read"] == len(lab.lids) and receipt["mismatches"] == []

    lab.tenant("acme")
    acme = lab.allocate("acme", 2)
    key = key_of(acme)
    ports = ports_of(lab.api, "acme")
    assert all(full(key) not in keys for keys in lab.tables(ports).values())
    lab.converge()
    assert all(full(key) in keys for keys in lab.tables(ports).values())  # onboarding

    grown = lab.allocate("acme", 1)
    added = node_ports(grown, lab)
    lab.converge()
    assert all(full(key) in keys for keys in lab.tables(added).values())  # allocation

    lab.api.call("POST", "/v1/tenants/acme/grants", json={"fabric": FABRIC, "service": "storage"})
    services = lab.api.call("GET", f"{IB}/services/storage")
    storage_key = int(str(services["segment"]["pkey"]), 16) & 0x7FFF
    lab.converge()
    acme_ports = ports_of(lab.api, "acme")
    assert all(storage_key in keys for keys in lab.tables(acme_ports).values())  # grant

    offboard_drains_until_the_key_is_gone(lab, acme_ports, key)


def offboard_drains_until_the_key_is_gone(lab: Lab, ports: set[int], key: int) -> None:
    nodes = [n["name"] for n in lab.api.pages(f"{IB}/nodes", {"tenant": "acme"})]
    lab.api.call("DELETE", "/v1/tenants/acme")
    states = {n: lab.api.call("GET", f"{IB}/nodes/{n}")["state"] for n in nodes}
    assert set(states.values()) == {"draining"}, states
    lab.tenant("initech")
    body = {"fabric": FABRIC, "nodes": nodes[:1]}
    refused = lab.api.client.post("/v1/tenants/initech/allocations", json=body)
    assert refused.status_code == 409, refused.text  # not allocatable while draining
    assert not lab.sync()["in_sync"]

    lab.converge()

    tables = lab.tables(ports)
    assert all(key not in {k & 0x7FFF for k in keys} for keys in tables.values())
    assert all(DEFAULT_PKEY in keys for keys in tables.values())
    assert {lab.api.call("GET", f"{IB}/nodes/{n}")["state"] for n in nodes} == {"free"}
    lab.api.call("POST", "/v1/tenants/initech/allocations", json=body)
    lab.converge()


# --------------------------------------------------------------------------------- refusals


def installed(node: SmNode) -> dict[str, str]:
    return {n: sha(node.path(n).read_bytes()) for n in NAMES}


def scratch_files(node: SmNode) -> list[str]:
    return sorted(p.name for p in node.conf_dir.glob(".*isofabric-tmp"))


def test_tampered_files_and_manifests_are_refused_and_nothing_installed(lab: Lab) -> None:
    lab.tenant("initech")
    lab.converge()
    lab.allocate("initech", 1)  # something to deploy, which a tampered server spoils
    envelope = lab.api.call("GET", f"{IB}/signed-manifest")
    document = json.loads(base64.b64decode(envelope["payload"]))
    files = {
        f["path"]: lab.download(document["snapshot_digest"], f["path"]) for f in document["files"]
    }
    partitions_path = next(p for p in files if p.endswith("partitions.conf"))
    service_key = load_pem_private_key((key_directory() / "signing.key").read_bytes(), None)
    assert isinstance(service_key, Ed25519PrivateKey)

    wrong_sha = {**files, partitions_path: files[partitions_path].replace(b"=full", b"=limited", 1)}
    sequence = document["sequence"]
    other_key = sign_manifest(
        FABRIC,
        document["snapshot_digest"],
        _artifacts(files),
        Ed25519PrivateKey.generate(),
        sequence=sequence,
    )
    open_text = _fail_open(files[partitions_path].decode())
    fail_open = {**files, partitions_path: open_text.encode()}
    signed_fail_open = sign_manifest(
        FABRIC, document["snapshot_digest"], _artifacts(fail_open), service_key, sequence=sequence
    )
    cases = {
        "wrong sha256": TamperServer(envelope, wrong_sha),
        "another key": TamperServer(other_key, files),
        "fail-open file": TamperServer(signed_fail_open, fail_open),
    }
    before, sweeps = installed(lab.master), lab.master.sweeps()
    for case, server in cases.items():
        with server.serving() as url:
            done = run_agent(lab.master, url, lab.keyring)
        assert done.returncode == 1, (case, done.stderr)
        assert [r["state"] for r in server.reports] == ["refused"], (case, server.reports)
        assert installed(lab.master) == before and scratch_files(lab.master) == [], case
    assert "does not match the signed manifest" in cases["wrong sha256"].reports[0]["detail"]
    assert "signature" in cases["another key"].reports[0]["detail"]
    assert "critical" in cases["fail-open file"].reports[0]["detail"]
    assert lab.master.sweeps() == sweeps  # OpenSM was never signalled
    lab.converge()


def _artifacts(files: dict[str, bytes]) -> list[Artifact]:
    return [Artifact(path, content) for path, content in sorted(files.items())]


def _fail_open(partitions: str) -> str:
    """CRLF line ends: OpenSM would discard the whole file and make every port full (ALL=full)."""
    broken = partitions.replace("\n", "\r\n")
    assert parse_partitions_conf(broken).fails_open
    return broken


# ------------------------------------------------------------------------------- crashes


@pytest.mark.parametrize("step", ["tmp-written", "prev-kept", "renamed", "installed"])
def test_kill_9_at_an_install_step_leaves_a_whole_file_and_the_next_cycle_converges(
    lab: Lab, step: str
) -> None:
    lab.converge()
    lab.tenant("initech")
    old = lab.master.path("partitions.conf").read_bytes()
    allocation = lab.allocate("initech", 1)
    new = lab.artifacts()["partitions.conf"]
    agent = start_agent(
        lab.master, lab.url, lab.keyring, "--once", env={"ISOFABRIC_AGENT_PAUSE_AT": step}
    )
    wait_for_line(agent, f"paused at {step}")

    kill_hard(agent)

    on_disk = lab.master.path("partitions.conf").read_bytes()
    assert on_disk == (old if step in ("tmp-written", "prev-kept") else new)
    assert not parse_partitions_conf(on_disk.decode()).fails_open
    lab.converge()
    key = key_of(allocation)
    assert all(full(key) in keys for keys in lab.tables(node_ports(allocation, lab)).values())


# ----------------------------------------------------------------------------- rollback


def test_a_read_back_mismatch_rolls_back_to_the_previous_tables(lab: Lab) -> None:
    before = lab.converge()
    previous = lab.master.path("partitions.conf").read_bytes()
    lab.tenant("hooli")
    allocation = lab.allocate("hooli", 1)
    ports = node_ports(allocation, lab)
    liar = min(ports)  # a changed port: always read back
    lab.master.lie_once_for(lab.lids[liar])

    done = lab.agent(lab.master)

    assert done.returncode == 1, done.stderr
    target = lab.target("sm-master")
    assert target["state"] == "rolled_back" and target["observed_digest"] == before
    assert target["mismatches"] == [
        {"guid": f"0x{liar:016x}", "missing": [], "unexpected": [f"0x{LIE_KEY:04x}"]}
    ]
    assert lab.master.path("partitions.conf").read_bytes() == previous
    hooli = full(key_of(allocation))
    assert all(hooli not in keys for keys in lab.tables(ports).values())  # previous tables
    assert not lab.sync()["in_sync"]
    lab.converge()  # a new agent process tries the snapshot again
    assert all(hooli in keys for keys in lab.tables(ports).values())


# ------------------------------------------------------------------ OpenSM down, restarts


def test_opensm_not_running_or_needing_a_restart_is_reported_never_applied(lab: Lab) -> None:
    lab.tenant("hooli")
    lab.converge()
    lab.master.stop()
    lab.allocate("hooli", 1)

    down = lab.agent(lab.master)

    assert down.returncode == 1
    target = lab.target("sm-master")
    assert target["state"] == "failed" and "not running" in target["detail"], target
    conf = lab.master.path("opensm.conf")
    conf.write_text(conf.read_text() + "allow_both_pkeys TRUE\n")  # what it is started with
    lab.master.start()

    restart = lab.agent(lab.master)

    assert restart.returncode == 1
    target = lab.target("sm-master")
    assert target["state"] == "restart_required", target
    assert "allow_both_pkeys: TRUE -> FALSE" in target["detail"]
    assert not lab.sync()["in_sync"]
    lab.master.stop()
    lab.master.start()  # now with the installed opensm.conf
    lab.converge()


# ------------------------------------------------------------------------ master, standby


def test_master_and_standby_are_in_sync_only_when_both_applied(lab: Lab) -> None:
    lab.converge()
    standby = SmNode("sm-standby", lab.fabric, STANDBY_HOST, lab.root / "sm-standby", priority=1)
    lab.register(standby)
    standby.install({name: lab.master.path(name).read_bytes() for name in NAMES})
    standby.write_wrappers()
    start_standby(lab.master, standby)
    lab.standby = standby
    lab.tenant("hooli")
    lab.allocate("hooli", 1)

    assert lab.agent(lab.master).returncode == 0
    assert not lab.sync()["in_sync"]  # the standby has not applied it
    standby_sweeps = standby.sweeps()
    done = lab.agent(standby)

    assert done.returncode == 0, done.stderr
    assert lab.sync()["in_sync"]
    assert standby.sweeps() == standby_sweeps == 0  # installed without a sweep
    roles = {t["name"]: t["role"] for t in lab.api.call("GET", f"{IB}/targets")["data"]}
    assert roles == {"sm-master": "master", "sm-standby": "standby"}
    assert (
        standby.path("partitions.conf").read_bytes()
        == lab.master.path("partitions.conf").read_bytes()
    )
    receipts = lab.api.call("GET", f"{IB}/deployments", params={"limit": 1000})["data"]
    last = [r for r in receipts if r["target"] == "sm-standby"][-1]
    assert "sweep" not in last["durations"] and last["role"] == "standby"


def test_after_the_keys_change_master_and_standby_agree_on_the_sm_key(lab: Lab) -> None:
    if lab.standby is None:
        pytest.skip("needs the standby of the previous test (the module runs in file order)")
    lab.converge()
    rekey(lab, sm_key=0x8000_0000_0000_5A1E, sa_key=0x8000_0000_0000_5A1F)

    # The master reloads and sweeps, then the standby reloads; in between they disagree (the
    # master's sweep logs the standby's old key once): that window is the cycle itself.
    for node in lab.nodes:
        done = lab.agent(node)
        assert done.returncode == 0, done.stderr
        assert "sm_key 0x800000000000" + "5a1e" in node.path("opensm.conf").read_text()
    assert lab.sync()["in_sync"]
    offsets = {node.name: len(node.log_text()) for node in lab.nodes}
    time.sleep(POLL_SECONDS)  # a standby polls the master's SMInfo, with its SM_Key, this often

    for node in lab.nodes:
        written = node.log_text()[offsets[node.name] :]
        assert "2F18" not in written and "non-matching sm_key" not in written, written[-2000:]
    assert "SIGHUP reloaded its options" in lab.target("sm-standby")["detail"]
    assert lab.standby.sweeps() == 0  # reloaded, never swept


def rekey(lab: Lab, **keys: int) -> None:
    """Restart the service's settings with other subnet keys (ISOFABRIC_OPENSM_SM_KEY, …)."""
    uow = lab.app.state.uow
    changed = {f"opensm_{name}": value for name, value in keys.items()}
    lab.app.state.uow = dataclasses.replace(
        uow, settings=dataclasses.replace(uow.settings, **changed)
    )


# ------------------------------------------------------------------------------- flood


def test_a_flood_of_allocations_coalesces_into_few_sweeps_and_ends_in_sync(lab: Lab) -> None:
    lab.converge()
    lab.tenant("flood")
    sweeps = lab.master.sweeps()
    agents = [
        start_agent(node, lab.url, lab.keyring, "--interval", "0.5", "--min-interval", "3")
        for node in lab.nodes
    ]
    try:
        started = time.monotonic()
        key = full(key_of(lab.allocate("flood", 1)))
        for _ in range(49):
            lab.allocate("flood", 1)
        flood_seconds = time.monotonic() - started
        final = lab.sync()["desired"]
        wait_until(
            lambda: lab.sync()["in_sync"] and lab.sync()["desired"] == final,
            timeout=60,
            what="in sync after the flood",
        )
    finally:
        said = [stop_agent(agent) for agent in agents]
    applied = lab.master.sweeps() - sweeps
    assert 1 <= applied <= 3 + flood_seconds / 3, (applied, flood_seconds, said)  # not 50
    flood = ports_of(lab.api, "flood")
    assert len(flood) == 50
    assert all(key in keys for keys in lab.tables(flood).values())


# ------------------------------------------------------------------------------- the docs


def test_the_documented_plan_command_line_shows_a_change_and_installs_nothing(lab: Lab) -> None:
    """docs/operators/deploy-opensm.md's ``sh {.host #opensm-plan}`` block, in the lab."""
    node = lab.master
    lab.tenant("docsplan")
    allocation = lab.allocate("docsplan")
    before = installed(node)
    [documented] = host_argv("docs/operators/deploy-opensm.md", "opensm-plan")
    argv = in_lab(
        documented,
        {
            "program": AGENT_SCRIPT,
            "--server": lab.url,
            "--fabric": FABRIC,
            "--target": node.name,
            "--conf-dir": str(node.conf_dir),
            "--public-key": str(lab.keyring),
            "--systemd-unit": ("--pid-file", str(node.pid_file)),  # the lab has no systemd
            "--log-file": str(node.log),
        },
    )
    try:
        done = subprocess.run(
            argv, env=node.agent_env(), capture_output=True, text=True, timeout=120, check=False
        )
    finally:
        lab.api.call("DELETE", f"/v1/tenants/docsplan/allocations/{allocation['id']}")

    assert done.returncode == 0, done.stderr
    assert "+++ " in done.stdout and "partitions.conf" in done.stdout
    assert "tenant:docsplan" in done.stdout
    assert installed(node) == before
