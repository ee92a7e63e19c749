"""What a dry run shows each role: never more than that role may read without it.

A tenant-admin's what-if of a peering request, accept or end is the tenant view: its own edges,
no file hashes, and each file's diff reduced to the lines about its own and shared services'
segments. The identifiers it must not contain are read here from the operator's own reads (the
nodes list, partitions.conf, the RoCE segments), independently of the code under test.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from api.access_rules import decide
from api.app import create_app
from api.dry_run import MUTATING, NO_DRY_RUN_PREFIXES
from policies.authz import Decision
from tests.api.test_peerings import add_labs, bearer, request_labs
from tests.builders import FABRIC, created, ok

TOKEN = re.compile(r"[A-Za-z0-9_.:/-]+")
# Every mutating /v1 route a tenant role may call with ?dry_run=true, each tested below.
TENANT_DRY_RUNS = {
    ("POST", "/v1/tenants/{tenant}/peerings"),
    ("DELETE", "/v1/tenants/{tenant}/peerings/{peering_id}"),
    ("POST", "/v1/tenants/{tenant}/peering-requests/{peering_id}/accept"),
    ("POST", "/v1/tenants/{tenant}/isolation-proofs"),
    ("POST", "/v1/tenants/{tenant}/partitions"),
    ("DELETE", "/v1/tenants/{tenant}/partitions/{name}"),
    ("PUT", "/v1/tenants/{tenant}/partitions/{name}/members"),
    ("POST", "/v1/tenants/{tenant}/partitions/{name}/members/{guid}"),
    ("DELETE", "/v1/tenants/{tenant}/partitions/{name}/members/{guid}"),
}


def test_every_route_a_tenant_role_may_dry_run_is_covered_here():
    routes = [route for route in create_app().routes if isinstance(route, APIRoute)]
    allowed = {
        (method, route.path)
        for route in routes
        if route.path.startswith("/v1/") and not route.path.startswith(NO_DRY_RUN_PREFIXES)
        for method in (route.methods or set()) & MUTATING
        for role in ("tenant-admin", "tenant-viewer")
        if decide("p", role, "acme", "acme", route.path, method) is Decision.ALLOW
    }
    assert allowed == TENANT_DRY_RUNS


def test_a_tenant_viewer_gets_no_dry_run_at_all(labs_client):
    asked = request_labs(labs_client)
    viewer = bearer(labs_client, "tenant-viewer", "labs")
    accept = f"/v1/tenants/labs/peering-requests/{asked['id']}/accept?dry_run=true"
    assert labs_client.post(accept, headers=viewer).status_code == 403


# --- InfiniBand --------------------------------------------------------------------------------


@pytest.fixture
def labs_client(client: TestClient, onboarded) -> TestClient:
    add_labs(client)
    return client


def ib_forbidden(client: TestClient, viewer: str, peer: str) -> set[str]:
    """What `viewer`'s view may not name: others' port GUIDs, others' partitions, non-peers."""
    operator = bearer(client, "operator")
    nodes = ok(client.get(f"/v1/fabrics/{FABRIC}/nodes", params={"limit": 1000}, headers=operator))
    nodes = nodes["data"]
    owned = {p["guid"]: n["tenant"] for n in nodes for p in n["ports"] if n["tenant"]}
    forbidden = {guid for guid, tenant in owned.items() if tenant != viewer}
    forbidden |= {n["tenant"] for n in nodes if n["tenant"] not in (None, viewer, peer)}
    path = f"/v1/fabrics/{FABRIC}/artifacts/opensm/partitions.conf"
    conf = client.get(path, headers=operator).text
    for block in conf.split(";"):
        header = re.search(r"^(\w+)=(0x[0-9a-f]{4})", block, re.MULTILINE)
        members = set(re.findall(r"0x[0-9a-f]{16}", block))
        if header and not any(owned.get(guid) == viewer for guid in members):
            forbidden |= {header.group(1), header.group(2)}
    return forbidden


def named(answer: dict[str, Any]) -> set[str]:
    """Every token the answer's diffs, edges and counterexamples carry."""
    tokens: set[str] = set()
    for fabric in answer["fabrics"]:
        for change in fabric["artifacts"]:
            tokens |= set(TOKEN.findall(change["diff"] or ""))
        for edge in fabric["reachability"]["added"] + fabric["reachability"]["removed"]:
            tokens |= set(TOKEN.findall(f"{edge['from']} {edge['to']} {edge['segment']}"))
        tokens |= set(TOKEN.findall(str(fabric["counterexamples"])))
    return tokens | {t.partition(":")[2] for t in tokens if t.startswith("tenant:")}


def assert_tenant_view(answer: dict[str, Any], forbidden: set[str]) -> None:
    assert answer["dry_run"] is True and answer["view"] == "tenant"
    changes = [c for fabric in answer["fabrics"] for c in fabric["artifacts"]]
    assert all(c["sha256_before"] is None and c["sha256_after"] is None for c in changes)
    assert named(answer) & forbidden == set()


