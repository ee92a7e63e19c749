"""Deployment through the API (issue 11): targets, the signed manifest, snapshot history, agent
tokens, reports, sync status and drain-before-reuse. The agent itself is tested in
tests/conformance/ against a real OpenSM; here its side of the contract is played by requests."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from policies.errors import InvalidValueError
from policies.evidence.keyring import keyring_keys
from policies.evidence.manifest import verify_manifest
from tenancy.store import key_store
from tests.builders import (
    ARTIFACT_PATHS,
    FABRIC,
    Onboarded,
    api_create_fabric,
    assert_problem,
    created,
    ok,
    rows,
    sha256_hex,
)

IB = f"/v1/fabrics/{FABRIC}"
FREE_NODE = "gpu0007"


def trusted_keys(client: Any) -> list[Any]:
    path = client.app.state.uow.settings.keyring_path
    return list(keyring_keys(key_store.read_keyring(path)).values())


def signed_manifest(client: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return ok(client.get(f"{IB}/signed-manifest", headers=headers or {}))


def manifest_digest(envelope: dict[str, Any]) -> str:
    return str(json.loads(base64.b64decode(envelope["payload"]))["snapshot_digest"])


def register(client: Any, name: str = "sm-a") -> dict[str, Any]:
    return created(client.put(f"{IB}/targets/{name}", json={"kind": "opensm"}))


def report(client: Any, state: str, digest: str | None, name: str = "sm-a", **extra: Any) -> Any:
    body = {"state": state, "digest": digest, "role": "master", **extra}
    return client.post(f"{IB}/targets/{name}/reports", json=body)


def allocate(client: Any, tenant: str, node: str) -> dict[str, Any]:
    body = {"fabric": FABRIC, "nodes": [node]}
    return created(client.post(f"/v1/tenants/{tenant}/allocations", json=body))


def release(client: Any, tenant: str, allocation_id: str) -> None:
    response = client.delete(f"/v1/tenants/{tenant}/allocations/{allocation_id}")
    assert response.status_code == 204, response.text


def node_state(client: Any, node: str) -> str:
    return str(ok(client.get(f"{IB}/nodes/{node}"))["state"])


def current_digest(client: Any) -> str:
    return str(ok(client.get(f"{IB}/verification"))["snapshot_digest"])


# --- targets ------------------------------------------------------------------------------------


def test_a_target_is_registered_once_and_listed_with_its_state(client, onboarded: Onboarded):
    first = register(client)
    again = client.put(f"{IB}/targets/sm-a", json={"kind": "opensm"})

    assert again.status_code == 200
    assert again.json() == first
    assert first["state"] is None and first["role"] is None and first["deployed"] is None
    assert [t["name"] for t in ok(client.get(f"{IB}/targets"))["data"]] == ["sm-a"]


def test_a_target_read_with_get_is_accepted_back_as_it_is(client, onboarded: Onboarded, db_dump):
    register(client)
    report(client, "applied", current_digest(client))
    target = ok(client.get(f"{IB}/targets/sm-a"))
    assert target["state"] == "applied"

    again = client.put(f"{IB}/targets/sm-a", json=target)

    assert again.status_code == 200, again.text
    assert ok(client.get(f"{IB}/targets/sm-a")) == target
    before = db_dump()
    renamed = client.put(f"{IB}/targets/sm-a", json={**target, "name": "sm-b"})
    assert assert_problem(renamed, 422, "validation-error")["pointer"] == "/name"
    assert db_dump() == before


def test_an_opensm_target_is_refused_on_a_roce_fabric(client, roce_onboarded, db_dump):
    before = db_dump()

    response = client.put("/v1/fabrics/roce-west/targets/sm-a", json={"kind": "opensm"})

    assert_problem(response, 409, "conflict")
    assert db_dump() == before


# --- the signed manifest and the snapshot history -----------------------------------------------


def test_the_signed_manifest_binds_the_files_to_the_verified_snapshot(client, onboarded):
    envelope = signed_manifest(client)

    manifest = verify_manifest(envelope, trusted_keys(client), fabric=FABRIC)

    assert manifest.snapshot_digest == current_digest(client)
    assert sorted(manifest.files) == sorted(ARTIFACT_PATHS)
    for path, entry in manifest.files.items():
        body = client.get(f"{IB}/artifacts/{path}").content
        assert entry.sha256 == sha256_hex(body) and entry.bytes == len(body)


def test_a_manifest_checked_with_another_key_or_for_another_fabric_is_refused(client, onboarded):
    envelope = signed_manifest(client)

    with pytest.raises(InvalidValueError, match="signature"):
        verify_manifest(envelope, [Ed25519PrivateKey.generate().public_key()], fabric=FABRIC)
    with pytest.raises(InvalidValueError, match="fabric"):
        verify_manifest(envelope, trusted_keys(client), fabric="ib-west")


def test_a_snapshots_files_stay_downloadable_by_digest_after_the_fabric_moves_on(client, onboarded):
    envelope = signed_manifest(client)
    old = verify_manifest(envelope, trusted_keys(client), fabric=FABRIC)
    allocate(client, "acme", FREE_NODE)

    for path, entry in old.files.items():
        response = client.get(f"{IB}/snapshots/{old.snapshot_digest}/artifacts/{path}")
        assert response.status_code == 200, response.text
        assert sha256_hex(response.content) == entry.sha256
    new = current_digest(client)
    assert new != old.snapshot_digest
    live = client.get(f"{IB}/artifacts/opensm/partitions.conf").content
    assert client.get(f"{IB}/snapshots/{new}/artifacts/opensm/partitions.conf").content == live


def test_files_carry_no_snapshot_digest_so_unchanged_files_keep_their_bytes(client, onboarded):
    before = {p: client.get(f"{IB}/artifacts/{p}").content for p in ARTIFACT_PATHS}
    allocate(client, "acme", FREE_NODE)
    after = {p: client.get(f"{IB}/artifacts/{p}").content for p in ARTIFACT_PATHS}

    assert before["opensm/partitions.conf"] != after["opensm/partitions.conf"]
    assert before["opensm/opensm.conf"] == after["opensm/opensm.conf"]
    assert before["opensm/qos-policy.conf"] == after["opensm/qos-policy.conf"]


def test_the_history_lists_every_committed_state_newest_first(client, onboarded):
    first = current_digest(client)
    allocation = allocate(client, "acme", FREE_NODE)
    second = current_digest(client)
    release(client, "acme", allocation["id"])

    history = ok(client.get(f"{IB}/snapshots"))["data"]

    assert [s["digest"] for s in history[:3]] == [first, second, first]
    assert [s["current"] for s in history[:3]] == [True, False, False]
    indices = [s["audit_index"] for s in history]
    assert indices == sorted(indices, reverse=True)
    entries = ok(client.get("/v1/audit/entries", params={"limit": 1000}))["data"]
    changed = [e for e in entries if e["fabric"] == FABRIC and e["digest_after"]]
    assert {e["index"] for e in changed} >= set(indices)


def test_pruned_snapshots_answer_410_and_unknown_ones_404(make_client, onboarded):
    client = make_client(snapshot_retain=1)
    old = manifest_digest(signed_manifest(client))
    allocate(client, "acme", FREE_NODE)
    signed_manifest(client)  # retains the new snapshot, prunes the old one

    gone = client.get(f"{IB}/snapshots/{old}/artifacts/opensm/partitions.conf")
    unknown = client.get(f"{IB}/snapshots/sha256:{'0' * 64}/artifacts/opensm/partitions.conf")

    assert_problem(gone, 410, "not-retained")
    assert_problem(unknown, 404, "not-found")
    assert_problem(client.get(f"{IB}/snapshots/nope/artifacts/opensm/partitions.conf"), 422)


def test_a_targets_deployed_snapshot_is_kept_beyond_the_retention_count(make_client, onboarded):
    client = make_client(snapshot_retain=1)
    register(client)
    deployed = manifest_digest(signed_manifest(client))
    created(report(client, "applied", deployed))
    allocate(client, "acme", FREE_NODE)
    signed_manifest(client)

    kept = client.get(f"{IB}/snapshots/{deployed}/artifacts/opensm/partitions.conf")

    assert kept.status_code == 200, kept.text


def test_unchanged_files_are_stored_once(make_client, onboarded, engine):
    client = make_client()
    signed_manifest(client)
    allocate(client, "acme", FREE_NODE)
    signed_manifest(client)

    assert rows(engine, "SELECT count(*) FROM snapshot_file") == [(6,)]
    assert rows(engine, "SELECT count(*) FROM artifact_blob") == [(4,)]


def test_opensm_conf_is_retained_sealed_and_downloads_as_signed(client, onboarded, engine):
    envelope = signed_manifest(client)
    signed = verify_manifest(envelope, trusted_keys(client), fabric=FABRIC)
    allocate(client, "acme", FREE_NODE)  # the snapshot is no longer current: kept bytes only

    url = f"{IB}/snapshots/{signed.snapshot_digest}/artifacts/opensm/opensm.conf"
    downloaded = client.get(url)

    assert downloaded.status_code == 200, downloaded.text
    assert sha256_hex(downloaded.content) == signed.files["opensm/opensm.conf"].sha256
    stored = rows(engine, "SELECT sealed, content FROM artifact_blob")
    assert sorted(sealed for sealed, _ in stored) == [False, False, True]
    sealed_content = next(bytes(content) for sealed, content in stored if sealed)
    with pytest.raises(zlib.error):
        zlib.decompress(sealed_content)


def test_after_the_subnet_keys_change_an_older_opensm_conf_is_not_retained(make_client, onboarded):
    old = manifest_digest(signed_manifest(make_client()))
    client = make_client()
    allocate(client, "acme", FREE_NODE)
    rekeyed = make_client(opensm_m_key=0x8A, opensm_sm_key=0x8B, opensm_sa_key=0x8C)

    secret = rekeyed.get(f"{IB}/snapshots/{old}/artifacts/opensm/opensm.conf")
    plain = rekeyed.get(f"{IB}/snapshots/{old}/artifacts/opensm/partitions.conf")

    assert_problem(secret, 410, "not-retained")
    assert plain.status_code == 200, plain.text
    current = current_digest(rekeyed)
    live = rekeyed.get(f"{IB}/artifacts/opensm/opensm.conf").content
    assert b"m_key 0x000000000000008a" in live
    assert rekeyed.get(f"{IB}/snapshots/{current}/artifacts/opensm/opensm.conf").content == live


def test_an_opensm_target_reports_no_leaf_parts(client, onboarded, db_dump):
    register(client)
    digest = current_digest(client)  # on PostgreSQL a read stores the shared read cache
    before = db_dump()

    response = report(client, "applied", digest, covers=["config_db"])

    assert_problem(response, 422)
    assert "only a RoCE leaf covers parts" in response.json()["detail"]
    assert db_dump() == before


# --- agent tokens -------------------------------------------------------------------------------


def agent_token(client: Any, target: str = "sm-a", fabric: str = FABRIC) -> dict[str, str]:
    body = {"name": "agent", "role": "agent", "fabric": fabric, "target": target}
    secret = created(client.post("/v1/tokens", json=body))["token"]
    return {"Authorization": f"Bearer {secret}"}


def agent_world(make_client: Any) -> tuple[Any, dict[str, str]]:
    """A closed service (admin token) with targets sm-a and sm-b and sm-a's agent token."""
    client = make_client(admin_token="admin")
    admin = {"Authorization": "Bearer admin"}
    client.headers.update(admin)
    register(client, "sm-a")
    register(client, "sm-b")
    headers = agent_token(client)
    return client, headers


