"""Isolation proofs under a policy, over HTTP (issue 13): a customer on dedicated leaves.

On examples/ib-rail.ibnetdiscover with customers (external) on dedicated leaves, acme holds
leaf group 1 and the team research (internal) two nodes of group 2. acme's admin gets a tenant
view carrying the policy version and acme's four leaves, other owners counted; it verifies
against the served partitions.conf. research's proof states the policy and its kind's
isolation, `segment`, with no topology.
"""

from __future__ import annotations

from typing import Any

import pytest

from policies.evidence.audit_log import load_public_key
from policies.evidence.proofs import check_claims, verify_envelope
from tenancy.schemas import TokenCreate
from tenancy.usecases import tokens
from tests.builders import REPO, api_create_fabric, created, ok

ADMIN = "bootstrap-admin-token"
FABRIC = "ib-rail"
PARTITIONS = "opensm/partitions.conf"


@pytest.fixture
def rail(make_client):
    """ib-rail under the policy, acme and research allocated; `token(role, tenant)` headers."""
    client = make_client(admin_token=ADMIN)

    def token(role: str, tenant: str | None = None) -> dict[str, str]:
        spec = TokenCreate(name=f"r-{role}-{tenant or 'all'}", role=role, tenant=tenant)
        uow = client.app.state.uow
        return {"Authorization": f"Bearer {tokens.create_token(uow, spec=spec).token}"}

    operator = token("operator")
    client.headers.update(operator)
    api_create_fabric(
        client, FABRIC, topology_text=(REPO / "examples" / "ib-rail.ibnetdiscover").read_text()
    )
    ok(client.patch(f"/v1/fabrics/{FABRIC}/nodes/sm01", json={"role": "management"}))
    ok(client.put("/v1/policy", json={"kinds": {"external": {"isolation": "dedicated_leaf"}}}))
    held = {
        "acme": ("external", ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]),
        "research": ("internal", ["gpu0005", "gpu0006"]),
    }
    for name, (kind, nodes) in held.items():
        created(client.post("/v1/tenants", json={"name": name, "kind": kind}))
        body = {"fabric": FABRIC, "nodes": nodes}
        created(client.post(f"/v1/tenants/{name}/allocations", json=body))
    return client, token


def statement_of(client, tenant: str, headers: dict[str, str]) -> dict[str, Any]:
    path = f"/v1/tenants/{tenant}/isolation-proofs"
    proof = created(client.post(path, json={"fabric": FABRIC}, headers=headers))
    keys = [load_public_key(k["pem"]) for k in ok(client.get("/v1/keys", headers=headers))["keys"]]
    return verify_envelope(proof["envelope"], keys)


def test_a_customers_tenant_view_carries_its_leaves_and_verifies(rail):
    client, token = rail

    statement = statement_of(client, "acme", token("tenant-admin", "acme"))

    predicate = statement["predicate"]
    assert predicate["view"] == "tenant"
    version = ok(client.get("/v1/policy"))["version"]
    assert predicate["policy"]["version"] == version
    assert predicate["policy"]["isolation"] == "dedicated_leaf"
    topology = predicate["dedicated_leaf"]
    assert [e["leaf"] for e in topology["leaves"]] == [f"leaf-g1-r{r}" for r in range(4)]
    assert [len(e["endpoints"]) for e in topology["leaves"]] == [4, 4, 4, 4]
    assert topology["holds"] is True
    served = client.get(f"/v1/fabrics/{FABRIC}/artifacts/{PARTITIONS}")
    assert check_claims(statement, {PARTITIONS: served.content})


def test_a_teams_proof_states_the_policy_and_segment_isolation_without_leaves(rail):
    client, token = rail

    predicate = statement_of(client, "research", token("operator"))["predicate"]

    assert predicate["policy"]["tenant_kind"] == "internal"
    assert predicate["policy"]["isolation"] == "segment"
    assert "dedicated_leaf" not in predicate
