"""RoCE deployment through the API (issue 16): SONiC leaf targets, phased rollout in `sync`,
a leaf's CONFIG_DB patch between two snapshots, and drain before reuse on RoCE.

The fabric has three leaves: leaf01 holds every tenant, leaf02 acme and storage, leaf03 globex
only (gpu0005/06's second NICs moved there), so a change affects some leaves and not others.
The agents' side is played by requests; the agent itself is tested in tests/agent and
tests/conformance.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
from dataclasses import dataclass
from typing import Any

import pytest

from policies.roce.patch import apply_patch
from tests.builders import (
    ROCE_FABRIC,
    ROCE_STORAGE_NODES,
    SERVICE,
    api_create_roce_fabric,
    assert_problem,
    created,
    ok,
    roce_inventory,
)

ROCE = f"/v1/fabrics/{ROCE_FABRIC}"
LEAVES = ("leaf01", "leaf02", "leaf03")
PATCH_MEDIA_TYPE = "application/json-patch+json"


def three_leaf_inventory() -> dict[str, Any]:
    """The demo inventory plus leaf03, which gets gpu0005/06's second NICs from leaf02."""
    document = roce_inventory()
    switches = {s["name"]: s for s in document["switches"]}
    leaf03 = copy.deepcopy(switches["leaf02"])
    leaf03.update(name="leaf03", asn=65103, loopback="10.0.0.3", vtep="10.0.1.3")
    document["switches"].append(leaf03)
    for spine, uplink in (("spine01", "Ethernet240"), ("spine02", "Ethernet248")):
        port = {"name": "Ethernet16", "lanes": "16,17,18,19", "speed": 400000}
        switches[spine]["ports"].append({**port, "cable_length": "5m"})
        document["links"].append({"a": f"leaf03:{uplink}", "b": f"{spine}:Ethernet16"})
    for node in document["nodes"]:
        if node["name"] in ("gpu0005", "gpu0006"):
            for nic in node["nics"]:
                if nic["switch"] == "leaf02":
                    nic["switch"] = "leaf03"
    return document


@dataclass(frozen=True)
class Fabric:
    """The fabric every leaf deployed whole (digest `start`), with what the tests change."""

    start: str
    grant_id: str
    segments: dict[str, dict[str, Any]]
    allocations: dict[str, str]


def manifest_digest(client: Any) -> str:
    """Fetch the signed manifest (it retains the snapshot's files); its snapshot digest."""
    envelope = ok(client.get(f"{ROCE}/signed-manifest"))
    return str(json.loads(base64.b64decode(envelope["payload"]))["snapshot_digest"])


def report(client: Any, leaf: str, digest: str | None, **extra: Any) -> Any:
    body = {"state": "applied", "digest": digest, **extra}
    response = client.post(f"{ROCE}/targets/{leaf}/reports", json=body)
    assert response.status_code in (200, 201), response.text
    return response.json()


def sync(client: Any) -> dict[str, Any]:
    return ok(client.get(f"{ROCE}/sync"))


def by_leaf(status: dict[str, Any], member: str) -> dict[str, Any]:
    return {t["name"]: t[member] for t in status["targets"]}


def allocate(client: Any, tenant: str, *nodes: str) -> dict[str, Any]:
    body = {"fabric": ROCE_FABRIC, "nodes": list(nodes)}
    return created(client.post(f"/v1/tenants/{tenant}/allocations", json=body))


@pytest.fixture
def fabric(client: Any) -> Fabric:
    """acme (gpu0001/02, granted storage) and globex (gpu0005/06); every leaf applied it."""
    api_create_roce_fabric(client, three_leaf_inventory())
    for node in ROCE_STORAGE_NODES:
        ok(client.patch(f"{ROCE}/nodes/{node}", json={"role": "storage"}))
    body = {"name": SERVICE, "nodes": list(ROCE_STORAGE_NODES)}
    created(client.post(f"{ROCE}/services", json=body))
    segments, allocations = {}, {}
    for tenant, qos, nodes in (
        ("acme", "gold", ("gpu0001", "gpu0002")),
        ("globex", "bronze", ("gpu0005", "gpu0006")),
        ("research", "gold", ()),
    ):
        created(
            client.post("/v1/tenants", json={"name": tenant, "kind": "external", "qos_class": qos})
        )
        if nodes:
            allocation = allocate(client, tenant, *nodes)
            segments[tenant], allocations[tenant] = allocation["segment"], allocation["id"]
    grant = {"fabric": ROCE_FABRIC, "service": SERVICE}
    grant_id = created(client.post("/v1/tenants/acme/grants", json=grant))["id"]
    for leaf in LEAVES:
        created(client.put(f"{ROCE}/targets/{leaf}", json={"kind": "sonic"}))
    start = manifest_digest(client)
    for leaf in LEAVES:
        report(client, leaf, start, phase=2, observed_digest=start)
    return Fabric(start, grant_id, segments, allocations)


