"""Offline verification of isolation proofs: `isofabric proof verify` and the openssl recipe."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from typer.testing import CliRunner

from cli import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY, app
from policies.evidence.proofs import sign_envelope, verify_envelope
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.demo import load_demo

runner = CliRunner()

# The auditor's recipe (stock tools only: jq, base64, printf, wc, openssl >= 3.0).
OPENSSL_RECIPE = r"""
set -eu
jq -r '.envelope // . | .payload' proof.json | base64 -d > payload.bin
jq -r '.envelope // . | .signatures[0].sig' proof.json | base64 -d > sig.bin
TYPE=$(jq -r '.envelope // . | .payloadType' proof.json)
LEN=$(wc -c < payload.bin | tr -d ' ')
printf 'DSSEv1 %d %s %d ' "${#TYPE}" "$TYPE" "$LEN" > pae.bin
cat payload.bin >> pae.bin
openssl pkeyutl -verify -pubin -inkey key.pem -rawin -in pae.bin -sigfile sig.bin
jq -r '.subject[] | "\(.digest.sha256)  artifacts/\(.name)"' payload.bin | sha256sum -c -
"""


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def issued(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The demo state, a proof for every tenant on ib-east and roce-west, keys, artifacts."""
    tmp = tmp_path_factory.mktemp("proofs")
    url = f"sqlite:///{tmp / 'proofs.db'}"
    engine = make_engine(url)
    prepare_database(engine)
    uow = UnitOfWork(engine, Settings(database_url=url))
    assert load_demo(
        uow,
        topology_text=DEMO_TOPOLOGY.read_text(),
        roce_inventory_text=DEMO_ROCE_INVENTORY.read_text(),
    )
    created = invoke("keys", "create", "--db", url)
    assert created.exit_code == 0, created.output
    (tmp / "key.pem").write_text(json.loads(created.stdout)["pem"])
    proofs = {}
    for fabric in ("ib-east", "roce-west"):
        out = invoke("render", "--fabric", fabric, "--out", str(tmp / fabric), "--db", url)
        assert out.exit_code == 0, out.output
        result = invoke("proof", "issue", "--tenant", "acme", "--fabric", fabric, "--db", url)
        assert result.exit_code == 0, result.output
        proofs[fabric] = json.loads(result.output)
    # The private key is in the key file `keys create` wrote beside the database, not in it.
    private_pem = (tmp / "proofs-signing.key").read_text()
    engine.dispose()
    return {"dir": tmp, "url": url, "proofs": proofs, "private_pem": private_pem}


def write(issued: dict[str, Any], name: str, document: Any) -> Path:
    path: Path = issued["dir"] / name
    path.write_text(json.dumps(document))
    return path


def verify(issued: dict[str, Any], proof: Path, fabric: str = "ib-east", *extra: str) -> Any:
    key = str(issued["dir"] / "key.pem")
    artifacts = str(issued["dir"] / fabric)
    return invoke("proof", "verify", str(proof), "--key", key, "--artifacts", artifacts, *extra)


def tamper_payload(envelope: dict[str, Any], change: Any) -> dict[str, Any]:
    statement = json.loads(base64.b64decode(envelope["payload"]))
    change(statement)
    body = json.dumps(statement).encode()
    return {**envelope, "payload": base64.b64encode(body).decode()}


def resign(issued: dict[str, Any], envelope: dict[str, Any], change: Any) -> dict[str, Any]:
    """A validly signed envelope (the service's own key) over a changed statement."""
    key = load_pem_private_key(issued["private_pem"].encode(), password=None)
    public = key.public_key()
    statement = verify_envelope(envelope, [public])  # type: ignore[list-item]
    change(statement)
    return sign_envelope(statement, key)  # type: ignore[arg-type]


@pytest.mark.parametrize("fabric", ["ib-east", "roce-west"])
def test_a_valid_proof_verifies_with_its_artifacts(issued, fabric):
    proof = write(issued, f"{fabric}.json", issued["proofs"][fabric])

    result = verify(issued, proof, fabric)

    assert result.exit_code == 0, result.output
    assert "signature: OK" in result.output
    assert "reachability: OK" in result.output
    assert "service:storage" in result.output


def test_a_bare_envelope_verifies_without_artifacts(issued):
    proof = write(issued, "bare.json", issued["proofs"]["ib-east"]["envelope"])
    key = str(issued["dir"] / "key.pem")

    result = invoke("proof", "verify", str(proof), "--key", key)

    assert result.exit_code == 0, result.output


def test_a_tampered_payload_fails(issued):
    envelope = issued["proofs"]["ib-east"]["envelope"]
    forged = tamper_payload(envelope, lambda s: s["predicate"].update(tenant="globex"))

    result = verify(issued, write(issued, "forged.json", forged))

    assert result.exit_code == 1
    assert "signature verification failed" in result.output


def test_a_tampered_signature_fails(issued):
    envelope = issued["proofs"]["ib-east"]["envelope"]
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[0] ^= 1
    forged = {**envelope, "signatures": [{"keyid": "x", "sig": base64.b64encode(sig).decode()}]}

    result = verify(issued, write(issued, "badsig.json", forged))

    assert result.exit_code == 1
    assert "signature verification failed" in result.output