@pytest.fixture
def agent(make_client, onboarded) -> tuple[Any, dict[str, str]]:
    return agent_world(make_client)


def test_an_agent_reads_its_fabrics_files_and_reports_for_its_target(agent):
    client, headers = agent
    envelope = signed_manifest(client, headers)
    digest = manifest_digest(envelope)

    for path in ARTIFACT_PATHS:
        url = f"{IB}/snapshots/{digest}/artifacts/{path}"
        assert client.get(url, headers=headers).status_code == 200
    body = {"state": "applied", "digest": digest, "role": "master"}
    stored = created(client.post(f"{IB}/targets/sm-a/reports", json=body, headers=headers))
    assert stored["principal"].startswith("token:agent:")
    assert ok(client.get(f"{IB}/sync", headers=headers))["desired"] == digest


# --- reports, receipts and sync -----------------------------------------------------------------


def test_a_report_that_changes_state_is_a_receipt_and_a_repeat_only_touches_last_seen(
    client, onboarded
):
    register(client)
    digest = manifest_digest(signed_manifest(client))

    first = report(client, "applied", digest, durations={"total": 1.5}, ports_read=12)
    repeat = report(client, "applied", digest, durations={"total": 1.2}, ports_read=12)

    assert first.status_code == 201 and repeat.status_code == 200
    assert repeat.json()["changed_state"] is False and repeat.json()["id"] == first.json()["id"]
    assert ok(client.get(f"{IB}/deployments"))["count"] == 1
    target = ok(client.get(f"{IB}/targets/sm-a"))
    assert target["state"] == "applied" and target["deployed"] == digest
    assert target["role"] == "master" and target["last_seen_at"] >= target["reported_at"]
    entries = ok(client.get("/v1/audit/entries", params={"limit": 1000}))["data"]
    receipts = [e for e in entries if e["action"] == "deploy.applied"]
    assert [e["target"] for e in receipts] == [f"fabrics/{FABRIC}/targets/sm-a@{digest}"]