def leaf_config(client: Any, digest: str, leaf: str) -> dict[str, Any]:
    path = f"{ROCE}/snapshots/{digest}/artifacts/sonic/{leaf}/config_db.json"
    document: dict[str, Any] = json.loads(ok_bytes(client.get(path)))
    return document


def ok_bytes(response: Any) -> bytes:
    assert response.status_code == 200, response.text
    content: bytes = response.content
    return content


def patch_of(client: Any, digest: str, leaf: str, **params: Any) -> list[dict[str, Any]]:
    response = client.get(f"{ROCE}/snapshots/{digest}/patches/{leaf}", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == PATCH_MEDIA_TYPE
    operations: list[dict[str, Any]] = response.json()
    return operations


# --- targets --------------------------------------------------------------------------------------


def test_a_sonic_target_is_a_leaf_with_a_vtep_of_the_fabric(client, fabric, db_dump):
    before = db_dump()

    spine = client.put(f"{ROCE}/targets/spine01", json={"kind": "sonic"})
    unknown = client.put(f"{ROCE}/targets/leaf09", json={"kind": "sonic"})
    other_kind = client.put(f"{ROCE}/targets/leaf01", json={"kind": "opensm"})

    assert_problem(spine, 409, "conflict")
    assert "spine01" in spine.json()["detail"] and "not a leaf" in spine.json()["detail"]
    assert_problem(unknown, 409, "conflict")
    assert "not a switch" in unknown.json()["detail"]
    assert_problem(other_kind, 409, "conflict")
    assert db_dump() == before
    again = client.put(f"{ROCE}/targets/leaf01", json={"kind": "sonic"})
    assert again.status_code == 200 and again.json()["kind"] == "sonic"


def test_a_phase_1_report_is_stored_with_its_phase_and_holds_no_snapshot(client, fabric):
    client.delete(f"/v1/tenants/acme/grants/{fabric.grant_id}")
    desired = sync(client)["desired"]

    first = report(client, "leaf01", desired, phase=1, observed_digest=desired)
    whole = report(client, "leaf01", desired, phase=2, observed_digest=desired)

    assert first["phase"] == 1 and first["changed_state"] is True
    assert whole["phase"] == 2 and whole["changed_state"] is True  # the phase is a change
    receipts = ok(client.get(f"{ROCE}/deployments", params={"limit": 100}))["data"]
    assert [r["phase"] for r in receipts if r["target"] == "leaf01"] == [2, 1, 2]
    assert ok(client.get(f"{ROCE}/targets/leaf01"))["deployed"] == desired


# --- phased rollout -------------------------------------------------------------------------------


def test_every_leaf_that_applied_the_desired_snapshot_is_in_sync_in_phase_2(client, fabric):
    status = sync(client)

    assert status["desired"] == fabric.start and status["in_sync"] is True
    assert status["phase"] == 2 and status["behind"] == []
    assert by_leaf(status, "kind") == dict.fromkeys(LEAVES, "sonic")
    assert by_leaf(status, "phase") == dict.fromkeys(LEAVES, 2)
    assert by_leaf(status, "affected") == dict.fromkeys(LEAVES, False)


def test_an_onboarding_removes_nothing_so_it_is_phase_2_at_once(client, fabric):
    allocate(client, "research", "gpu0003")

    status = sync(client)

    assert status["phase"] == 2 and status["in_sync"] is False
    assert status["behind"] == list(LEAVES)
    assert by_leaf(status, "affected") == dict.fromkeys(LEAVES, False)
    assert by_leaf(status, "phase") == dict.fromkeys(LEAVES, None)


def test_a_revoked_grant_is_phase_1_until_every_affected_leaf_removed_its_imports(client, fabric):
    assert client.delete(f"/v1/tenants/acme/grants/{fabric.grant_id}").status_code == 204
    desired = sync(client)["desired"]

    status = sync(client)
    assert status["phase"] == 1
    # leaf03 carries neither acme's nor storage's VRF: it removes nothing, and never reports.
    assert by_leaf(status, "affected") == {"leaf01": True, "leaf02": True, "leaf03": False}

    report(client, "leaf01", desired, phase=1)
    status = sync(client)
    assert status["phase"] == 1 and by_leaf(status, "phase")["leaf01"] == 1
    assert by_leaf(status, "deployed")["leaf01"] == fabric.start  # phase 1 holds no snapshot

    report(client, "leaf02", desired, phase=1)
    assert sync(client)["phase"] == 2

    report(client, "leaf01", desired, phase=2)
    status = sync(client)
    assert status["phase"] == 2 and status["behind"] == ["leaf02", "leaf03"]
    assert by_leaf(status, "phase") == {"leaf01": 2, "leaf02": 1, "leaf03": None}
    assert by_leaf(status, "behind") == {"leaf01": False, "leaf02": True, "leaf03": True}


def test_an_affected_leaf_that_is_down_holds_the_fabric_in_phase_1(client, fabric):
    client.delete(f"/v1/tenants/acme/grants/{fabric.grant_id}")
    desired = sync(client)["desired"]
    report(client, "leaf01", desired, phase=1)
    report(client, "leaf02", None, state="failed", detail="CONFIG_DB unreachable")

    status = sync(client)

    assert status["phase"] == 1
    assert by_leaf(status, "state") == {
        "leaf01": "applied",
        "leaf02": "failed",
        "leaf03": "applied",
    }
    assert status["behind"] == list(LEAVES)


def test_an_offboarding_takes_the_ports_out_of_the_vlan_first(client, fabric):
    assert client.delete("/v1/tenants/globex").status_code in (200, 204)

    status = sync(client)

    assert status["phase"] == 1
    assert by_leaf(status, "affected") == {"leaf01": True, "leaf02": False, "leaf03": True}
    vlan = fabric.segments["globex"]["vlan"]
    operations = patch_of(client, status["desired"], "leaf01", **{"from": fabric.start})
    removed = {op["path"] for op in operations if op["op"] == "remove"}
    assert {f"/VLAN_MEMBER/Vlan{vlan}|Ethernet32", f"/VLAN_MEMBER/Vlan{vlan}|Ethernet40"} <= removed
    assert f"/VLAN/Vlan{vlan}" in removed
    # leaf03's only members were globex's: the table goes whole (GCU refuses an empty one)
    on_leaf03 = patch_of(client, status["desired"], "leaf03", **{"from": fabric.start})
    assert {"op": "remove", "path": "/VLAN_MEMBER"} in on_leaf03


# --- patches --------------------------------------------------------------------------------------


def test_a_patch_takes_the_leaf_from_one_snapshot_to_the_other_with_escaped_pointers(
    client, fabric
):
    segment = allocate(client, "research", "gpu0003")["segment"]
    desired = sync(client)["desired"]

    operations = patch_of(client, desired, "leaf01", **{"from": fabric.start})

    subnet = ipaddress.ip_network(segment["subnet"])
    key = f"Vlan{segment['vlan']}|{subnet.network_address + 1}/{subnet.prefixlen}"
    pointer = "/VLAN_INTERFACE/" + key.replace("~", "~0").replace("/", "~1")
    assert pointer.endswith(f"~1{subnet.prefixlen}")
    assert {"op": "add", "path": pointer, "value": {}} in operations
    before, after = (
        leaf_config(client, fabric.start, "leaf01"),
        leaf_config(client, desired, "leaf01"),
    )
    assert apply_patch(before, operations) == after
    assert patch_of(client, desired, "leaf01") == operations  # from: the leaf's deployed one
    assert patch_of(client, desired, "leaf01", **{"from": desired}) == []


def test_a_patch_that_changes_declared_keys_needs_allow_disruptive(client, fabric):
    inventory = three_leaf_inventory()
    leaf01 = next(s for s in inventory["switches"] if s["name"] == "leaf01")
    leaf01["ports"][0]["speed"] = 200000
    ok(client.put(f"{ROCE}/topology", json=inventory))
    desired = sync(client)["desired"]
    url = f"{ROCE}/snapshots/{desired}/patches/leaf01"

    refused = client.get(url, params={"from": fabric.start})
    allowed = patch_of(client, desired, "leaf01", **{"from": fabric.start}, allow_disruptive="true")

    body = assert_problem(refused, 409, "disruptive-change")
    assert "/PORT/Ethernet0/speed" in body["paths"]
    assert {"op": "replace", "path": "/PORT/Ethernet0/speed", "value": "200000"} in allowed


def test_a_patch_of_an_unknown_or_pruned_snapshot_or_leaf_is_refused(make_client, fabric):
    client = make_client(snapshot_retain=1)
    pruned = allocate(client, "research", "gpu0003")
    middle = manifest_digest(client)
    client.delete(f"/v1/tenants/research/allocations/{pruned['id']}")
    allocate(client, "research", "gpu0004")
    newest = manifest_digest(client)  # retains the newest, prunes `middle`
    unknown = "v2:" + "0" * 64

    def get(digest: str, leaf: str, **params: str) -> Any:
        return client.get(f"{ROCE}/snapshots/{digest}/patches/{leaf}", params=params)

    assert_problem(get(newest, "leaf01", **{"from": middle}), 410, "not-retained")
    assert_problem(get(middle, "leaf01", **{"from": newest}), 410, "not-retained")
    assert_problem(get(unknown, "leaf01", **{"from": newest}), 404, "not-found")
    assert_problem(get(newest, "leaf01", **{"from": unknown}), 404, "not-found")
    assert_problem(get(newest, "spine01", **{"from": newest}), 404, "not-found")
    assert_problem(get(newest, "leaf09"), 404, "not-found")
    assert_problem(get("nope", "leaf01"), 422)
    assert_problem(get(newest, "leaf01", **{"from": "nope"}), 422)
    assert client.delete(f"{ROCE}/targets/leaf03").status_code == 204
    missing = assert_problem(get(newest, "leaf03"), 422, "validation-error")
    assert "from" in missing["detail"]


def test_an_agent_reads_its_own_leafs_patch_only(make_client, fabric):
    client = make_client(admin_token="admin")
    client.headers.update({"Authorization": "Bearer admin"})
    body = {"name": "agent", "role": "agent", "fabric": ROCE_FABRIC, "target": "leaf01"}
    secret = created(client.post("/v1/tokens", json=body))["token"]
    agent = {"Authorization": f"Bearer {secret}"}
    url = f"{ROCE}/snapshots/{fabric.start}/patches/"

    own = client.get(url + "leaf01", headers=agent)
    other = client.get(url + "leaf02", headers=agent)

    assert own.status_code == 200 and own.json() == []
    assert_problem(other, 403, "forbidden")


# --- drain before reuse ---------------------------------------------------------------------------


def test_a_released_host_drains_until_every_leaf_read_back_its_removal(client, fabric):
    allocation = allocate(client, "research", "gpu0003")
    holding = manifest_digest(client)
    for leaf in LEAVES:
        report(client, leaf, holding, phase=2, observed_digest=holding)
    client.delete(f"/v1/tenants/research/allocations/{allocation['id']}")
    removal = manifest_digest(client)

    def state() -> str:
        return str(ok(client.get(f"{ROCE}/nodes/gpu0003"))["state"])

    assert state() == "draining"
    report(client, "leaf01", removal, phase=1, observed_digest=removal)
    assert state() == "draining"  # phase 1 is only part of the snapshot
    report(client, "leaf01", removal, phase=2, observed_digest=removal)
    report(client, "leaf02", removal, phase=2, observed_digest=removal)
    report(client, "leaf03", removal, phase=2)  # no read-back that matched
    assert state() == "draining"
    report(client, "leaf03", removal, phase=2, observed_digest=removal)
    assert state() == "free"


def test_a_host_on_a_leaf_without_a_target_says_so_until_an_operator_forces_its_drain(
    client, fabric
):
    assert client.delete(f"{ROCE}/targets/leaf03").status_code == 204
    assert sync(client)["untargeted"] == ["leaf03"]  # globex's gpu0005/06 have eth1 there
    client.delete(f"/v1/tenants/globex/allocations/{fabric.allocations['globex']}")
    removal = manifest_digest(client)
    for leaf in ("leaf01", "leaf02"):
        report(client, leaf, removal, phase=2, observed_digest=removal)

    node = ok(client.get(f"{ROCE}/nodes/gpu0005"))
    status = sync(client)

    assert node["state"] == "draining"
    assert (node["drain"]["waiting_for"], node["drain"]["untargeted"]) == ([], ["leaf03"])
    assert node["drain"]["reason"].startswith("leaf leaf03 carries the host's ports and has no")
    assert (status["untargeted"], status["in_sync"]) == ([], True)  # leaf03 carries no one now
    forced = client.post(f"{ROCE}/nodes/gpu0005/force-drain", json={"reason": "leaf03 checked"})
    assert ok(forced) == {"node": "gpu0005", "state": "free"}
    assert "drain" not in ok(client.get(f"{ROCE}/nodes/gpu0005"))


def test_an_agent_reads_its_own_leafs_files_only(make_client, fabric):
    client = make_client(admin_token="admin")
    client.headers.update({"Authorization": "Bearer admin"})
    body = {"name": "agent", "role": "agent", "fabric": ROCE_FABRIC, "target": "leaf01"}
    secret = created(client.post("/v1/tokens", json=body))["token"]
    agent = {"Authorization": f"Bearer {secret}"}
    files = f"{ROCE}/snapshots/{fabric.start}/artifacts/"

    for leaf, status in (("leaf01", 200), ("leaf02", 403)):
        for path in (f"sonic/{leaf}/config_db.json", f"frr/{leaf}/frr.conf"):
            assert client.get(files + path, headers=agent).status_code == status, path
            assert client.get(f"{ROCE}/artifacts/{path}", headers=agent).status_code == status


def test_a_leaf_whose_agent_leaves_frr_alone_never_holds_a_changed_frr_conf(client, fabric):
    client.delete(f"/v1/tenants/acme/grants/{fabric.grant_id}")  # removes route-target imports
    desired = sync(client)["desired"]
    config_db_only = {"covers": ["config_db"]}
    report(client, "leaf01", desired, phase=1, **config_db_only)
    report(client, "leaf02", desired, phase=1, covers=["config_db", "frr"])

    status = sync(client)
    assert status["phase"] == 1  # leaf01 still imports the revoked route target
    assert by_leaf(status, "phase") == {"leaf01": None, "leaf02": 1, "leaf03": None}
    assert by_leaf(status, "covers")["leaf01"] == ["config_db"]

    for leaf in LEAVES:
        report(client, leaf, desired, phase=2, observed_digest=desired, **config_db_only)
    status = sync(client)
    assert status["in_sync"] is False
    assert status["behind"] == ["leaf01", "leaf02"]  # leaf03's frr.conf did not change
    assert by_leaf(status, "frr_in_place") == {"leaf01": False, "leaf02": False, "leaf03": True}

    report(client, "leaf01", desired, phase=2, observed_digest=desired)  # an agent with FRR
    report(client, "leaf02", desired, phase=2, observed_digest=desired, covers=["config_db", "frr"])
    assert sync(client)["in_sync"] is True


def test_an_unchanged_frr_conf_counts_as_held_by_a_config_db_only_leaf(client, fabric):
    allocate(client, "research", "gpu0003")
    desired = manifest_digest(client)
    for leaf in LEAVES:
        report(client, leaf, desired, phase=2, observed_digest=desired, covers=["config_db"])

    status = sync(client)

    unchanged = {
        leaf: frr_conf(client, desired, leaf) == frr_conf(client, fabric.start, leaf)
        for leaf in LEAVES
    }
    assert set(unchanged.values()) == {True, False}  # the fixture's topology has both kinds
    assert by_leaf(status, "frr_in_place") == unchanged
    assert status["behind"] == [leaf for leaf, same in unchanged.items() if not same]


@pytest.mark.parametrize("covers", [["frr"], ["config_db", "config_db"], [], ["bgp"], "frr"])
def test_covers_names_config_db_once(client, fabric, db_dump, covers):
    before = db_dump()

    body = {"state": "applied", "digest": fabric.start, "covers": covers}
    response = client.post(f"{ROCE}/targets/leaf01/reports", json=body)

    assert_problem(response, 422)
    assert db_dump() == before


def frr_conf(client: Any, digest: str, leaf: str) -> bytes:
    return ok_bytes(client.get(f"{ROCE}/snapshots/{digest}/artifacts/frr/{leaf}/frr.conf"))