def test_a_tampered_artifact_fails(issued, tmp_path):
    artifacts = tmp_path / "ib-east"
    shutil.copytree(issued["dir"] / "ib-east", artifacts)
    partitions = artifacts / "opensm" / "partitions.conf"
    partitions.write_text(partitions.read_text() + "# edited\n")
    proof = write(issued, "ib.json", issued["proofs"]["ib-east"])
    key = str(issued["dir"] / "key.pem")

    result = invoke("proof", "verify", str(proof), "--key", key, "--artifacts", str(artifacts))

    assert result.exit_code == 1
    assert "does not match the proof" in result.output


def test_a_missing_artifact_is_not_checked_and_never_reported_as_tampering(issued, tmp_path):
    artifacts = tmp_path / "ib-east"
    shutil.copytree(issued["dir"] / "ib-east", artifacts)
    (artifacts / "opensm" / "partitions.conf").unlink()  # e.g. a snapshot no longer retained
    proof = write(issued, "ib-missing.json", issued["proofs"]["ib-east"])
    key = str(issued["dir"] / "key.pem")

    result = invoke("proof", "verify", str(proof), "--key", key, "--artifacts", str(artifacts))

    assert result.exit_code == 2, result.output  # the check could not be done; no failure found
    assert "signature: OK" in result.output
    assert "FAILED" not in result.output
    payload = base64.b64decode(issued["proofs"]["ib-east"]["envelope"]["payload"])
    digest = json.loads(payload)["predicate"]["snapshot_digest"]
    assert (
        f"error: artifact 'opensm/partitions.conf' is missing from {artifacts}: the subjects "
        f"were not checked (nothing was found altered); put the files of snapshot {digest} there"
    ) in " ".join(result.output.split())


@pytest.mark.parametrize("fabric", ["ib-east", "roce-west"])
def test_a_validly_signed_false_reachability_claim_fails(issued, fabric):
    def drop_service(statement: dict[str, Any]) -> None:
        reachable = statement["predicate"]["reachable"]
        statement["predicate"]["reachable"] = [
            r for r in reachable if not r["owner"].startswith("service:")
        ]

    forged = resign(issued, issued["proofs"][fabric]["envelope"], drop_service)

    result = verify(issued, write(issued, f"false-{fabric}.json", forged), fabric)

    assert result.exit_code == 1
    assert "signature: OK" in result.output
    assert "do not support the reachability claim" in result.output


def test_a_claim_hiding_a_neighbour_behind_false_ownership_fails(issued):
    def own_everything(statement: dict[str, Any]) -> None:
        ownership = statement["predicate"]["ownership"]
        statement["predicate"]["ownership"] = dict.fromkeys(ownership, "tenant:acme")

    forged = resign(issued, issued["proofs"]["ib-east"]["envelope"], own_everything)

    result = verify(issued, write(issued, "owned.json", forged))

    assert result.exit_code == 1


def test_another_key_fails(issued, tmp_path):
    other = tmp_path / "other.pem"
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(tmp_path / "p.pem")],
        check=True,
    )
    subprocess.run(
        ["openssl", "pkey", "-in", str(tmp_path / "p.pem"), "-pubout", "-out", str(other)],
        check=True,
    )
    proof = write(issued, "ib2.json", issued["proofs"]["ib-east"])

    result = invoke("proof", "verify", str(proof), "--key", str(other))

    assert result.exit_code == 1


def run_recipe(
    directory: Path, proof: Any, key_pem: str, artifacts: Path
) -> subprocess.CompletedProcess[str]:
    directory.mkdir()
    shutil.copytree(artifacts, directory / "artifacts")
    (directory / "proof.json").write_text(json.dumps(proof))
    (directory / "key.pem").write_text(key_pem)
    return subprocess.run(
        ["bash", "-c", OPENSSL_RECIPE], cwd=directory, capture_output=True, text=True, check=False
    )


def test_the_openssl_recipe_accepts_a_valid_proof_and_rejects_tampering(issued, tmp_path):
    if not (shutil.which("openssl") and shutil.which("jq")):
        if os.environ.get("ISOFABRIC_REQUIRE_CONFORMANCE") == "1":
            pytest.fail("openssl and jq are required (ISOFABRIC_REQUIRE_CONFORMANCE=1)")
        pytest.skip("openssl or jq is not installed")
    key_pem = (issued["dir"] / "key.pem").read_text()
    proof = issued["proofs"]["ib-east"]
    envelope = proof["envelope"]
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[-1] ^= 0x80
    bad_sig = {**envelope, "signatures": [{"keyid": "k", "sig": base64.b64encode(sig).decode()}]}
    bad_payload = tamper_payload(envelope, lambda s: s["predicate"].update(tenant="globex"))

    artifacts = issued["dir"] / "ib-east"
    good = run_recipe(tmp_path / "good", proof, key_pem, artifacts)
    bare = run_recipe(tmp_path / "bare", envelope, key_pem, artifacts)
    forged = run_recipe(
        tmp_path / "payload", {"id": proof["id"], "envelope": bad_payload}, key_pem, artifacts
    )
    wrong = run_recipe(tmp_path / "sig", bad_sig, key_pem, artifacts)
    edited = tmp_path / "edited-artifacts"
    shutil.copytree(artifacts, edited)
    conf = edited / "opensm" / "partitions.conf"
    conf.write_text(conf.read_text().replace("=limited", "=full"))
    altered = run_recipe(tmp_path / "artifact", proof, key_pem, edited)

    assert good.returncode == 0, good.stderr + good.stdout
    assert "Signature Verified Successfully" in good.stdout
    assert bare.returncode == 0, bare.stderr
    assert forged.returncode != 0
    assert wrong.returncode != 0
    assert altered.returncode != 0 and "FAILED" in altered.stdout