def test_sync_holds_only_when_every_target_applied_the_desired_snapshot(client, onboarded):
    register(client, "sm-a")
    register(client, "sm-b")
    digest = manifest_digest(signed_manifest(client))
    assert ok(client.get(f"{IB}/sync")) | {"targets": []} == {
        "desired": digest,
        "in_sync": False,
        "phase": None,  # InfiniBand deploys whole snapshots: no phases
        "behind": ["sm-a", "sm-b"],
        "untargeted": [],  # RoCE leaves only: OpenSM targets enforce the whole fabric
        "targets": [],
    }

    created(report(client, "applied", digest, name="sm-a"))
    assert ok(client.get(f"{IB}/sync"))["in_sync"] is False
    created(report(client, "applied", digest, name="sm-b", role="standby"))
    assert ok(client.get(f"{IB}/sync"))["in_sync"] is True
    assert {t["role"] for t in ok(client.get(f"{IB}/targets"))["data"]} == {"master", "standby"}

    allocate(client, "acme", FREE_NODE)
    status = ok(client.get(f"{IB}/sync"))
    assert status["in_sync"] is False and status["desired"] != digest
    assert {t["deployed"] for t in status["targets"]} == {digest}


def test_an_opensm_target_reports_no_phase(client, onboarded, db_dump):
    register(client)
    digest = manifest_digest(signed_manifest(client))
    before = db_dump()

    response = report(client, "applied", digest, phase=1)

    assert_problem(response, 422, "validation-error")
    assert db_dump() == before


