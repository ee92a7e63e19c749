"""The tamper-evident audit log: entries per mutation, signed checkpoints, proofs, verification."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from typer.testing import CliRunner

from api.app import create_app
from cli import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY, app
from policies.evidence.audit_log import HASHED_FIELDS
from policies.evidence.merkle import entry_leaf_hash, verify_consistency, verify_inclusion
from tenancy.record import audit_log
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import signing_keys
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.demo import load_demo
from tests.builders import LOCAL_URL

runner = CliRunner()


@pytest.fixture
def demo_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    engine = make_engine(url)
    prepare_database(engine)
    uow = UnitOfWork(engine, Settings(database_url=url))
    load_demo(
        uow,
        topology_text=DEMO_TOPOLOGY.read_text(),
        roce_inventory_text=DEMO_ROCE_INVENTORY.read_text(),
    )
    # `isofabric keys create`: the key file and keyring beside audit.db, which the app, the
    # checkpoints and `audit verify` (default keyring) then use.
    signing_keys.create(uow)
    engine.dispose()
    return url


@pytest.fixture
def client(demo_url: str) -> TestClient:
    # A loopback peer: the demo database has no token, and open mode answers only this host.
    return TestClient(
        create_app(Settings(database_url=demo_url)), client=("127.0.0.1", 50000), base_url=LOCAL_URL
    )


def verify(url: str, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["audit", "verify", "--db", url, *extra])
    return result.exit_code, result.output


def sql(url: str, statement: str, **params: object) -> None:
    engine = make_engine(url)
    with engine.begin() as connection:
        connection.execute(text(statement), params)
    engine.dispose()


def test_every_mutation_is_an_entry_with_principal_action_target_and_digests(client):
    page = client.get("/v1/audit/entries", params={"limit": 1000}).json()

    actions = [e["action"] for e in page["data"]]
    assert page["count"] == len(actions) > 20
    assert [e["index"] for e in page["data"]] == list(range(len(actions)))
    assert actions[0] == "fabric.create"
    assert {
        "topology.import",
        "service.create",
        "tenant.create",
        "allocation.create",
        "grant.create",
    } <= set(actions)
    grant = next(e for e in page["data"] if e["action"] == "grant.create")
    assert grant["target"].startswith("tenants/acme/grants/")
    assert grant["digest_after"].startswith("v2:") and grant["digest_before"].startswith("v2:")
    assert grant["principal"] == "system" and grant["role"] == "operator"


def test_an_api_mutation_records_the_caller_and_its_request_id(client):
    response = client.post(
        "/v1/tenants",
        json={"name": "initech", "kind": "internal"},
        headers={"X-Request-ID": "req-42"},
    )
    assert response.status_code == 201

    last = client.get("/v1/audit/entries", params={"limit": 1000}).json()["data"][-1]

    assert (last["action"], last["target"], last["request_id"]) == (
        "tenant.create",
        "tenants/initech",
        "req-42",
    )
    assert (last["principal"], last["role"]) == ("anonymous", "operator")


def test_a_refused_mutation_leaves_no_entry(client):
    before = client.get("/v1/audit/entries").json()["count"]

    response = client.post("/v1/tenants/acme/allocations", json={"fabric": "ib-east", "count": 99})

    assert response.status_code == 409
    assert client.get("/v1/audit/entries").json()["count"] == before


def test_inclusion_and_consistency_proofs_verify_against_the_checkpoints(client):
    first = client.get("/v1/audit/checkpoint").json()
    client.post("/v1/tenants", json={"name": "initech", "kind": "internal"})
    second = client.get("/v1/audit/checkpoint").json()
    assert second["size"] == first["size"] + 1
    assert second["note"].startswith(f"{second['origin']}\n{second['size']}\n")

    proof = client.get(
        "/v1/audit/proofs/consistency", params={"first": first["size"], "second": second["size"]}
    ).json()
    inclusion = client.get(
        "/v1/audit/proofs/inclusion", params={"index": 3, "size": second["size"]}
    ).json()

    b64 = base64.b64decode
    assert proof["first_root"] == first["root_hash"]
    assert verify_consistency(
        first["size"],
        second["size"],
        b64(first["root_hash"]),
        b64(second["root_hash"]),
        [b64(p) for p in proof["path"]],
    )
    assert verify_inclusion(
        b64(inclusion["leaf_hash"]),
        3,
        second["size"],
        [b64(p) for p in inclusion["path"]],
        b64(second["root_hash"]),
    )


def test_a_proof_for_a_tree_larger_than_the_log_is_a_404_problem(client):
    size = client.get("/v1/audit/entries").json()["count"]

    response = client.get("/v1/audit/proofs/inclusion", params={"index": 0, "size": size + 1})

    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


def test_an_untouched_log_verifies(client, demo_url):
    client.get("/v1/audit/checkpoint")

    code, output = verify(demo_url)

    assert code == 0, output
    assert "entries verify against every checkpoint" in output


def test_a_log_no_checkpoint_covers_yet_says_so_rather_than_claim_every_checkpoint(demo_url):
    code, output = verify(demo_url)

    assert code == 0, output
    assert "no signed checkpoint covers them yet" in output
    assert "every checkpoint" not in output


def test_an_edited_entry_fails_verification_naming_its_index(client, demo_url):
    client.get("/v1/audit/checkpoint")
    sql(demo_url, "UPDATE audit_entry SET principal = 'mallory' WHERE \"index\" = 7")

    code, output = verify(demo_url)

    assert code == 1
    assert "entry 7 was altered" in output and "first bad index: 7" in output


def test_a_deleted_entry_fails_verification_naming_its_index(client, demo_url):
    client.get("/v1/audit/checkpoint")
    sql(demo_url, 'DELETE FROM audit_entry WHERE "index" = 5')

    code, output = verify(demo_url)

    assert code == 1
    assert "first bad index: 5" in output


def test_entries_deleted_at_the_end_are_caught_by_the_checkpoint_the_auditor_kept(
    client, demo_url, tmp_path
):
    kept = tmp_path / "checkpoint.json"
    kept.write_text(json.dumps(client.get("/v1/audit/checkpoint").json()))
    sql(demo_url, "DELETE FROM audit_checkpoint")
    sql(demo_url, 'DELETE FROM audit_entry WHERE "index" = (SELECT MAX("index") FROM audit_entry)')

    assert verify(demo_url)[0] == 0  # the log alone looks fine ...
    code, output = verify(demo_url, "--checkpoint", str(kept))

    assert code == 1  # ... but not against what the auditor kept
    assert "removed at the end" in output


def test_an_exported_log_verifies_and_an_edited_export_does_not(client, demo_url, tmp_path):
    client.get("/v1/audit/checkpoint")
    export = runner.invoke(app, ["audit", "export", "--db", demo_url]).output
    log = tmp_path / "audit.jsonl"
    log.write_text(export)
    assert verify(demo_url, "--log", str(log))[0] == 0

    lines = export.splitlines()
    entry = json.loads(lines[2])
    entry["target"] = "tenants/somebody-else"
    lines[2] = json.dumps(entry)
    log.write_text("\n".join(lines) + "\n")
    code, output = verify(demo_url, "--log", str(log))

    assert code == 1 and "first bad index: 2" in output


# --- issue 10, items 14 and 23: a bad index in every case; rotation is audited ---------------
# Before: an edited entry whose leaf hash was recomputed printed "first bad index: None", an
# emptied log verified as "OK: 0 entries", and `keys rotate` was not audited, so the checkpoint
# of the same size kept the signature of the key /v1/keys then marked retired.


def entry_with_recomputed_leaf(url: str, index: int) -> None:
    """Edit an entry as an attacker with database access would: content and leaf hash."""
    uow = UnitOfWork(make_engine(url), Settings(database_url=url))
    line = json.loads(audit_log.export_lines(uow)[index])
    line["principal"] = "mallory"
    leaf = entry_leaf_hash({k: line.get(k) for k in HASHED_FIELDS}).hex()
    sql(
        url,
        f"UPDATE audit_entry SET principal = 'mallory', leaf_hash = '{leaf}' "
        f'WHERE "index" = {index}',
    )


def test_an_edit_with_a_recomputed_leaf_hash_names_an_index(client, demo_url):
    size = client.get("/v1/audit/checkpoint").json()["size"]
    entry_with_recomputed_leaf(demo_url, 3)

    code, output = verify(demo_url)

    assert code == 1
    assert "first bad index: None" not in output
    # The demo's entries predate the key, so carry no seal, and the only checkpoint vouches for
    # nothing before it: the index is where the unsealed entries start.
    assert "first bad index: 0" in output
    assert f"an entry in 0..{size - 1} was altered" in output
    assert "entry 0 carries no seal" in output


def test_an_edit_with_a_recomputed_leaf_hash_is_named_by_the_entrys_seal(
    client, demo_url, tmp_path
):
    # Entries appended once the key exists carry a seal: the edited one is named exactly.
    for name in ("late1", "late2", "late3", "late4"):
        body = {"name": name, "kind": "internal", "qos_class": "bronze"}
        assert client.post("/v1/tenants", json=body).status_code == 201
    size = client.get("/v1/audit/checkpoint").json()["size"]
    export = runner.invoke(app, ["audit", "export", "--db", demo_url]).output
    entry_with_recomputed_leaf(demo_url, size - 2)

    code, output = verify(demo_url)

    assert code == 1
    assert f"entry {size - 2} was altered: it no longer matches its seal" in output
    assert f"first bad index: {size - 2}" in output
    lines = export.splitlines()  # the same edit in an exported log is named too
    line = json.loads(lines[size - 3])
    line["target"] = "tenants/somebody-else"
    line["leaf_hash"] = entry_leaf_hash({k: line.get(k) for k in HASHED_FIELDS}).hex()
    lines[size - 3] = json.dumps(line)
    log = tmp_path / "audit.jsonl"
    log.write_text("\n".join(lines) + "\n")
    assert f"first bad index: {size - 3}" in verify(demo_url, "--log", str(log))[1]


def test_an_edit_after_the_last_checkpoint_is_named_by_its_seal(client, demo_url):
    client.get("/v1/audit/checkpoint")
    body = {"name": "after", "kind": "internal", "qos_class": "bronze"}
    assert client.post("/v1/tenants", json=body).status_code == 201
    last = client.get("/v1/audit/entries", params={"limit": 1000}).json()["count"] - 1
    entry_with_recomputed_leaf(demo_url, last)  # no checkpoint covers it yet

    code, output = verify(demo_url)

    assert code == 1
    assert f"entry {last} was altered: it no longer matches its seal" in output
    assert f"first bad index: {last}" in output


@pytest.mark.parametrize("seal", [None, "", "bogus", "isofabric.local/other AAAA"])
def test_a_stripped_or_forged_seal_after_the_last_checkpoint_is_named(client, demo_url, seal):
    client.get("/v1/audit/checkpoint")
    for name in ("after1", "after2"):
        body = {"name": name, "kind": "internal", "qos_class": "bronze"}
        assert client.post("/v1/tenants", json=body).status_code == 201
    last = client.get("/v1/audit/entries", params={"limit": 1000}).json()["count"] - 1
    entry_with_recomputed_leaf(demo_url, last)
    sql(demo_url, f'UPDATE audit_entry SET seal = :seal WHERE "index" = {last}', seal=seal)

    code, output = verify(demo_url)

    assert code == 1, output
    assert f"first bad index: {last}" in output


def test_a_later_checkpoint_narrows_the_index_to_what_no_good_checkpoint_covers(client, demo_url):
    first = client.get("/v1/audit/checkpoint").json()["size"]
    client.post("/v1/tenants", json={"name": "late", "kind": "internal", "qos_class": "bronze"})
    client.get("/v1/audit/checkpoint")
    entry_with_recomputed_leaf(demo_url, first)  # the entry after the first checkpoint

    code, output = verify(demo_url)

    assert code == 1
    assert f"first bad index: {first}" in output


def test_an_emptied_log_does_not_verify(client, demo_url):
    client.get("/v1/audit/checkpoint")
    sql(demo_url, "DELETE FROM audit_checkpoint")
    sql(demo_url, "DELETE FROM audit_entry")

    code, output = verify(demo_url)

    assert code == 1
    assert "OK" not in output
    assert "first bad index: 0" in output


def test_a_kept_checkpoint_larger_than_an_emptied_log_fails(client, demo_url, tmp_path):
    kept = tmp_path / "checkpoint.json"
    kept.write_text(json.dumps(client.get("/v1/audit/checkpoint").json()))
    sql(demo_url, "DELETE FROM audit_checkpoint")
    sql(demo_url, "DELETE FROM audit_entry")

    code, output = verify(demo_url, "--checkpoint", str(kept))

    assert code == 1
    assert "larger than the log" in output


def test_key_rotation_is_audited_and_the_next_checkpoint_uses_the_new_key(client, demo_url):
    before = client.get("/v1/audit/checkpoint").json()
    uow = UnitOfWork(make_engine(demo_url), Settings(database_url=demo_url))

    rotated = signing_keys.rotate(uow)

    entries = client.get("/v1/audit/entries", params={"limit": 1000}).json()["data"]
    assert entries[-1]["action"] == "keys.rotate"
    after = client.get("/v1/audit/checkpoint").json()
    assert after["size"] == before["size"] + 1
    assert f"\u2014 {rotated.name} " in after["note"]
    assert verify(demo_url)[0] == 0
