"""UFM's PKey clients, replayed on the wire against a live service, enforced by OpenSM on ibsim.

For each client of the UFM contract (``../shared/reference/ufm.md`` §1.4-1.5) a test replays its
exact wire behaviour (tests/conformance/ufm_replays.py: routes, methods, bodies byte for byte,
headers, the statuses it accepts, its retries) against the UFM-compatible API of a real uvicorn
server, with an orchestrator token bound to the client's tenant. Then real OpenSM on the ibsim
fabric applies the fabric's rendered partitions.conf (``GET
/v1/fabrics/{fabric}/artifacts/opensm/partitions.conf``) and the physical ports' P_Key tables are
read back with smpquery: a port a client added to P_Key X holds X with the membership bit it
asked for (0x8000 set for full), a port it removed does not. Virtual GUIDs (ib-kubernetes' pods)
are not ports the lab's OpenSM can program (upstream OpenSM has no virtualization,
docs/facts/infiniband.md §1.2 and §5): the rendered file must list them and the ledger (``GET
/v1/fabrics/{fabric}/virtual-guids``) bind them to the tenant.

Each client test ends with a second tenant's orchestrator (``mallory``) replaying the same
client against the first tenant's P_Key and ports: every write is a 4xx that names no tenant,
and nothing changes (partitions.conf, the nodes' holders, the ledger). ``test_every_route_*``
does the same for every write route in every authentication style.

One ibsim fat tree, one service and one OpenSM serve the module; each client has its own tenant
and nodes (`CLIENTS`), so every test stands alone and any order works. The operator sets up the
fabric, its topology, the storage service, the tenants and the virtual GUID range over /v1.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import httpx2
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from policies.infiniband.parse_partitions import memberships, parse_partitions_conf
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tests.fabricgen import FatTree, render
from tests.keys import key_settings, register_key
from tests.live_server import live_server

from .harness import MAD_TIMEOUT_MS, IbTools, OpenSM, SimFabric, full
from .test_opensm_end_to_end import Api
from .ufm_replays import (
    Answer,
    Backoff,
    Barrier,
    ConfigManager,
    IbKubernetes,
    MlnxBaremetal,
    Nico,
    NotFoundError,
    RefusedError,
    SlurmIntegration,
    TogetherIbKubernetes,
    UfmPkeysScript,
    Wire,
    basic,
    dynamic_pkey,
    ironic_client_id,
    mac_like,
    pool_reset,
    py_json,
)

pytestmark = pytest.mark.conformance

FABRIC = "ib-east"
ADMIN_TOKEN = "ufm-replay-operator"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# 18 GPU nodes of two HCAs: two nodes per client, one for the intruder and the victim of the
# route table, two never allocated.
TREE = FatTree(leaves=2, spines=2, gpu_nodes=18, hcas_per_gpu=2, storage_nodes=2)
STORAGE = ("stor01", "stor02")
# ib-kubernetes' default GUID pool starts at 02:00:00:00:00:00:00:00 (Network Operator's
# pKeyGUIDPoolRangeStart); the fabric admits this part of it as virtual GUIDs.
VIRTUAL = (0x0200000000000000, 0x02000000000000FF)
ARTIFACT = f"/v1/fabrics/{FABRIC}/artifacts/opensm/{{}}"

# tenant -> (kind, its nodes). `slurm` is internal: the policy releases what an orchestrator
# allocated for internal tenants when the epilog removes its last port (release_on_last_removal).
CLIENTS = {
    "k8s": ("external", ("gpu0001", "gpu0002")),
    "together": ("external", ("gpu0003", "gpu0004")),
    "nico": ("external", ("gpu0005", "gpu0006")),
    "slurm": ("internal", ("gpu0007", "gpu0008")),
    "nvcm": ("external", ("gpu0009", "gpu0010")),
    "openstack": ("external", ("gpu0011", "gpu0012")),
    "pkeys": ("external", ("gpu0013", "gpu0014")),
    "mallory": ("external", ("gpu0015",)),
    "acme": ("external", ("gpu0016",)),
}
MALLORY_HOST = CLIENTS["mallory"][1][0]
MALLORY_PKEY = 0x7A00  # the intruder's own partition
ACME_PKEY = 0x0E55  # the victim of the route table
FREE_NODE = "gpu0017"


# --------------------------------------------------------------------------------- the lab


@dataclass
class Lab:
    """The module's service, fabric and OpenSM, and what the operator set up."""

    url: str
    api: Api
    fabric: SimFabric
    sm: OpenSM
    guids: dict[str, list[int]]  # host -> its CA port GUIDs, HCA order
    lids: dict[int, int] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)

    def port(self, host: str, hca: int = 0) -> int:
        return self.guids[host][hca]

    def token(self, tenant: str) -> str:
        return self.tokens[tenant]

    def artifact(self, name: str) -> str:
        return str(self.api.call("GET", ARTIFACT.format(name)))

    def partitions(self) -> dict[int, dict[int, str]]:
        """What OpenSM builds from the rendered partitions.conf: P_Key -> GUID -> membership."""
        parsed = parse_partitions_conf(self.artifact(OpenSM.PARTITIONS))
        assert not parsed.fails_open
        return memberships(parsed)

    def ledger(self) -> dict[int, tuple[str, str, list[str]]]:
        """The virtual GUID ledger: GUID -> (tenant, state, partitions)."""
        rows = self.api.call("GET", f"/v1/fabrics/{FABRIC}/virtual-guids", params={"limit": 500})
        return {
            int(row["guid"], 16): (row["tenant"], row["state"], row["partitions"])
            for row in rows["data"]
        }

    def holders(self) -> dict[str, tuple[str | None, str]]:
        rows = self.api.call("GET", f"/v1/fabrics/{FABRIC}/nodes", params={"limit": 500})
        return {row["name"]: (row["tenant"], row["state"]) for row in rows["data"]}

    def state(self) -> tuple[str, Any, Any, Any]:
        """Everything a refused write must leave as it was."""
        digest = self.api.call("GET", f"/v1/fabrics/{FABRIC}/sync")["desired"]
        return self.artifact(OpenSM.PARTITIONS), self.holders(), self.ledger(), digest

    def enforce(self, *guids: int) -> dict[int, list[int]]:
        """OpenSM applies the current files (SIGHUP); the P_Key tables of `guids` (SMP)."""
        partitions = self.artifact(OpenSM.PARTITIONS)
        self.sm.install(OpenSM.PARTITIONS, partitions)
        self.sm.install(OpenSM.QOS_POLICY, self.artifact(OpenSM.QOS_POLICY))
        since = self.sm.reload()
        dropped = without_ports(partitions)
        errors = [
            line
            for line in self.sm.config_errors(since)
            if not ((found := MISSING_PARTITION.search(line)) and int(found[1], 16) in dropped)
        ]
        assert errors == []
        return {guid: self.table(guid) for guid in guids}

    def table(self, guid: int) -> list[int]:
        """The port's whole P_Key table in index order, empty entries (0x0000) included."""
        argv = [self.fabric.tools.smpquery, "-t", str(MAD_TIMEOUT_MS), "pkeys"]
        out = self.fabric.run([*argv, str(self.lids[guid])])
        table: list[int] = []
        for line in out.splitlines():
            matched = re.match(r"\s*\d+:\s+((?:0x[0-9a-fA-F]{4}\s*)+)$", line)
            if matched:
                table += [int(word, 16) for word in matched.group(1).split()]
        assert table, out
        return table