def test_a_rolled_back_report_keeps_the_mismatches_and_what_the_target_enforces(client, onboarded):
    register(client)
    old = manifest_digest(signed_manifest(client))
    created(report(client, "applied", old))
    allocate(client, "acme", FREE_NODE)
    new = manifest_digest(signed_manifest(client))
    mismatch = {"guid": "0x0002c90300001000", "missing": ["0x8101"], "unexpected": []}

    body = created(report(client, "rolled_back", new, observed_digest=old, mismatches=[mismatch]))

    assert body["mismatches"] == [mismatch]
    status = ok(client.get(f"{IB}/sync"))
    assert status["in_sync"] is False
    assert status["targets"][0] | {"reported_at": None} == {
        "name": "sm-a",
        "kind": "opensm",
        "deployed": old,
        "state": "rolled_back",
        "reported_at": None,
        "mismatches": [mismatch],
        "phase": None,
        "behind": True,
        "affected": False,
        "covers": None,  # RoCE leaves only
        "frr_in_place": None,
    }
    assert status["behind"] == ["sm-a"]


# --- drain before reuse -------------------------------------------------------------------------


def test_without_targets_a_released_node_is_free_at_once(client, onboarded):
    allocation = allocate(client, "acme", FREE_NODE)
    release(client, "acme", allocation["id"])

    assert node_state(client, FREE_NODE) == "free"


