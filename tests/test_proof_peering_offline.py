"""`isofabric proof verify` on a peered tenant's proofs (issue 13, item 4), both technologies.

The demo state, globex offboarded (roce-west has no free node otherwise) and labs, a second
internal team with one node on each fabric. research asks labs to peer on ib-east and on
roce-west and labs accepts (tenancy/usecases/peerings.py; the default policy lets internal teams
peer). research's full and tenant-view proofs claim the peering, name labs (and no other tenant) and
verify offline against the rendered artifacts; a re-signed proof that hides the peering fails,
and acme's proofs still name neither team.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from typer.testing import CliRunner

from cli import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY, app
from policies.evidence.proofs import sign_envelope, verify_envelope
from tenancy.schemas import AllocationCreate, TenantCreate
from tenancy.schemas.peerings import PeeringCreate
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, peerings, tenants
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.demo import load_demo

FABRICS = ("ib-east", "roce-west")
VIEWS = ("full", "tenant")
runner = CliRunner()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def peered_state(uow: UnitOfWork) -> None:
    """The demo, labs on both fabrics and research peered with it on each."""
    assert load_demo(
        uow,
        topology_text=DEMO_TOPOLOGY.read_text(),
        roce_inventory_text=DEMO_ROCE_INVENTORY.read_text(),
    )
    tenants.offboard_tenant(uow, name="globex")
    tenants.create_tenant(uow, spec=TenantCreate(name="labs", kind="internal"))
    for fabric in FABRICS:
        allocations.allocate(uow, tenant_name="labs", spec=AllocationCreate(fabric=fabric, count=1))
        asked = peerings.request_peering(
            uow, tenant_name="research", spec=PeeringCreate(fabric=fabric, peer="labs")
        )
        peerings.accept_peering(uow, tenant_name="labs", peering_id=asked.id)


@pytest.fixture(scope="module")
def issued(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The peered state, a key, each fabric's artifacts, research's and acme's proofs."""
    tmp = tmp_path_factory.mktemp("peered-proofs")
    url = f"sqlite:///{tmp / 'peered.db'}"
    engine = make_engine(url)
    prepare_database(engine)
    peered_state(UnitOfWork(engine, Settings(database_url=url)))
    created = invoke("keys", "create", "--db", url)
    assert created.exit_code == 0, created.output
    (tmp / "key.pem").write_text(json.loads(created.stdout)["pem"])
    proofs = {}
    for fabric in FABRICS:
        out = invoke("render", "--fabric", fabric, "--out", str(tmp / fabric), "--db", url)
        assert out.exit_code == 0, out.output
        for tenant in ("research", "acme"):
            for view in VIEWS:
                args = ("--tenant", tenant, "--fabric", fabric, "--view", view, "--db", url)
                result = invoke("proof", "issue", *args)
                assert result.exit_code == 0, result.output
                proofs[tenant, fabric, view] = json.loads(result.output)["envelope"]
    private_pem = (tmp / "peered-signing.key").read_text()
    engine.dispose()
    return {"dir": tmp, "proofs": proofs, "private_pem": private_pem}


def predicate(envelope: dict[str, Any], issued: dict[str, Any]) -> dict[str, Any]:
    key = load_pem_private_key(issued["private_pem"].encode(), password=None)
    statement = verify_envelope(envelope, [key.public_key()])  # type: ignore[list-item]
    return statement["predicate"]  # type: ignore[no-any-return]


def verify(issued: dict[str, Any], envelope: dict[str, Any], fabric: str, name: str) -> Any:
    path: Path = issued["dir"] / f"{name}.json"
    path.write_text(json.dumps(envelope))
    key = str(issued["dir"] / "key.pem")
    artifacts = str(issued["dir"] / fabric)
    return invoke("proof", "verify", str(path), "--key", key, "--artifacts", artifacts)


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("fabric", FABRICS)
def test_a_peered_tenants_proof_claims_its_peer_and_verifies_offline(issued, fabric, view):
    envelope = issued["proofs"]["research", fabric, view]
    claims = predicate(envelope, issued)

    [peering] = claims["peerings"]
    assert peering["peer"] == "tenant:labs"
    assert {"owner": "tenant:labs", "segment": peering["segment"]} in claims["reachable"]
    assert "acme" not in json.dumps(claims) and "globex" not in json.dumps(claims)
    result = verify(issued, envelope, fabric, f"research-{fabric}-{view}")
    assert result.exit_code == 0, result.output
    assert f"peerings: OK (tenant:labs@{peering['segment']}; intended edges" in result.output
    assert f"proof OK: tenant research on fabric {fabric} ({view} view)" in result.output


def test_the_infiniband_peering_is_the_shared_partition_of_the_artifacts(issued):
    claims = predicate(issued["proofs"]["research", "ib-east", "tenant"], issued)

    [peering] = claims["peerings"]
    conf = (issued["dir"] / "ib-east/opensm/partitions.conf").read_text()
    assert f"peer_labs_research={peering['segment']}" in conf
    [shared] = [s for s in claims["segments"] if s["segment"] == peering["segment"]]
    assert shared["others"]["count"] == 0
    owners = {claims["ownership"][m["endpoint"]] for m in shared["members"]}
    assert owners == {"tenant:research", "tenant:labs"}


@pytest.mark.parametrize("fabric", FABRICS)
def test_other_tenants_proofs_claim_no_peering_and_name_neither_team(issued, fabric):
    # Also the RoCE tenant view through the CLI, whose segments count no others.
    for view in VIEWS:
        envelope = issued["proofs"]["acme", fabric, view]
        claims = predicate(envelope, issued)

        assert claims["peerings"] == []
        if view == "tenant":
            assert "research" not in json.dumps(claims) and "labs" not in json.dumps(claims)
        result = verify(issued, envelope, fabric, f"acme-{fabric}-{view}")
        assert result.exit_code == 0, result.output
        assert "peerings: none" in result.output


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("fabric", FABRICS)
def test_a_re_signed_proof_hiding_the_peering_fails_offline(issued, fabric, view):
    key = load_pem_private_key(issued["private_pem"].encode(), password=None)
    statement = verify_envelope(issued["proofs"]["research", fabric, view], [key.public_key()])  # type: ignore[list-item]
    statement["predicate"]["peerings"] = []
    forged = sign_envelope(statement, key)  # type: ignore[arg-type]

    result = verify(issued, forged, fabric, f"hidden-{fabric}-{view}")

    assert result.exit_code == 1
    reason = "names other owners: tenant:labs" if view == "tenant" else "through no claimed peering"
    assert reason in result.output
