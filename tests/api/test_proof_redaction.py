"""A tenant's isolation proof names no other tenant (issue 10, item 6).

acme and globex both hold grants to storage, so their ports share its partition. A proof issued
to acme's admin names acme's and storage's ports and counts globex's; `isofabric proof verify`
checks the counts against partitions.conf. Operators and auditors still get complete proofs,
and a tenant never reads one of those.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from typer.testing import CliRunner

from cli import app as cli
from policies.evidence.audit_log import load_public_key
from policies.evidence.proofs import check_claims, sign_envelope, verify_envelope
from tenancy.schemas import GrantCreate, TokenCreate
from tenancy.usecases import shared_services, tokens
from tests.builders import FABRIC, PORT_GUIDS, SERVICE, SERVICE_PKEY, assert_problem, created, ok

ADMIN = "bootstrap-admin-token"
PARTITIONS = "opensm/partitions.conf"
GLOBEX_PORTS = [*PORT_GUIDS["gpu0005"], *PORT_GUIDS["gpu0006"]]
RESEARCH_PORTS = [*PORT_GUIDS["gpu0003"], *PORT_GUIDS["gpu0004"]]
runner = CliRunner()


@pytest.fixture
def world(make_client, onboarded):
    """acme and globex granted storage; `token(role, tenant)` makes a bearer header."""
    client = make_client(admin_token=ADMIN)
    uow = client.app.state.uow
    shared_services.grant_service(
        uow, tenant_name="globex", spec=GrantCreate(fabric=FABRIC, service=SERVICE)
    )

    def token(role: str, tenant: str | None = None) -> dict[str, str]:
        spec = TokenCreate(name=f"r-{role}-{tenant or 'all'}", role=role, tenant=tenant)
        return {"Authorization": f"Bearer {tokens.create_token(uow, spec=spec).token}"}

    return client, token


def issue(client, headers: dict[str, str], tenant: str = "acme") -> dict[str, Any]:
    path = f"/v1/tenants/{tenant}/isolation-proofs"
    return created(client.post(path, json={"fabric": FABRIC}, headers=headers))


def statement_of(client, proof: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    keys = [load_public_key(k["pem"]) for k in ok(client.get("/v1/keys", headers=headers))["keys"]]
    return verify_envelope(proof["envelope"], keys)


def payload_text(proof: dict[str, Any]) -> str:
    return base64.b64decode(proof["envelope"]["payload"]).decode()


def partitions_conf(client, headers: dict[str, str]) -> bytes:
    response = client.get(f"/v1/fabrics/{FABRIC}/artifacts/{PARTITIONS}", headers=headers)
    assert response.status_code == 200, response.text
    return bytes(response.content)


def storage_segment(statement: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in statement["predicate"]["segments"] if s["segment"] == SERVICE_PKEY)


def test_a_tenant_admins_proof_names_no_other_tenant_and_counts_them(world):
    client, token = world
    acme = token("tenant-admin", "acme")

    proof = issue(client, acme)

    text = payload_text(proof)
    for hidden in ("globex", "research", *GLOBEX_PORTS, *RESEARCH_PORTS):
        assert hidden not in text
    assert all(port in text for port in PORT_GUIDS["gpu0001"] + PORT_GUIDS["stor01"])
    statement = statement_of(client, proof, acme)
    assert proof["view"] == statement["predicate"]["view"] == "tenant"
    assert storage_segment(statement)["others"] == {"count": 4, "membership": "limited"}
    assert {r["owner"] for r in statement["predicate"]["reachable"]} == {
        "tenant:acme",
        "service:storage",
    }


def test_a_tenant_admins_proof_verifies_against_the_rendered_file(world):
    client, token = world
    acme = token("tenant-admin", "acme")
    statement = statement_of(client, issue(client, acme), acme)

    derived = check_claims(statement, {PARTITIONS: partitions_conf(client, token("operator"))})

    assert statement["predicate"]["view"] == "tenant"
    assert {owner for owner, _ in derived} == {"tenant:acme", "service:storage"}


@pytest.mark.parametrize("role", ["operator", "auditor"])
def test_operator_and_auditor_proofs_stay_complete(world, role):
    client, token = world
    headers = token(role)

    proof = issue(client, headers)

    statement = statement_of(client, proof, headers)
    predicate = statement["predicate"]
    assert proof["view"] == predicate["view"] == "full"
    assert {predicate["ownership"][port] for port in GLOBEX_PORTS} == {"tenant:globex"}
    segment = storage_segment(statement)
    assert "others" not in segment
    assert {m["endpoint"] for m in segment["members"]} >= set(GLOBEX_PORTS)
    assert check_claims(statement, {PARTITIONS: partitions_conf(client, headers)})


def test_a_tenant_never_reads_a_full_proof(world):
    client, token = world
    full = issue(client, token("operator"))["id"]
    audited = issue(client, token("auditor"))["id"]
    mine = issue(client, token("tenant-admin", "acme"))["id"]

    for role in ("tenant-admin", "tenant-viewer"):
        headers = token(role, "acme")
        for hidden in (full, audited):
            assert_problem(client.get(f"/v1/proofs/{hidden}", headers=headers), 404)
        listed = ok(client.get("/v1/proofs", headers=headers))
        assert [p["id"] for p in listed["data"]] == [mine] and listed["count"] == 1
        assert ok(client.get(f"/v1/proofs/{mine}", headers=headers))["view"] == "tenant"
    for role in ("operator", "auditor"):
        listed = ok(client.get("/v1/proofs", headers=token(role)))["data"]
        views = {p["id"]: p["view"] for p in listed}
        assert views == {full: "full", audited: "full", mine: "tenant"}


# --- `isofabric proof verify` ------------------------------------------------------------------


def offline(tmp_path: Path, client, token) -> dict[str, Any]:
    """acme's tenant-view proof, the published key and partitions.conf, written to files."""
    acme = token("tenant-admin", "acme")
    proof = issue(client, acme)
    [key] = [k for k in ok(client.get("/v1/keys", headers=acme))["keys"] if k["status"] == "active"]
    (tmp_path / "key.pem").write_text(key["pem"])
    (tmp_path / "artifacts" / "opensm").mkdir(parents=True)
    (tmp_path / "artifacts" / PARTITIONS).write_bytes(partitions_conf(client, token("operator")))
    return proof