def test_a_released_node_drains_until_every_target_applied_its_removal(client, onboarded):
    register(client, "sm-a")
    register(client, "sm-b")
    allocation = allocate(client, "acme", FREE_NODE)
    holding = manifest_digest(signed_manifest(client))
    created(report(client, "applied", holding, name="sm-a"))
    created(report(client, "applied", holding, name="sm-b"))
    release(client, "acme", allocation["id"])
    removal = manifest_digest(signed_manifest(client))

    assert node_state(client, FREE_NODE) == "draining"
    body = {"fabric": FABRIC, "nodes": [FREE_NODE]}
    assert_problem(client.post("/v1/tenants/globex/allocations", json=body), 409)
    created(report(client, "applied", removal, name="sm-a", observed_digest=removal))
    assert node_state(client, FREE_NODE) == "draining"  # the master read it back; sm-b not yet
    created(report(client, "rolled_back", removal, name="sm-b", observed_digest=holding))
    assert node_state(client, FREE_NODE) == "draining"
    created(report(client, "applied", removal, name="sm-b", role="standby"))
    assert node_state(client, FREE_NODE) == "free"
    allocate(client, "globex", FREE_NODE)
    entries = ok(client.get("/v1/audit/entries", params={"limit": 1000}))["data"]
    assert f"fabrics/{FABRIC}/nodes/{FREE_NODE}" in {
        e["target"] for e in entries if e["action"] == "node.drained"
    }


def test_a_draining_node_says_what_its_drain_waits_for_and_others_leave_it_out(client, onboarded):
    register(client, "sm-a")
    register(client, "sm-b")
    allocation = allocate(client, "acme", FREE_NODE)
    assert "drain" not in ok(client.get(f"{IB}/nodes/{FREE_NODE}"))
    release(client, "acme", allocation["id"])
    removal = manifest_digest(signed_manifest(client))
    created(report(client, "applied", removal, name="sm-a", role="standby"))

    node = ok(client.get(f"{IB}/nodes/{FREE_NODE}"))
    listed = ok(client.get(f"{IB}/nodes", params={"state": "draining"}))["data"]

    assert node["drain"] == {
        "waiting_for": ["sm-b"],
        "untargeted": [],  # RoCE leaves only
        "reason": "waiting for sm-b to hold a snapshot without the node's previous owner; "
        "waiting for a master's read-back to match a snapshot without the node's previous owner",
    }
    assert [n["drain"] for n in listed if n["name"] == FREE_NODE] == [node["drain"]]
    every = ok(client.get(f"{IB}/nodes", params={"limit": 100}))["data"]
    assert all(("drain" in n) == (n["state"] == "draining") for n in every)


def test_offboarding_drains_every_node_of_the_tenant(client, onboarded):
    register(client)
    assert client.delete("/v1/tenants/globex").status_code in (200, 204)

    states = {n["name"]: n["state"] for n in ok(client.get(f"{IB}/nodes"))["data"]}
    assert [name for name, state in states.items() if state == "draining"] == ["gpu0005", "gpu0006"]