# OpenSM deletes a partition without a port it finds; the QoS policy's rule for its key then
# logs this error and stays (osm_qos_policy.c: "partition for this pkey not found", no effect).
MISSING_PARTITION = re.compile(r"ERR AC14: pkey 0x([0-9A-Fa-f]{4}) in match rule")


def is_virtual(guid: int) -> bool:
    return VIRTUAL[0] <= guid <= VIRTUAL[1]


def without_ports(partitions_conf: str) -> set[int]:
    """Keys whose members are all virtual GUIDs (or none): upstream OpenSM drops them.

    The fabric says its virtual GUIDs are enforced by NVIDIA's SM (``sm: nvidia``), which knows
    the virtual ports; the lab's upstream OpenSM 3.3.23 has no virtualization and skips those
    GUIDs as ports it cannot find (docs/facts/infiniband.md §1.2, §5).
    """
    parsed = parse_partitions_conf(partitions_conf)
    return {
        partition.pkey & 0x7FFF
        for partition in parsed.partitions
        if partition.pkey is not None
        and all(m.guid is not None and is_virtual(m.guid) for m in partition.members)
    }


def keys(table: list[int]) -> set[int]:
    return {key for key in table if key & 0x7FFF}


def holds(table: list[int], pkey: int) -> int | None:
    """The entry of partition `pkey` in a table (full or limited form), None if absent."""
    found = [key for key in table if key & 0x7FFF == pkey]
    assert len(found) <= 1, (hex(pkey), table)
    return found[0] if found else None


def orchestrator(api: Api, tenant: str | None, name: str) -> tuple[str, str]:
    body = {"name": name, "role": "orchestrator", "fabric": FABRIC, "tenant": tenant}
    created = api.call("POST", "/v1/tokens", json=body)
    return str(created["token"]), str(created["id"])