def accepted_peering_then_zeta(client: TestClient) -> dict[str, Any]:
    """labs peers with research; zeta's partition comes after the peering's in the file."""
    asked = request_labs(client)
    ok(client.post(f"/v1/tenants/labs/peering-requests/{asked['id']}/accept"))
    created(client.post("/v1/tenants", json={"name": "zeta", "kind": "internal"}))
    created(
        client.post("/v1/tenants/zeta/allocations", json={"fabric": FABRIC, "nodes": ["gpu0008"]})
    )
    return asked


def test_ending_a_peering_shows_the_tenant_its_own_lines_only(labs_client):
    asked = accepted_peering_then_zeta(labs_client)
    end = f"/v1/tenants/labs/peerings/{asked['id']}?dry_run=true"
    full = ok(labs_client.delete(end))
    forbidden = ib_forbidden(labs_client, "labs", "research")
    assert full["view"] == "full" and named(full) & forbidden  # the context names zeta

    answer = ok(labs_client.delete(end, headers=bearer(labs_client, "tenant-admin", "labs")))

    assert_tenant_view(answer, forbidden)
    diff = answer["fabrics"][0]["artifacts"][1]["diff"]
    assert diff.count("\n-    0x") == 2 and "-peer_labs_research=0x0105" in diff  # its ports
    assert answer["fabrics"][0]["reachability"]["removed"][0]["from"] == "tenant:labs"


def test_requesting_and_accepting_show_the_tenant_view(labs_client):
    forbidden = ib_forbidden(labs_client, "research", "labs")
    research = bearer(labs_client, "tenant-admin", "research")
    ask = "/v1/tenants/research/peerings?dry_run=true"
    requested = ok(labs_client.post(ask, json={"fabric": FABRIC, "peer": "labs"}, headers=research))
    assert_tenant_view(requested, forbidden)

    asked = request_labs(labs_client, bearer(labs_client, "operator"))
    accept = f"/v1/tenants/labs/peering-requests/{asked['id']}/accept?dry_run=true"
    answer = ok(labs_client.post(accept, headers=bearer(labs_client, "tenant-admin", "labs")))
    assert_tenant_view(answer, ib_forbidden(labs_client, "labs", "research"))
    assert "+peer_labs_research=0x0105, ipoib :" in answer["fabrics"][0]["artifacts"][1]["diff"]


def test_a_proof_dry_run_is_a_tenant_view_too(labs_client):
    labs = bearer(labs_client, "tenant-admin", "labs")
    proof = "/v1/tenants/labs/isolation-proofs?dry_run=true"
    answer = ok(labs_client.post(proof, json={"fabric": FABRIC}, headers=labs))
    assert answer == {"dry_run": True, "view": "tenant", "holds": True, "fabrics": []}


def test_partition_dry_runs_show_the_tenant_view(labs_client):
    labs = bearer(labs_client, "tenant-admin", "labs")
    forbidden = ib_forbidden(labs_client, "labs", "")
    base = "/v1/tenants/labs/partitions"
    create = {"fabric": FABRIC, "name": "jobs"}
    assert_tenant_view(
        ok(labs_client.post(f"{base}?dry_run=true", json=create, headers=labs)), forbidden
    )
    created(labs_client.post(base, json=create, headers=labs))
    port = ok(labs_client.get(f"{base}/default", headers=labs))["members"][0]["guid"]
    members = {"members": [{"guid": port}]}

    answer = ok(labs_client.put(f"{base}/jobs/members?dry_run=true", json=members, headers=labs))

    assert_tenant_view(answer, forbidden)
    assert f"+    {port}=full ;" in answer["fabrics"][0]["artifacts"][1]["diff"]
    assert ok(labs_client.get(f"{base}/jobs", headers=labs))["members"] == []


# --- RoCE --------------------------------------------------------------------------------------


def roce_forbidden(onboarded, viewer: str, peer: str) -> set[str]:
    """Others' VRF names, VLANs, VNIs, route targets and subnets; non-peer tenants' names."""
    forbidden = {name for name in onboarded.segments if name not in (viewer, peer)}
    for name, segment in onboarded.segments.items():
        if name == viewer:
            continue
        forbidden |= {segment["vrf"], str(segment["l3vni"]), str(segment["l2vni"])}
        forbidden |= {f"Vlan{segment['vlan']}", f"Vlan{segment['l3vni_vlan']}"}
        forbidden |= {segment["subnet"], f"65000:{segment['l3vni']}"}
    return forbidden


def test_a_roce_peering_accept_shows_the_tenant_view(client, roce_onboarded):
    fabric = roce_onboarded.fabric
    ok(client.put("/v1/policy", json={"kinds": {"external": {"peering": ["external"]}}}))
    asked = created(
        client.post("/v1/tenants/acme/peerings", json={"fabric": fabric, "peer": "globex"})
    )
    accept = f"/v1/tenants/globex/peering-requests/{asked['id']}/accept?dry_run=true"
    full = ok(client.post(accept))
    forbidden = roce_forbidden(roce_onboarded, "globex", "acme")
    assert named(full) & forbidden  # the operator's diffs name acme's route target

    answer = ok(client.post(accept, headers=bearer(client, "tenant-admin", "globex")))

    assert_tenant_view(answer, forbidden)
    assert answer["fabrics"][0]["reachability"]["added"]