def test_an_operator_can_force_a_drain_with_a_reason(client, onboarded):
    register(client)
    allocation = allocate(client, "acme", FREE_NODE)
    release(client, "acme", allocation["id"])

    body = ok(client.post(f"{IB}/nodes/{FREE_NODE}/force-drain", json={"reason": "SM replaced"}))

    assert body == {"node": FREE_NODE, "state": "free"}
    entries = ok(client.get("/v1/audit/entries", params={"limit": 1000}))["data"]
    assert entries[-1]["action"] == "node.force_drain"
    assert entries[-1]["target"] == f"fabrics/{FABRIC}/nodes/{FREE_NODE}: SM replaced"
    assert_problem(
        client.post(f"{IB}/nodes/{FREE_NODE}/force-drain", json={"reason": "again"}), 409
    )
    assert_problem(client.post(f"{IB}/nodes/{FREE_NODE}/force-drain", json={}), 422)


def test_removing_the_last_target_ends_every_drain(client, onboarded):
    register(client)
    allocation = allocate(client, "acme", FREE_NODE)
    release(client, "acme", allocation["id"])

    assert client.delete(f"{IB}/targets/sm-a").status_code == 204

    assert node_state(client, FREE_NODE) == "free"
    assert ok(client.get(f"{IB}/targets"))["data"] == []


def test_pruning_one_fabrics_history_leaves_other_fabrics_and_no_orphan_blobs(
    make_client, onboarded, engine
):
    client = make_client(snapshot_retain=1)
    api_create_fabric(client, "ib-west")
    west = ok(client.get("/v1/fabrics/ib-west/signed-manifest"))
    west_digest = manifest_digest(west)
    signed_manifest(client)
    allocate(client, "acme", FREE_NODE)
    signed_manifest(client)  # prunes ib-east's first snapshot

    for path in ARTIFACT_PATHS:
        url = f"/v1/fabrics/ib-west/snapshots/{west_digest}/artifacts/{path}"
        assert client.get(url).status_code == 200, path
    orphans = (
        "SELECT count(*) FROM artifact_blob WHERE sha256 NOT IN (SELECT sha256 FROM snapshot_file)"
    )
    assert rows(engine, orphans) == [(0,)]


# --- found by a hostile review --------------------------------------------------------------------


def test_a_new_qos_class_is_a_recorded_change_of_every_fabric_it_changes(client, onboarded):
    register(client)
    before = current_digest(client)
    created(client.post("/v1/qos-classes", json={"name": "gold2", "ib_sl": 3, "ib_mtu": 5}))

    envelope = signed_manifest(client)
    history = ok(client.get(f"{IB}/snapshots"))["data"]
    status = ok(client.get(f"{IB}/sync"))

    assert manifest_digest(envelope) == current_digest(client) == status["desired"] != before
    assert history[0]["digest"] == status["desired"] and history[0]["current"]
    created(report(client, "applied", status["desired"], observed_digest=status["desired"]))
    assert ok(client.get(f"{IB}/sync"))["in_sync"] is True


def test_a_target_that_reported_can_be_deleted_and_its_receipts_stay(client, onboarded):
    register(client)
    digest = manifest_digest(signed_manifest(client))
    created(report(client, "applied", digest))

    assert client.delete(f"{IB}/targets/sm-a").status_code == 204

    [receipt] = ok(client.get(f"{IB}/deployments"))["data"]
    assert (receipt["target"], receipt["state"], receipt["digest"]) == ("sm-a", "applied", digest)


def test_a_removed_targets_agent_token_stops_working_even_for_a_new_target_of_that_name(agent):
    client, headers = agent
    assert client.delete(f"{IB}/targets/sm-a").status_code == 204

    assert_problem(client.get(f"{IB}/signed-manifest", headers=headers), 401)
    assert_problem(client.get(f"{IB}/artifacts/opensm/opensm.conf", headers=headers), 401)
    register(client, "sm-a")
    body = {"state": "failed", "digest": None}
    response = client.post(f"{IB}/targets/sm-a/reports", json=body, headers=headers)
    assert_problem(response, 401)
    tokens = ok(client.get("/v1/tokens"))["data"]
    assert [t["revoked_at"] is not None for t in tokens if t["role"] == "agent"] == [True]