@pytest.fixture(scope="module")
def lab(ib_tools: IbTools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("ufm-clients")
    url = f"sqlite:///{root / 'isofabric.db'}"
    engine = make_engine(url)
    settings = key_settings(Settings(database_url=url, admin_token=ADMIN_TOKEN))
    app = create_app(settings, engine=engine)
    register_key(engine)
    (root / "net.fabric").write_text(render(TREE))
    fabric = SimFabric(ib_tools, root / "net.fabric", root, sim_host=TREE.mgmt_ca()).start()
    try:
        with (
            live_server(app) as server,
            httpx2.Client(base_url=server, headers=ADMIN, timeout=60) as http,
        ):
            api = Api(cast(TestClient, http))  # the same request/response interface
            guids: dict[str, list[int]] = {}
            for port in sorted(fabric.ca_ports(), key=lambda p: p.description):
                guids.setdefault(port.host, []).append(port.guid)
            operator_setup(api, fabric)
            sm = OpenSM(
                fabric,
                root / "opensm",
                opensm_conf=api.call("GET", ARTIFACT.format(OpenSM.OPTIONS)),
                partitions_conf=api.call("GET", ARTIFACT.format(OpenSM.PARTITIONS)),
                qos_policy_conf=api.call("GET", ARTIFACT.format(OpenSM.QOS_POLICY)),
            )
            with sm:
                lab = Lab(server, api, fabric, sm, guids)
                lab.lids = {port.guid: port.lid for port in fabric.ca_ports()}
                # The fabric's virtual GUIDs are NVIDIA's SM's to enforce (virt_enabled 2, its
                # option); upstream OpenSM says it does not know the option, and goes on.
                unknown = {line.strip() for line in sm.option_errors()}
                assert unknown <= {'Unrecognized token: "virt_enabled"'}, unknown
                for tenant in CLIENTS:
                    lab.tokens[tenant], _ = orchestrator(api, tenant, f"{tenant}-orchestrator")
                intruder_and_victim(lab)
                yield lab
    finally:
        fabric.stop()
        engine.dispose()


def operator_setup(api: Api, fabric: SimFabric) -> None:
    """The fabric (P_Keys 0x0001-0x7ffe, the virtual GUID range), topology, storage, tenants."""
    ranges = [f"0x{VIRTUAL[0]:016x}-0x{VIRTUAL[1]:016x}"]
    api.call(
        "POST",
        "/v1/fabrics",
        json={
            "name": FABRIC,
            "kind": "infiniband",
            "pkey_range": {"first": "0x0001", "last": "0x7ffe"},
            "virtual_guids": {"enabled": True, "ranges": ranges, "sm": "nvidia"},
        },
    )
    topology = fabric.ibnetdiscover()
    api.call(
        "PUT",
        f"/v1/fabrics/{FABRIC}/topology",
        content=topology,
        headers={"Content-Type": "text/plain"},
    )
    api.call("PATCH", f"/v1/fabrics/{FABRIC}/nodes/{TREE.mgmt_host}", json={"role": "management"})
    for node in STORAGE:
        api.call("PATCH", f"/v1/fabrics/{FABRIC}/nodes/{node}", json={"role": "storage"})
    api.call("POST", f"/v1/fabrics/{FABRIC}/services", json={"name": "storage", "nodes": STORAGE})
    policy = {"kinds": {"internal": {"release_on_last_removal": True}}}
    api.call("PUT", "/v1/policy", json=policy)
    for tenant, (kind, _) in CLIENTS.items():
        api.call("POST", "/v1/tenants", json={"name": tenant, "kind": kind})


def intruder_and_victim(lab: Lab) -> None:
    """mallory's own partition on its node; acme's partition on its node (the route table's)."""
    for tenant, pkey in (("mallory", MALLORY_PKEY), ("acme", ACME_PKEY)):
        host = CLIENTS[tenant][1][0]
        client = IbKubernetes(lab.url, tenant, lab.token(tenant))
        client.add_guids_to_pkey(pkey, [lab.port(host)])


def unchanged(lab: Lab, before: tuple[str, Any, Any, Any]) -> None:
    assert lab.state() == before, "a refused write changed the fabric"


def refusals(answers: list[Answer], *names: str) -> None:
    """Each answer a UFM-shaped 4xx naming none of `names` (the victim's tenant)."""
    for answer in answers:
        assert 400 <= answer.status < 500, answer
        assert answer.headers["content-type"] == "application/json", answer
        body = answer.json()
        assert {"error", "status", "reason"} <= set(body), answer
        for name in names:
            assert name.encode() not in answer.body, answer


def refused(operation: Callable[[], object]) -> Answer:
    """Run a client operation that must fail; the answer it failed on."""
    with pytest.raises(RefusedError) as caught:
        operation()
    return caught.value.answer


# ---------------------------------------------------------------------------- ib-kubernetes

K8S = 0x0A05  # the NetworkAttachmentDefinition's "pkey": "0x0a05"
K8S_MOVED = 0x0A06  # a pod's GUID moving to another NAD's key
POD_VFS = (0x02000000000000A1, 0x02000000000000A2)


def test_ib_kubernetes_adds_and_removes_pod_guids_and_opensm_enforces_the_ports(lab: Lab) -> None:
    client = IbKubernetes(lab.url, "ib-kubernetes", lab.token("k8s"))
    startup = Backoff()
    assert startup.run(client.attempt(client.validate)) and startup.attempts == 1
    host_a, host_b = CLIENTS["k8s"][1]
    pod_a, pod_b, spare = lab.port(host_a), lab.port(host_b), lab.port(host_a, 1)
    pods = [pod_a, pod_b, *POD_VFS]

    added = Backoff()
    assert added.run(client.attempt(lambda: client.add_guids_to_pkey(K8S, pods)))
    assert added.attempts == 1
    assert client.wire.log[-1].body == b"{}"
    client.add_guids_to_pkey(K8S, pods)  # the next periodic update sends it again: a no-op

    in_use = client.list_guids_in_use()  # leader start: the GUID pool is reset from this
    listed = client.wire.log[-1].json()["0xa05"]["guids"]
    assert [m["guid"] for m in listed] == [f"{g:016x}" for g in sorted(pods)]  # bare 16-hex
    assert {mac_like(f"{g:016x}") for g in pods} <= set(in_use)
    assert pool_reset(in_use, *VIRTUAL) == dict.fromkeys(POD_VFS, "0xa05")
    assert lab.partitions()[K8S] == dict.fromkeys(pods, "full")
    ledger = lab.ledger()
    assert {vf: ledger[vf] for vf in POD_VFS} == dict.fromkeys(
        POD_VFS, ("k8s", "bound", ["pkey-0xa05"])
    )
    tables = lab.enforce(pod_a, pod_b, spare)
    assert tables[pod_a][0] == tables[pod_b][0] == full(K8S)  # index0: true, at index 0
    assert holds(tables[spare], K8S) is None  # its node joined the tenant, not this P_Key

    # A pod's GUID moves to another NAD's P_Key (removeStaleGUID: remove, then add); a pod on
    # host_b ends and its port leaves.
    client.remove_guids_from_pkey(K8S, [pod_b, POD_VFS[1]])
    client.add_guids_to_pkey(K8S_MOVED, [POD_VFS[1]])
    in_use = client.list_guids_in_use()
    assert pool_reset(in_use, *VIRTUAL) == {POD_VFS[0]: "0xa05", POD_VFS[1]: "0xa06"}
    listed = client.wire.log[-1].json()["0xa05"]["guids"]
    assert [m["guid"] for m in listed] == [f"{pod_a:016x}", f"{POD_VFS[0]:016x}"]
    rendered = lab.partitions()
    assert rendered[K8S] == {pod_a: "full", POD_VFS[0]: "full"}
    assert rendered[K8S_MOVED] == {POD_VFS[1]: "full"}
    assert lab.ledger()[POD_VFS[1]] == ("k8s", "bound", ["pkey-0xa06"])
    tables = lab.enforce(pod_a, pod_b)
    assert holds(tables[pod_a], K8S) == full(K8S)
    assert holds(tables[pod_b], K8S) is None

    intruder_replays_ib_kubernetes(lab, victim_ports=[pod_a], victim_vf=POD_VFS[0])


def intruder_replays_ib_kubernetes(lab: Lab, victim_ports: list[int], victim_vf: int) -> None:
    """mallory's ib-kubernetes: every call on k8s's key or GUIDs is refused, with its retries."""
    intruder = IbKubernetes(lab.url, "ib-kubernetes", lab.token("mallory"))
    own_vf, own_port = 0x02000000000000E1, lab.port(MALLORY_HOST)
    before = lab.state()
    attempts: list[Callable[[], None]] = [
        lambda: intruder.add_guids_to_pkey(K8S, [own_vf]),  # into the victim's P_Key
        lambda: intruder.add_guids_to_pkey(K8S, [own_port]),
        lambda: intruder.add_guids_to_pkey(MALLORY_PKEY, victim_ports),  # the victim's ports
        lambda: intruder.add_guids_to_pkey(MALLORY_PKEY, [victim_vf]),  # its bound pod GUID
        lambda: intruder.remove_guids_from_pkey(K8S, victim_ports),
    ]
    for operation in attempts:
        backoff = Backoff()  # each batch is retried with backoff, then every period, for ever
        assert not backoff.run(intruder.attempt(operation))
        assert backoff.attempts == 6 and len(backoff.slept) == 5
        tries = intruder.wire.log[-6:]
        refusals(tries, "k8s")
        assert len({(a.status, a.body) for a in tries}) == 1  # the same answer every time
    assert not set(intruder.list_guids_in_use()) & {
        mac_like(f"{g:016x}") for g in [*victim_ports, victim_vf]
    }
    unchanged(lab, before)


# ------------------------------------------------------------------------- Together AI fork

TOGETHER = 0x0B01
TOGETHER_LIMITED = 0x0B02  # DEFAULT_LIMITED_PARTITION: the operator creates it, never the fork
TOGETHER_VF = 0x02000000000000B1


def test_together_fork_checks_existence_serialises_writes_and_adds_limited_members(
    lab: Lab,
) -> None:
    client = TogetherIbKubernetes(lab.url, "together", lab.token("together"))
    barrier = Barrier(client)
    host_a, host_b = CLIENTS["together"][1]
    pods = [lab.port(host_a), lab.port(host_b), TOGETHER_VF]
    client.validate()
    assert abs(client.server_time() - datetime.now(UTC)) < timedelta(seconds=2)  # Date is right
    head = client.wire.log[-1]  # the fork reads only its Date; HEAD answers as GET does
    assert (head.method, head.status, head.body) == ("HEAD", 200, b"")
    assert not client.pkey_exists(TOGETHER)  # 200 {}: absent

    assert barrier.can_proceed()
    primary = Backoff()  # addGUIDsToPKeyWithLimitedPartition: each add under the backoff
    assert primary.run(client.attempt(lambda: client.add_guids_to_pkey(TOGETHER, pods)))
    assert primary.attempts == 1 and client.pkey_exists(TOGETHER)
    absent = Backoff()  # the limited key does not exist yet: the fork will not create it
    assert not absent.run(
        client.attempt(lambda: client.add_guids_to_limited_pkey(TOGETHER_LIMITED, pods))
    )
    assert [a.method for a in client.wire.log[-6:]] == ["GET"] * 6  # existence checks only
    body = {"fabric": FABRIC, "name": "storage-limited", "pkey": f"0x{TOGETHER_LIMITED:04x}"}
    lab.api.call("POST", "/v1/tenants/together/partitions", json=body)
    limited = Backoff()
    sent = time.time()  # the server runs on this host's clock
    assert limited.run(
        client.attempt(lambda: client.add_guids_to_limited_pkey(TOGETHER_LIMITED, pods))
    )
    assert limited.attempts == 1

    # A change never looks older than the request that made it (whole seconds, rounded up),
    # so the barrier, stamped with the server's Date before the writes, opens again.
    stamped = barrier.last_call
    updated = client.last_pkey_update()
    assert updated is not None and updated.timestamp() >= sent
    assert stamped is not None and updated >= stamped
    assert barrier.can_proceed()
    assert client.last_pkey_update() == updated  # reads change nothing: monotonic, stable

    rendered = lab.partitions()
    assert rendered[TOGETHER] == dict.fromkeys(pods, "full")
    assert rendered[TOGETHER_LIMITED] == dict.fromkeys(pods, "limited")
    assert lab.ledger()[TOGETHER_VF][:2] == ("together", "bound")
    tables = lab.enforce(*pods[:2])
    for port in pods[:2]:
        assert tables[port][0] == full(TOGETHER)  # ENABLE_INDEX0_FOR_PRIMARY_PKEY
        assert holds(tables[port], TOGETHER_LIMITED) == TOGETHER_LIMITED  # limited: no 0x8000

    # The pod on host_b ends: removed from both, behind the barrier.
    assert barrier.can_proceed()
    client.remove_guids_from_pkey(TOGETHER, [pods[1]])
    client.remove_guids_from_pkey(TOGETHER_LIMITED, [pods[1]])
    updated, stamped = client.last_pkey_update(), barrier.last_call
    assert updated is not None and stamped is not None and updated >= stamped
    tables = lab.enforce(*pods[:2])
    assert holds(tables[pods[0]], TOGETHER) == full(TOGETHER)
    assert holds(tables[pods[1]], TOGETHER) is None
    assert holds(tables[pods[1]], TOGETHER_LIMITED) is None

    intruder = TogetherIbKubernetes(lab.url, "together", lab.token("mallory"))
    before = lab.state()
    assert not intruder.pkey_exists(TOGETHER)  # another tenant's key is {}: absent
    own = [lab.port(MALLORY_HOST)]
    answers = [
        refused(lambda: intruder.add_guids_to_pkey(TOGETHER, own)),
        refused(lambda: intruder.add_guids_to_limited_pkey(MALLORY_PKEY, pods[:1])),
        refused(lambda: intruder.remove_guids_from_pkey(TOGETHER, pods[:1])),
    ]
    unseen = Backoff()  # absent to mallory: the fork never even sends the add
    assert not unseen.run(
        intruder.attempt(lambda: intruder.add_guids_to_limited_pkey(TOGETHER_LIMITED, own))
    )
    assert [a.method for a in intruder.wire.log[-6:]] == ["GET"] * 6
    refusals(answers, "together")
    unchanged(lab, before)


# ------------------------------------------------------------------------------------- NICo

NICO = 0x67  # NICo's own test of PartitionKey: "103" parses to 0x67


def test_nico_health_check_binds_lists_and_unbinds_within_its_10_second_timeout(lab: Lab) -> None:
    nico = Nico(lab.url, lab.token("nico"))
    host_a, host_b = CLIENTS["nico"][1]
    ports = [lab.port(host_a), lab.port(host_a, 1), lab.port(host_b)]

    # check_ib_fabric (crates/ib-fabric/src/lib.rs): version, SM configuration, default partition
    assert nico.version()
    config = nico.sm_config()
    assert config["m_key_per_port"] is False
    default = nico.get_partition(0x7FFF, guids=True, qos=True)
    assert default["membership"] == "limited"  # restricted: not flagged insecure

    key = Nico.pkey(NICO)
    assert key == "0x67"
    nico.bind_ports(key, ports[:2], ipoib=True, membership="full", index0=False)
    # The contract's bare digits are decimal: "103" is 0x67 (as hex it would be 0x103).
    nico.bind_ports("103", ports[2:], ipoib=True, membership="limited", index0=False)
    listed = nico.list_partitions(guids=True)
    assert {p["guid"] for p in listed[NICO]["guids"]} == {f"{g:016x}" for g in ports}
    assert "qos_conf" in nico.list_partitions(guids=False)[NICO]
    got = nico.get_partition(NICO, guids=True, qos=True)
    assert got["partition"] == "api_pkey_0x67"
    members = {p["guid"]: p["membership"] for p in got["guids"]}
    assert members == {
        f"{ports[0]:016x}": "full",
        f"{ports[1]:016x}": "full",
        f"{ports[2]:016x}": "limited",
    }
    nico.update_partition_qos(key, mtu_limit=4, service_level=0, rate_limit=200.0)
    assert nico.wire.log[-1].json().get("ignored", {}).get("rate_limit") == 200.0
    tables = lab.enforce(*ports)
    assert [holds(tables[g], NICO) for g in ports] == [full(NICO), full(NICO), NICO]

    nico.unbind_ports(key, ports[1:2])
    tables = lab.enforce(*ports)
    assert holds(tables[ports[1]], NICO) is None
    assert holds(tables[ports[0]], NICO) == full(NICO)
    with pytest.raises(NotFoundError):  # UFM's 200 {} for an unknown key: NotFound
        nico.get_partition(0x0777, guids=True, qos=False)

    intruder = Nico(lab.url, lab.token("mallory"))
    before = lab.state()
    own = [lab.port(MALLORY_HOST)]
    answers = [
        refused(lambda: intruder.bind_ports(key, own, ipoib=True, membership="full", index0=False)),
        refused(
            lambda: intruder.bind_ports("103", own, ipoib=True, membership="full", index0=False)
        ),
        refused(
            lambda: intruder.bind_ports(
                Nico.pkey(MALLORY_PKEY), ports[:1], ipoib=True, membership="full", index0=False
            )
        ),
        refused(lambda: intruder.unbind_ports(key, ports[:1])),
        refused(
            lambda: intruder.update_partition_qos(key, mtu_limit=2, service_level=1, rate_limit=10)
        ),
    ]
    with pytest.raises(NotFoundError):
        intruder.get_partition(NICO, guids=True, qos=True)
    assert NICO not in intruder.list_partitions(guids=True)
    refusals(answers, "nico")
    unchanged(lab, before)
    slowest = max(nico.wire.log + intruder.wire.log, key=lambda a: a.seconds)
    assert slowest.seconds < Nico.TIMEOUT, slowest


def test_nico_lists_the_compute_ports(lab: Lab) -> None:
    ports = Nico(lab.url, lab.token("nico")).list_ports()
    assert {p["guid"] for p in ports} >= {f"{g:016x}" for g in lab.guids["gpu0005"]}


# ------------------------------------------------------------------------------------ Slurm

SLURM = 0x0E07
JOB_ID = 7 * 0x7FFE + SLURM  # dynamic mode: pkey = job_id % 0x7ffe
# As SLURM_JOB_NODELIST gives contiguous nodes: gpu[0007-0008].
NODELIST = "gpu[0007-0008]"


def test_slurm_prolog_adds_the_jobs_hosts_and_the_epilog_removes_and_releases_them(
    lab: Lab,
) -> None:
    pkey = dynamic_pkey(JOB_ID)
    assert pkey == "0xe07"
    hosts = CLIENTS["slurm"][1]
    ports = [guid for host in hosts for guid in lab.guids[host]]
    slurm = SlurmIntegration(lab.url, "token_auth", token=lab.token("slurm"))
    assert slurm.is_ufm_running()

    kerberos = SlurmIntegration(lab.url, "kerberos_auth")
    before = lab.state()
    assert kerberos.prolog(NODELIST, pkey).status == 501  # logged; the job runs, in no partition
    unchanged(lab, before)

    answer = slurm.prolog(NODELIST, pkey)
    assert (answer.status, answer.json()) == (200, {})
    assert lab.partitions()[SLURM] == dict.fromkeys(ports, "full")  # every CA port of both
    assert {lab.holders()[h] for h in hosts} == {("slurm", "allocated")}
    tables = lab.enforce(*ports)
    assert {holds(tables[g], SLURM) for g in ports} == {full(SLURM)}

    # Another tenant's job whose id wraps onto the same P_Key, and its epilog on this job's key.
    mallory = SlurmIntegration(lab.url, "basic_auth", user="slurm", token=lab.token("mallory"))
    before = lab.state()
    collision = dynamic_pkey(3 * 0x7FFE + SLURM)
    assert collision == pkey
    answers = [
        mallory.prolog(MALLORY_HOST, collision),
        mallory.prolog(NODELIST, hex(MALLORY_PKEY)),  # this job's hosts into its own key
        mallory.epilog(NODELIST, pkey),
    ]
    refusals(answers, "slurm")
    unchanged(lab, before)

    answer = slurm.epilog(NODELIST, pkey)
    assert (answer.status, answer.json()) == (200, {})
    assert SLURM not in lab.partitions()
    assert {lab.holders()[h][0] for h in hosts} == {None}  # released: the job's nodes are free
    tables = lab.enforce(*ports)
    for guid in ports:
        assert keys(tables[guid]) == {0x7FFF}, hex(guid)  # no job key, no tenant key left
    # The next job with the same key, through basic_auth on /ufmRest this time.
    again = SlurmIntegration(lab.url, "basic_auth", user="slurm", token=lab.token("slurm"))
    assert again.prolog(hosts[0], pkey).status == 200
    assert again.epilog(hosts[0], pkey).status == 200


# -------------------------------------------------------------------------- nv-config-manager

NVCM = "0x0c10"


def test_nv_config_manager_creates_merges_with_a_put_and_removes_members(lab: Lab) -> None:
    stale, stale_id = orchestrator(lab.api, "nvcm", "nvcm-rotated-out")
    lab.api.call("DELETE", f"/v1/tokens/{stale_id}")
    nvcm = ConfigManager(lab.url, "nvcm", [stale, lab.token("nvcm")])
    host_a, host_b = CLIENTS["nvcm"][1]
    ports = [lab.port(host_a), lab.port(host_a, 1), lab.port(host_b)]
    guids = [f"{g:016x}" for g in ports]
    pkey = int(NVCM, 16)

    nvcm.validate_pkey_available(NVCM)  # the list without a query
    assert nvcm.tried == [401, 200]  # the rotated-out password first, then the next one
    nvcm.create_pkey(NVCM)
    created = nvcm.verify_pkey_created(NVCM)
    assert created["partition"] == "api_pkey_0xc10"
    with pytest.raises(LookupError):
        nvcm.validate_pkey_available(NVCM)

    nvcm.add_guids(NVCM, guids[:2], ["full", "limited"])
    nvcm.add_guids(NVCM, guids[2:], ["full"])  # read, merge with the first two, PUT all three
    exists, members, ip_over_ib = nvcm.pkey_members(NVCM)
    assert exists and ip_over_ib is True
    assert members == {guids[0]: "full", guids[1]: "limited", guids[2]: "full"}
    tables = lab.enforce(*ports)
    assert [holds(tables[g], pkey) for g in ports] == [full(pkey), pkey, full(pkey)]

    free_port = f"{lab.port(FREE_NODE):016x}"
    nvcm.remove_guids(NVCM, [guids[0], free_port])  # a non-member is a no-op
    _, members, _ = nvcm.pkey_members(NVCM)
    assert members == {guids[1]: "limited", guids[2]: "full"}
    assert lab.holders()[FREE_NODE] == (None, "free")
    tables = lab.enforce(*ports)
    assert holds(tables[ports[0]], pkey) is None

    intruder = ConfigManager(lab.url, "nvcm", [lab.token("mallory")])
    before = lab.state()
    intruder.validate_pkey_available(NVCM)  # mallory does not see the key
    answers = [
        refused(lambda: intruder.create_pkey(NVCM)),
        refused(lambda: intruder.add_guids(NVCM, [f"{lab.port(MALLORY_HOST):016x}"], ["full"])),
        refused(lambda: intruder.add_guids(hex(MALLORY_PKEY), guids[1:2], ["limited"])),
        refused(lambda: intruder.remove_guids(NVCM, guids[1:])),
    ]
    refusals(answers, "nvcm")
    unchanged(lab, before)


# ------------------------------------------------------------------ networking-mlnx-baremetal

SEGMENTATION_ID = 0x0D05  # the Neutron network's segmentation id: P_Key hex(3333)
DEFAULT_LIMITED = ("0xd06",)


def test_networking_mlnx_baremetal_binds_updates_removes_and_deletes(lab: Lab) -> None:
    endpoint = f"{lab.url}/fabrics/{FABRIC}"  # the fabric's own base URL
    driver = MlnxBaremetal(endpoint, "neutron", lab.token("openstack"))
    host_a, host_b = CLIENTS["openstack"][1]
    ports = [lab.port(host_a), lab.port(host_a, 1), lab.port(host_b)]
    client_ids = [ironic_client_id(g) for g in ports]
    pkey, limited = SEGMENTATION_ID, int(DEFAULT_LIMITED[0], 16)

    driver.bind_port(SEGMENTATION_ID, client_ids, DEFAULT_LIMITED)
    listed = driver.list(with_guid=True)
    assert {m["guid"] for m in listed["0xd05"]["guids"]} == {f"{g:016x}" for g in ports}
    assert driver.list()["0xd05"] == {"partition": "api_pkey_0xd05", "ip_over_ib": True}
    one = driver.get("0xd05", with_guid=True)
    assert {m["membership"] for m in one["guids"]} == {"full"}
    assert {m["membership"] for m in driver.get("0xd06", with_guid=True)["guids"]} == {"limited"}
    tables = lab.enforce(*ports)
    for guid in ports:
        assert tables[guid][0] == full(pkey)  # bound with index0
        assert holds(tables[guid], limited) == limited

    driver.update("0xd05", client_ids[:2], index0=True)  # PUT: host_b's port leaves
    driver.remove_guids("0xd06", [*client_ids, ironic_client_id(lab.port(FREE_NODE))])
    assert driver.get("0xd06", with_guid=True).get("guids") == []

    intruder = MlnxBaremetal(endpoint, "neutron", lab.token("mallory"))
    before = lab.state()
    own = [ironic_client_id(lab.port(MALLORY_HOST))]
    answers = [
        refused(lambda: intruder.bind_port(SEGMENTATION_ID, own, ())),
        refused(lambda: intruder.update("0xd05", own, index0=True)),
        refused(lambda: intruder.add_guids(hex(MALLORY_PKEY), client_ids[:1])),
        refused(lambda: intruder.remove_guids("0xd05", client_ids[:1])),
        refused(lambda: intruder.delete("0xd05")),
    ]
    assert intruder.get("0xd05", with_guid=True) == {}
    refusals(answers, "openstack")
    unchanged(lab, before)

    driver.delete("0xd06")
    assert "0xd06" not in driver.list()
    tables = lab.enforce(*ports)
    assert [holds(tables[g], pkey) for g in ports] == [full(pkey), full(pkey), None]
    assert all(holds(tables[g], limited) is None for g in ports)


# ----------------------------------------------------------------------------- ufm_pkeys.py

PKEYS = "0x0f01"


def test_ufm_pkeys_script_sets_reads_and_deletes_with_a_minted_token(lab: Lab) -> None:
    minted = UfmPkeysScript(lab.url, user="admin", password=lab.token("pkeys")).generate_token()
    script = UfmPkeysScript(lab.url, token=minted)  # token auth: /ufmRestV3
    host_a, host_b = CLIENTS["pkeys"][1]
    ports = [lab.port(host_a), lab.port(host_a, 1), lab.port(host_b)]
    guids = [f"{g:016x}" for g in ports]
    pkey = int(PKEYS, 16)

    script.set_pkey(PKEYS, guids, memberships=["full", "limited", "full"], index0=False)
    assert script.get_pkeys()["0xf01"]["partition"] == "api_pkey_0xf01"
    members = {m["guid"]: m["membership"] for m in script.get_pkeys(PKEYS)["guids"]}
    assert members == {guids[0]: "full", guids[1]: "limited", guids[2]: "full"}
    tables = lab.enforce(*ports)
    assert [holds(tables[g], pkey) for g in ports] == [full(pkey), pkey, full(pkey)]

    script.set_pkey(PKEYS, guids[:1])  # replaces: membership "full" for the one left
    assert [m["guid"] for m in script.get_pkeys(PKEYS)["guids"]] == guids[:1]

    intruder = UfmPkeysScript(
        lab.url,
        token=UfmPkeysScript(lab.url, user="admin", password=lab.token("mallory")).generate_token(),
    )
    before = lab.state()
    answers = [
        refused(lambda: intruder.set_pkey(PKEYS, [f"{lab.port(MALLORY_HOST):016x}"])),
        refused(lambda: intruder.set_pkey(hex(MALLORY_PKEY), guids[:1])),
        refused(lambda: intruder.delete_pkey(PKEYS)),
    ]
    assert intruder.get_pkeys(PKEYS) == {}
    refusals(answers, "pkeys")
    unchanged(lab, before)

    tables = lab.enforce(*ports)
    assert [holds(tables[g], pkey) for g in ports] == [full(pkey), None, None]
    script.delete_pkey(PKEYS)
    assert "0xf01" not in script.get_pkeys()
    tables = lab.enforce(*ports)
    assert all(holds(tables[g], pkey) is None for g in ports)


# --------------------------------------------------------------- every route, every style


def styles(lab: Lab, token: str) -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
    """Base URL and headers of each authentication style, for `token`."""
    login = httpx2.post(
        f"{lab.url}/dologin", data={"httpd_username": "mallory", "httpd_password": token}
    )
    assert login.status_code == 200, login.text
    cookie = f"isofabric_ufm_session={login.cookies['isofabric_ufm_session']}"
    return {
        "basic": (f"{lab.url}/ufmRest", (("Authorization", basic("mallory", token)),)),
        "token": (f"{lab.url}/ufmRestV3", (("Authorization", f"Basic {token}"),)),
        "session": (f"{lab.url}/ufmRestV2", (("Cookie", cookie),)),
        "fabric": (
            f"{lab.url}/fabrics/{FABRIC}/ufmRest",
            (("Authorization", basic("mallory", token)),),
        ),
    }


def test_every_route_and_auth_style_refuses_another_tenants_pkey_and_ports(lab: Lab) -> None:
    victim, victim_host = f"0x{ACME_PKEY:x}", CLIENTS["acme"][1][0]
    victim_port = f"{lab.port(victim_host):016x}"
    own_port = f"{lab.port(CLIENTS['mallory'][1][0]):016x}"
    own = f"0x{MALLORY_PKEY:x}"
    writes: list[tuple[str, str, Any]] = [
        ("POST", "/resources/pkeys", {"pkey": victim, "guids": [own_port]}),
        ("POST", "/resources/pkeys/", {"pkey": own, "guids": [victim_port]}),
        ("PUT", "/resources/pkeys", {"pkey": victim, "guids": [own_port]}),
        ("PUT", "/resources/pkeys/", {"pkey": own, "guids": [own_port, victim_port]}),
        ("POST", "/resources/pkeys/add", {"pkey": victim}),
        ("PUT", "/resources/pkeys/qos_conf", {"pkey": victim, "mtu_limit": 2}),
        ("POST", "/resources/pkeys/hosts", {"pkey": victim, "hosts_names": MALLORY_HOST}),
        ("POST", "/resources/pkeys/hosts", {"pkey": own, "hosts_names": victim_host}),
        ("POST", "/actions/remove_guids_from_pkey", {"pkey": victim, "guids": [victim_port]}),
        ("DELETE", f"/resources/pkeys/{victim}/guids/{victim_port}", None),
        ("DELETE", f"/resources/pkeys/{victim}/hosts/{victim_host}", None),
        ("DELETE", f"/resources/pkeys/{victim}", None),
    ]
    before = lab.state()
    for style, (url, headers) in styles(lab, lab.token("mallory")).items():
        wire_headers = (*headers, ("Content-Type", "application/json"))
        for method, path, document in writes:
            body = None if document is None else py_json(document)
            answer = Wire(url, wire_headers).send(method, path, body)
            refusals([answer], "acme")
            assert answer.status == 400, (style, answer)
        for path in (f"/resources/pkeys/{victim}?guids_data=true", f"/resources/pkeys/{victim}"):
            assert Wire(url, wire_headers).send("GET", path).json() == {}, style
        listed = Wire(url, wire_headers).send("GET", "/resources/pkeys?guids_data=true").json()
        assert victim not in listed and victim_port not in str(listed), style
    unchanged(lab, before)
    assert holds(lab.enforce(lab.port(victim_host))[lab.port(victim_host)], ACME_PKEY) == full(
        ACME_PKEY
    )