def verify(tmp_path: Path, document: Any, key: str = "key.pem") -> Any:
    (tmp_path / "proof.json").write_text(json.dumps(document))
    args = ["proof", "verify", str(tmp_path / "proof.json"), "--key", str(tmp_path / key)]
    return runner.invoke(cli, [*args, "--artifacts", str(tmp_path / "artifacts")])


def resigned(tmp_path: Path, proof: dict[str, Any], change: Any) -> dict[str, Any]:
    """The proof's statement, changed and signed with a key of the test's own (trusted below)."""
    statement = json.loads(base64.b64decode(proof["envelope"]["payload"]))
    change(statement)
    key = Ed25519PrivateKey.generate()
    pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    (tmp_path / "forger.pem").write_bytes(pem)
    return sign_envelope(statement, key)


def test_proof_verify_accepts_a_tenant_view(world, tmp_path):
    proof = offline(tmp_path, *world)

    result = verify(tmp_path, proof)

    assert result.exit_code == 0, result.output
    assert "reachability: OK" in result.output
    assert "others: OK (0x0100: 4" in result.output
    assert "(tenant view)" in result.output


def test_proof_verify_rejects_a_tampered_count(world, tmp_path):
    proof = offline(tmp_path, *world)

    def fewer(statement: dict[str, Any]) -> None:
        storage_segment(statement)["others"]["count"] = 3

    result = verify(tmp_path, resigned(tmp_path, proof, fewer), "forger.pem")

    assert result.exit_code == 1
    assert "signature: OK" in result.output
    assert "the file has 4 other member(s)" in result.output


def test_proof_verify_rejects_an_unlisted_full_member_in_the_file(world, tmp_path):
    proof = offline(tmp_path, *world)
    conf = tmp_path / "artifacts" / PARTITIONS
    text = conf.read_text()
    anchor = next(line for line in text.splitlines() if line.startswith("service_storage="))
    conf.write_text(text.replace(anchor, f"{anchor}\n    0x00000000001000ff=full,", 1))
    digest = hashlib.sha256(conf.read_bytes()).hexdigest()

    def restate(statement: dict[str, Any]) -> None:
        statement["subject"][0]["digest"]["sha256"] = digest

    result = verify(tmp_path, resigned(tmp_path, proof, restate), "forger.pem")

    assert result.exit_code == 1
    assert "the file has 5 other member(s), full" in result.output