def drained_by(client: Any, *reports: dict[str, Any]) -> str:
    """The node's state after a release on a fabric whose only target reports `reports`."""
    register(client)
    allocation = allocate(client, "acme", FREE_NODE)
    release(client, "acme", allocation["id"])
    digest = manifest_digest(signed_manifest(client))
    for extra in reports:
        response = report(client, **{"state": "applied", "digest": digest, **extra})
        assert response.status_code in (200, 201), response.text
    return node_state(client, FREE_NODE)


def test_a_drain_needs_a_masters_read_back_not_files_alone(client, onboarded):
    assert drained_by(client, {"role": "standby"}, {"role": "unknown"}) == "draining"


def test_a_drain_ends_when_the_master_read_back_matched_the_removal(client, onboarded):
    digest = current_digest(client)
    assert digest  # the release below changes it
    state = drained_by(client, {"role": "master", "observed_digest": None})
    assert state == "draining"
    desired = ok(client.get(f"{IB}/sync"))["desired"]
    created(report(client, "applied", desired, role="master", observed_digest=desired))
    assert node_state(client, FREE_NODE) == "free"


def test_a_state_that_recurs_ends_the_drain_on_a_repeated_report(client, onboarded):
    register(client)
    a = manifest_digest(signed_manifest(client))
    created(report(client, "applied", a, observed_digest=a))
    allocation = allocate(client, "acme", FREE_NODE)  # B, never deployed
    release(client, "acme", allocation["id"])  # back to A, as a newer snapshot

    repeat = report(client, "applied", a, observed_digest=a)

    assert current_digest(client) == a
    assert repeat.status_code == 200 and repeat.json()["changed_state"] is False
    assert node_state(client, FREE_NODE) == "free"
    assert ok(client.get(f"{IB}/sync"))["in_sync"] is True


def test_a_rolled_back_report_frees_nothing_when_the_restored_state_still_holds_the_key(
    client, onboarded
):
    register(client)
    allocation = allocate(client, "acme", FREE_NODE)
    holding = manifest_digest(signed_manifest(client))
    created(report(client, "applied", holding, observed_digest=holding))
    release(client, "acme", allocation["id"])
    removal = manifest_digest(signed_manifest(client))

    created(report(client, "rolled_back", removal, observed_digest=holding))

    assert node_state(client, FREE_NODE) == "draining"


def test_a_repeat_with_a_new_detail_updates_the_targets_detail(client, onboarded):
    register(client)
    created(report(client, "failed", None, detail="OpenSM is not running"))
    again = report(client, "failed", None, detail="no SUBNET UP within 60 s")

    assert again.status_code == 200
    assert ok(client.get(f"{IB}/targets/sm-a"))["detail"] == "no SUBNET UP within 60 s"


def test_a_settings_change_of_the_keys_re_signs_the_same_snapshot_with_its_new_files(
    make_client, onboarded
):
    client = make_client()
    old = verify_manifest(signed_manifest(client), trusted_keys(client), fabric=FABRIC)
    rekeyed = make_client(opensm_m_key=0x1234)

    new = verify_manifest(signed_manifest(rekeyed), trusted_keys(rekeyed), fabric=FABRIC)
    path = "opensm/opensm.conf"
    body = rekeyed.get(f"{IB}/snapshots/{new.snapshot_digest}/artifacts/{path}").content

    assert new.snapshot_digest == old.snapshot_digest and new.sequence == old.sequence
    assert new.files[path].sha256 != old.files[path].sha256
    assert sha256_hex(body) == new.files[path].sha256


def test_the_manifest_sequence_grows_with_every_change_even_back_to_a_known_state(
    client, onboarded
):
    first = verify_manifest(signed_manifest(client), trusted_keys(client), fabric=FABRIC)
    allocation = allocate(client, "acme", FREE_NODE)
    second = verify_manifest(signed_manifest(client), trusted_keys(client), fabric=FABRIC)
    release(client, "acme", allocation["id"])
    third = verify_manifest(signed_manifest(client), trusted_keys(client), fabric=FABRIC)

    assert third.snapshot_digest == first.snapshot_digest
    assert first.sequence < second.sequence < third.sequence
