"""`isofabric proof verify` on a dedicated tenant's proof (issue 13): the policy and the leaves.

examples/ib-rail.ibnetdiscover with customers (external) on dedicated leaves: acme holds leaf
group 1 (gpu0001-0004) and tel01, a compute node here on leaf-svc with storage's two nodes and
the management host; the team research (internal) two nodes of group 3. acme's proof carries the
policy version and its five leaves with the other owners counted; `proof verify` checks them
against partitions.conf and refuses a re-signed proof whose topology was changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from typer.testing import CliRunner

from cli import app
from policies.evidence.proofs import sign_envelope, verify_envelope
from tenancy.schemas import AllocationCreate, GrantCreate, NodePatch, ServiceCreate, TenantCreate
from tenancy.schemas.policy import PolicyDocument
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, nodes, shared_services, tenants
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.policy import put_policy
from tests.builders import REPO, uow_create_fabric

FABRIC = "ib-rail"
GROUP_1 = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
runner = CliRunner()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def rail_state(uow: UnitOfWork) -> None:
    """ib-rail, its services, the policy, acme (external, granted storage) and research."""
    uow_create_fabric(
        uow, FABRIC, topology_text=(REPO / "examples/ib-rail.ibnetdiscover").read_text()
    )
    for node, role in {"sm01": "management", "stor01": "storage", "stor02": "storage"}.items():
        nodes.set_node_role(uow, fabric_name=FABRIC, node_name=node, patch=NodePatch(role=role))
    spec = ServiceCreate(name="storage", nodes=["stor01", "stor02"])
    shared_services.create_service(uow, fabric_name=FABRIC, spec=spec)
    policy = {"kinds": {"external": {"isolation": "dedicated_leaf"}}}
    put_policy(uow, document=PolicyDocument.model_validate(policy))
    for name, kind in (("acme", "external"), ("research", "internal")):
        tenants.create_tenant(uow, spec=TenantCreate(name=name, kind=kind))
    held = {"acme": [*GROUP_1, "tel01"], "research": ["gpu0009", "gpu0010"]}
    for tenant, names in held.items():
        nodes_of = AllocationCreate(fabric=FABRIC, nodes=names)
        allocations.allocate(uow, tenant_name=tenant, spec=nodes_of)
    grant = GrantCreate(fabric=FABRIC, service="storage")
    shared_services.grant_service(uow, tenant_name="acme", spec=grant)


@pytest.fixture(scope="module")
def issued(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The rail state, a key, the rendered artifacts and acme's full and tenant-view proofs."""
    tmp = tmp_path_factory.mktemp("policy-proofs")
    url = f"sqlite:///{tmp / 'rail.db'}"
    engine = make_engine(url)
    prepare_database(engine)
    rail_state(UnitOfWork(engine, Settings(database_url=url)))
    created = invoke("keys", "create", "--db", url)
    assert created.exit_code == 0, created.output
    (tmp / "key.pem").write_text(json.loads(created.stdout)["pem"])
    out = invoke("render", "--fabric", FABRIC, "--out", str(tmp / "artifacts"), "--db", url)
    assert out.exit_code == 0, out.output
    proofs = {}
    for view in ("full", "tenant"):
        args = ("--tenant", "acme", "--fabric", FABRIC, "--view", view, "--db", url)
        result = invoke("proof", "issue", *args)
        assert result.exit_code == 0, result.output
        proofs[view] = json.loads(result.output)["envelope"]
    engine.dispose()
    return {"dir": tmp, "proofs": proofs, "private_pem": (tmp / "rail-signing.key").read_text()}


def verify(issued: dict[str, Any], envelope: dict[str, Any], name: str) -> Any:
    path: Path = issued["dir"] / name
    path.write_text(json.dumps(envelope))
    key, artifacts = str(issued["dir"] / "key.pem"), str(issued["dir"] / "artifacts")
    return invoke("proof", "verify", str(path), "--key", key, "--artifacts", artifacts)


def predicate_of(issued: dict[str, Any], view: str) -> dict[str, Any]:
    key = load_pem_private_key(issued["private_pem"].encode(), password=None)
    statement = verify_envelope(issued["proofs"][view], [key.public_key()])  # type: ignore[list-item]
    return dict(statement["predicate"])


def resign(issued: dict[str, Any], change: Any) -> dict[str, Any]:
    """acme's full proof, its predicate changed and signed again with the service's own key."""
    key = load_pem_private_key(issued["private_pem"].encode(), password=None)
    statement = verify_envelope(issued["proofs"]["full"], [key.public_key()])  # type: ignore[list-item]
    change(statement["predicate"])
    return sign_envelope(statement, key)  # type: ignore[arg-type]


def test_a_dedicated_tenants_proof_states_the_policy_and_its_five_leaves(issued):
    predicate = predicate_of(issued, "full")

    assert predicate["policy"]["version"] == 1
    assert predicate["policy"]["fingerprint"].startswith("sha256:")
    assert (predicate["policy"]["tenant_kind"], predicate["policy"]["isolation"]) == (
        "external",
        "dedicated_leaf",
    )
    topology = predicate["dedicated_leaf"]
    assert topology["holds"] is True
    assert [e["leaf"] for e in topology["leaves"]] == [
        *(f"leaf-g1-r{r}" for r in range(4)),
        "leaf-svc",
    ]
    nobody = {"tenants": 0, "services": 0, "unassigned": 0, "management": 0}
    assert [e["others"] for e in topology["leaves"][:4]] == [nobody] * 4
    # stor01, stor02 (storage) and sm01 (management) beside tel01
    assert topology["leaves"][4]["others"] == nobody | {"services": 2, "management": 1}
    assert sorted(g for e in topology["leaves"] for g in e["endpoints"]) == predicate["endpoints"]


@pytest.mark.parametrize("view", ["full", "tenant"])
def test_the_proof_verifies_offline_with_its_leaves(issued, view):
    result = verify(issued, issued["proofs"][view], f"acme-{view}.json")

    assert result.exit_code == 0, result.output
    assert "policy: version 1 (sha256:" in result.output
    assert "tenant kind external, isolation dedicated_leaf" in result.output
    assert "dedicated_leaf: OK (5 leaf switch(es)" in result.output


def test_a_proof_without_policy_claims_verifies_as_before(issued):
    def before_policies(predicate: dict[str, Any]) -> None:
        del predicate["policy"], predicate["dedicated_leaf"]

    result = verify(issued, resign(issued, before_policies), "old.json")

    assert result.exit_code == 0, result.output
    assert "policy: not stated" in result.output


def test_a_re_signed_proof_with_a_changed_count_fails_with_the_reason(issued):
    def shared(predicate: dict[str, Any]) -> None:
        predicate["dedicated_leaf"]["leaves"][1]["others"]["tenants"] = 1

    result = verify(issued, resign(issued, shared), "count.json")

    assert result.exit_code == 1
    assert "signature: OK" in result.output
    assert "counts other tenants' ports on leaf-g1-r1 (1), so dedicated_leaf" in result.output


def test_a_re_signed_proof_with_a_guid_added_fails_with_the_reason(issued):
    ownership = predicate_of(issued, "full")["ownership"]
    stranger = min(guid for guid, owner in ownership.items() if owner == "service:storage")

    def added(predicate: dict[str, Any]) -> None:
        predicate["dedicated_leaf"]["leaves"][0]["endpoints"].append(stranger)
        predicate["endpoints"] = sorted([*predicate["endpoints"], stranger])

    result = verify(issued, resign(issued, added), "guid.json")

    assert result.exit_code == 1
    assert f"only in the topology: ['{stranger}']" in result.output
