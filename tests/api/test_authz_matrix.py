"""Authorization matrix: every route of the app x every role x own/other tenant.

Outcomes per role, in the order of ROLES: "A" allowed (neither 401, 403 nor a hidden tenant),
"F" 403, "N" 404. Each route has (own, other): `own` for tenant acme (the tenant roles' own),
`other` for globex, or None for fabric-wide routes. A route of the app without an entry here
fails `test_every_route_of_the_app_is_in_the_matrix`.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.routing import iter_route_contexts

from tenancy.gate import verification
from tenancy.schemas import TargetCreate, TokenCreate
from tenancy.usecases import deploy, tokens
from tests.builders import (
    FABRIC,
    PKEY_RANGE,
    TEXT_PLAIN,
    Onboarded,
    assert_problem,
    example_topology,
    ok,
)

ADMIN = "bootstrap-admin-token"
# Mutating roles last: the operator's DELETE must not remove what the others are asked about.
ROLES = ("tenant-viewer", "tenant-admin", "billing", "auditor", "operator")
OWN, OTHER = "acme", "globex"
ROLE_TENANT = {"tenant-viewer": OWN, "tenant-admin": OWN}

# (method, route template) -> (own, other); outcome letters in ROLES order:
#                                       viewer, admin, billing, auditor, operator
MATRIX: dict[tuple[str, str], tuple[str, str | None]] = {
    ("POST", "/v1/changesets"): ("FFFFA", None),
    ("POST", "/v1/fabrics"): ("FFFFA", None),
    ("GET", "/v1/fabrics"): ("FFFAA", None),
    ("GET", "/v1/fabrics/{fabric}"): ("FFFAA", None),
    ("PUT", "/v1/fabrics/{fabric}/topology"): ("FFFFA", None),
    ("GET", "/v1/fabrics/{fabric}/nodes"): ("FFFAA", None),
    ("GET", "/v1/fabrics/{fabric}/nodes/{node}"): ("FFFAA", None),
    ("PATCH", "/v1/fabrics/{fabric}/nodes/{node}"): ("FFFFA", None),
    ("POST", "/v1/fabrics/{fabric}/services"): ("FFFFA", None),
    ("GET", "/v1/fabrics/{fabric}/services"): ("FFFAA", None),
    ("GET", "/v1/fabrics/{fabric}/services/{service}"): ("FFFAA", None),
    ("GET", "/v1/fabrics/{fabric}/verification"): ("FFFAA", None),
    ("GET", "/v1/fabrics/{fabric}/artifacts"): ("FFFAA", None),
    # config audits and observations change nothing: auditors may POST them
    ("POST", "/v1/fabrics/{fabric}/audits"): ("FFFAA", None),
    ("POST", "/v1/fabrics/{fabric}/observations"): ("FFFAA", None),
    # asked for opensm/opensm.conf, which holds the subnet keys
    ("GET", "/v1/fabrics/{fabric}/artifacts/{path:path}"): ("FFFFA", None),
    ("GET", "/v1/qos-classes"): ("AAFAA", None),
    ("POST", "/v1/qos-classes"): ("FFFFA", None),
    ("POST", "/v1/tenants"): ("FFFFA", None),
    ("GET", "/v1/tenants"): ("AAAAA", None),
    ("GET", "/v1/tenants/{tenant}"): ("AAAAA", "NNAAA"),
    ("GET", "/v1/tenants/{tenant}/reachability"): ("AAFAA", "NNFAA"),
    ("DELETE", "/v1/tenants/{tenant}"): ("FFFFA", "NNFFA"),
    ("PATCH", "/v1/tenants/{tenant}"): ("FFFFA", "NNFFA"),
    ("POST", "/v1/tenants/{tenant}/allocations"): ("FFFFA", "NNFFA"),
    ("GET", "/v1/tenants/{tenant}/allocations"): ("AAFAA", "NNFAA"),
    ("GET", "/v1/tenants/{tenant}/allocations/{allocation_id}"): ("AAFAA", "NNFAA"),
    ("DELETE", "/v1/tenants/{tenant}/allocations/{allocation_id}"): ("FFFFA", "NNFFA"),
    ("POST", "/v1/tenants/{tenant}/grants"): ("FFFFA", "NNFFA"),
    ("GET", "/v1/tenants/{tenant}/grants"): ("AAFAA", "NNFAA"),
    ("GET", "/v1/tenants/{tenant}/grants/{grant_id}"): ("AAFAA", "NNFAA"),
    ("DELETE", "/v1/tenants/{tenant}/grants/{grant_id}"): ("FFFFA", "NNFFA"),
    # consented peering (issue 13): a tenant-admin requests, accepts and ends its own tenant's
    ("POST", "/v1/tenants/{tenant}/peerings"): ("FAFFA", "NNFFA"),
    ("GET", "/v1/tenants/{tenant}/peerings"): ("AAFAA", "NNFAA"),
    ("DELETE", "/v1/tenants/{tenant}/peerings/{peering_id}"): ("FAFFA", "NNFFA"),
    ("GET", "/v1/tenants/{tenant}/peering-requests"): ("AAFAA", "NNFAA"),
    ("POST", "/v1/tenants/{tenant}/peering-requests/{peering_id}/accept"): ("FAFFA", "NNFFA"),
    # several partitions per tenant: a tenant-admin creates and fills its own tenant's
    ("POST", "/v1/tenants/{tenant}/partitions"): ("FAFFA", "NNFFA"),
    ("GET", "/v1/tenants/{tenant}/partitions"): ("AAFAA", "NNFAA"),
    ("GET", "/v1/tenants/{tenant}/partitions/{name}"): ("AAFAA", "NNFAA"),
    ("DELETE", "/v1/tenants/{tenant}/partitions/{name}"): ("FAFFA", "NNFFA"),
    ("PUT", "/v1/tenants/{tenant}/partitions/{name}/members"): ("FAFFA", "NNFFA"),
    ("POST", "/v1/tenants/{tenant}/partitions/{name}/members/{guid}"): ("FAFFA", "NNFFA"),
    ("DELETE", "/v1/tenants/{tenant}/partitions/{name}/members/{guid}"): ("FAFFA", "NNFFA"),
    # virtual GUIDs: the fabric's setting is the operator's, its ledger the auditor's too
    ("PATCH", "/v1/fabrics/{fabric}"): ("FFFFA", None),
    ("GET", "/v1/fabrics/{fabric}/virtual-guids"): ("FFFAA", None),
    ("GET", "/v1/audit/entries"): ("FFFAA", None),
    ("GET", "/v1/audit/checkpoint"): ("FFFAA", None),
    ("GET", "/v1/audit/proofs/inclusion"): ("FFFAA", None),
    ("GET", "/v1/audit/proofs/consistency"): ("FFFAA", None),
    # the tenant of a new token is in the body
    ("POST", "/v1/tokens"): ("FAFFA", "NNFFA"),
    ("GET", "/v1/tokens"): ("FAFAA", None),
    # the token revoked is one of tenant acme or globex; others' tokens are invisible (404)
    ("DELETE", "/v1/tokens/{token_id}"): ("FAFFA", "FNFFA"),
    # re-parenting a token under the caller's is the operator's (before revoking its own)
    ("POST", "/v1/tokens/{token_id}/reissue"): ("FFFFA", "FFFFA"),
    # isolation proofs: issuing changes nothing (auditors may POST); reads are tenant-scoped
    ("POST", "/v1/tenants/{tenant}/isolation-proofs"): ("FAFAA", "NNFAA"),
    ("GET", "/v1/proofs"): ("AAFAA", None),
    # asked for a proof that does not exist
    ("GET", "/v1/proofs/{proof_id}"): ("NNFNN", None),
    ("GET", "/v1/keys"): ("AAAAA", None),
    ("GET", "/v1/keys/transitions"): ("AAAAA", None),
    # usage metering (issue 6): billing, auditors and operators read usage; tenant roles do not
    ("GET", "/v1/usage/records"): ("FFAAA", None),
    ("GET", "/v1/usage/records.csv"): ("FFAAA", None),
    ("GET", "/v1/usage/events"): ("FFAAA", None),
    # deployment (issue 11): operators run it, auditors read it (never opensm.conf)
    ("PUT", "/v1/fabrics/{fabric}/targets/{name}"): ("FFFFA", None),
    ("GET", "/v1/fabrics/{fabric}/targets"): ("FFFAA", None),
    ("GET", "/v1/fabrics/{fabric}/targets/{name}"): ("FFFAA", None),
    ("POST", "/v1/fabrics/{fabric}/targets/{name}/reports"): ("FFFFA", None),
    ("DELETE", "/v1/fabrics/{fabric}/targets/{name}"): ("FFFFA", None),
    ("GET", "/v1/fabrics/{fabric}/sync"): ("FFFAA", None),
    ("GET", "/v1/fabrics/{fabric}/deployments"): ("FFFAA", None),
    ("GET", "/v1/fabrics/{fabric}/snapshots"): ("FFFAA", None),
    ("GET", "/v1/fabrics/{fabric}/signed-manifest"): ("FFFAA", None),
    ("GET", "/v1/fabrics/{fabric}/snapshots/{digest}/artifacts/{path:path}"): ("FFFFA", None),
    # a RoCE leaf's patch (issue 16); ib-east has no leaf, so the allowed answer is a 404
    ("GET", "/v1/fabrics/{fabric}/snapshots/{digest}/patches/{leaf}"): ("FFFAA", None),
    ("POST", "/v1/fabrics/{fabric}/nodes/{node}/force-drain"): ("FFFFA", None),
    # the policy document (issue 13): the operator's configuration, its versions for auditors
    ("GET", "/v1/policy"): ("FFFAA", None),
    ("PUT", "/v1/policy"): ("FFFFA", None),
    ("GET", "/v1/policy/versions"): ("FFFAA", None),
    ("GET", "/v1/policy/versions/{version}"): ("FFFAA", None),
}

CASES = [
    pytest.param(method, path, tenant, id=f"{method} {path} {tenant or ''}".strip())
    for (method, path), (_own, other) in MATRIX.items()
    for tenant in ((OWN, OTHER) if other is not None else (None,))
]
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/changesets"): {
        "operations": [{"op": "create_tenant", "name": "hooli", "kind": "external"}]
    },
    ("POST", "/v1/fabrics"): {"name": "ib-west", "kind": "infiniband", "pkey_range": PKEY_RANGE},
    ("PATCH", "/v1/fabrics/{fabric}/nodes/{node}"): {"role": "compute"},
    ("POST", "/v1/tenants"): {"name": "initech", "kind": "external", "qos_class": "gold"},
    ("POST", "/v1/tenants/{tenant}/grants"): {"fabric": FABRIC, "service": "storage"},
    ("POST", "/v1/tenants/{tenant}/peerings"): {"fabric": FABRIC, "peer": "research"},
    ("POST", "/v1/tenants/{tenant}/isolation-proofs"): {"fabric": FABRIC},
    ("POST", "/v1/tenants/{tenant}/partitions"): {"fabric": FABRIC, "name": "matrix"},
    ("PUT", "/v1/tenants/{tenant}/partitions/{name}/members"): {"members": []},
    ("PATCH", "/v1/fabrics/{fabric}"): {"virtual_guids": {"enabled": False}},
    ("PUT", "/v1/fabrics/{fabric}/targets/{name}"): {"kind": "opensm"},
    ("POST", "/v1/fabrics/{fabric}/nodes/{node}/force-drain"): {"reason": "matrix"},
}
MISSING_ID = "00000000-0000-4000-8000-000000000000"


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def mint(client, role: str, tenant: str | None = None, name: str | None = None) -> tuple[str, str]:
    spec = TokenCreate(name=name or f"m-{role}", role=role, tenant=tenant)
    made = tokens.create_token(client.app.state.uow, spec=spec)
    return made.id, made.token


@pytest.fixture
def world(make_client, onboarded: Onboarded):
    """A closed service with one token per role and a victim token per tenant."""
    client = make_client(admin_token=ADMIN)
    secrets = {role: mint(client, role, ROLE_TENANT.get(role))[1] for role in ROLES}
    victims = {t: mint(client, "tenant-viewer", t, name="victim")[0] for t in (OWN, OTHER)}
    target = TargetCreate(kind="opensm")
    deploy.put_target(client.app.state.uow, fabric_name=FABRIC, name="sm-a", spec=target)
    return client, secrets, victims, onboarded


def url_for(
    path: str,
    tenant: str | None,
    onboarded: Onboarded,
    victims: dict[str, str],
    digest: str = "sha256:" + "0" * 64,
) -> str:
    values = {
        "fabric": FABRIC,
        "node": "gpu0008",
        "service": "storage",
        "tenant": tenant or "",
        "allocation_id": onboarded.allocation_ids.get(tenant or "", MISSING_ID),
        "grant_id": onboarded.grant_ids.get(tenant or "", MISSING_ID),
        "peering_id": MISSING_ID,
        "path:path": "opensm/opensm.conf",
        "token_id": victims.get(tenant or "", MISSING_ID),
        "proof_id": MISSING_ID,
        "name": "sm-a",
        "leaf": "leaf01",
        "digest": digest,
        "version": "0",
        "guid": "0x0000000000100003",
    }
    if "/partitions/" in path:
        values["name"] = "default"  # every onboarded tenant's partition
    url = re.sub(r"\{([^}]+)\}", lambda m: values[m.group(1)], path)
    query = {
        "/v1/audit/proofs/inclusion": "?index=0&size=1",
        "/v1/audit/proofs/consistency": "?first=1&second=1",
        "/v1/usage/records": "?from=2026-03-01T00:00:00Z",
        "/v1/usage/records.csv": "?from=2026-03-01T00:00:00Z",
    }
    return url + query.get(path, "")


def send(client, method: str, path: str, tenant: str | None, secret: str, url: str):
    headers = bearer(secret)
    if path.endswith("/topology"):
        return client.request(
            method, url, content=example_topology(), headers={**headers, **TEXT_PLAIN}
        )
    if (method, path) == ("POST", "/v1/tokens"):
        body = {"name": "ci", "role": "tenant-viewer", "tenant": tenant}
        return client.request(method, url, json=body, headers=headers)
    if method in ("POST", "PUT", "PATCH"):
        return client.request(method, url, json=BODIES.get((method, path), {}), headers=headers)
    return client.request(method, url, headers=headers)


def is_ufm_path(path: str) -> bool:
    """A route of the UFM-compatible API: a UFM base path (maybe under a fabric), /dologin."""
    parts = path.split("/")
    bases = {"ufmRest", "ufmRestV2", "ufmRestV3", "ufmRestKrb", "dologin"}
    return parts[1] in bases or (parts[1] == "fabrics" and len(parts) > 3 and parts[3] in bases)


def is_hidden_tenant(response, tenant: str | None) -> bool:
    return (
        response.status_code == 404
        and tenant is not None
        and response.json().get("detail") == f"tenant '{tenant}' does not exist"
    )


def test_every_route_of_the_app_is_in_the_matrix(world):
    client = world[0]
    contexts = list(iter_route_contexts(client.app.routes))
    routes = {
        (method, context.path)
        for context in contexts
        if context.path is not None and context.path.startswith("/v1")
        for method in context.methods or ()
    }
    assert routes - MATRIX.keys() == set(), "routes without an authorization entry"
    assert MATRIX.keys() - routes == set(), "entries for routes that do not exist"
    for context in contexts:
        # The authorization dependency decides on scope["route"].path: the full template.
        assert context.path == getattr(context.original_route, "path", None)
    # /ui: the console's pages are authorized by the same policy (tests/ui/test_console_authz.py)
    # The UFM-compatible API (api/ufm/) authenticates on its own, by UFM's styles; its role
    # table is tested route by route in tests/api/test_ufm_auth.py.
    others = {
        c.path
        for c in contexts
        if c.path is not None and not c.path.startswith(("/v1", "/ui")) and not is_ufm_path(c.path)
    }
    assert others == {
        "/healthz",
        "/readyz",
        "/metrics",  # authorized by the policy too: tests/api/test_metrics.py
        "/openapi.json",
        "/docs",
        "/docs/oauth2-redirect",
        "/docs/assets",  # Swagger UI from package data (api/docs.py), no CDN
        "/problems",
        "/problems/{problem_type}",
    }


@pytest.mark.parametrize(("method", "path", "tenant"), CASES)
def test_authorization_matrix(world, method, path, tenant):
    client, secrets, victims, onboarded = world
    own, other = MATRIX[(method, path)]
    expected_row = own if tenant in (None, OWN) else other
    assert expected_row is not None
    digest = verification.verify_fabric(client.app.state.uow, fabric_name=FABRIC).snapshot_digest
    url = url_for(path, tenant, onboarded, victims, digest)
    for role, expected in zip(ROLES, expected_row, strict=True):
        response = send(client, method, path, tenant, secrets[role], url)
        where = f"{role} {method} {url}: {response.status_code} {response.text[:300]}"
        if expected == "F":
            assert_problem(response, 403, "forbidden")
        elif expected == "N":
            assert_problem(response, 404)
        else:
            assert response.status_code not in (401, 403), where
            assert not is_hidden_tenant(response, tenant), where
            assert response.status_code < 500, where
            if path.endswith("/patches/{leaf}"):
                assert_problem(response, 404, "not-found")  # an InfiniBand fabric has no leaf
            elif method == "GET" and not (path.endswith("{grant_id}") and tenant == OTHER):
                assert response.status_code == 200, where  # globex has no grant to read


def _without_instance(body: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        key: (value.replace(name, "<t>") if isinstance(value, str) else value)
        for key, value in body.items()
        if key not in ("instance", "name")
    } | {"name?": "name" in body}


TENANT_ROUTES = [
    pytest.param(method, path, id=f"{method} {path}")
    for (method, path), (_own, other) in MATRIX.items()
    if "{tenant}" in path
]


@pytest.mark.parametrize(("method", "path"), TENANT_ROUTES)
@pytest.mark.parametrize("role", ["tenant-viewer", "tenant-admin"])
def test_another_tenant_looks_exactly_like_a_missing_one(world, role, method, path):
    client, secrets, victims, onboarded = world
    secret = secrets[role]

    hidden = send(client, method, path, OTHER, secret, url_for(path, OTHER, onboarded, victims))
    missing = send(client, method, path, "nope", secret, url_for(path, "nope", onboarded, victims))

    assert_problem(hidden, 404, "not-found")
    assert_problem(missing, 404, "not-found")
    assert hidden.headers.keys() == missing.headers.keys()
    assert _without_instance(hidden.json(), OTHER) == _without_instance(missing.json(), "nope")


@pytest.mark.parametrize("role", ["tenant-viewer", "tenant-admin"])
def test_lists_never_show_another_tenant(world, role):
    client, secrets, _victims, _onboarded = world
    headers = bearer(secrets[role])

    listed = ok(client.get("/v1/tenants", headers=headers))
    assert [t["name"] for t in listed["data"]] == [OWN]
    assert listed["count"] == 1 and listed["next"] is None
    assert ok(client.get("/v1/tenants?kind=internal", headers=headers))["data"] == []
    assert OTHER not in client.get("/v1/tenants?limit=1000", headers=headers).text
    if role == "tenant-admin":
        assert {t["tenant"] for t in ok(client.get("/v1/tokens", headers=headers))["data"]} == {OWN}


def test_billing_sees_tenant_names_only(world):
    client, secrets, _victims, _onboarded = world
    headers = bearer(secrets["billing"])

    listed = ok(client.get("/v1/tenants", headers=headers))
    assert {t["name"] for t in listed["data"]} == {"acme", "research", "globex"}
    for item in [*listed["data"], ok(client.get("/v1/tenants/globex", headers=headers))]:
        assert item.keys() == {"name", "billing_account"}
        assert item["billing_account"] == item["name"]  # the default account
    operator_view = ok(client.get("/v1/tenants/acme", headers=bearer(secrets["operator"])))
    assert "qos_class" in operator_view


def test_billing_reads_usage_and_nothing_else(world):
    client, secrets, _victims, _onboarded = world
    headers = bearer(secrets["billing"])
    allowed = {
        (method, path)
        for (method, path), (own, _other) in MATRIX.items()
        if own[ROLES.index("billing")] == "A"
    }

    assert allowed == {
        ("GET", "/v1/tenants"),
        ("GET", "/v1/tenants/{tenant}"),
        ("GET", "/v1/keys"),
        ("GET", "/v1/keys/transitions"),
        ("GET", "/v1/usage/records"),
        ("GET", "/v1/usage/records.csv"),
        ("GET", "/v1/usage/events"),
    }
    records = ok(client.get("/v1/usage/records?from=2026-03-01T00:00:00Z", headers=headers))
    assert records.keys() == {"data", "count", "complete_until", "next"}
    assert ok(client.get("/v1/usage/events", headers=headers))["next"]


def test_the_auditor_reads_every_artifact_but_the_subnet_keys(world):
    client, secrets, _victims, _onboarded = world
    headers = bearer(secrets["auditor"])
    base = f"/v1/fabrics/{FABRIC}/artifacts"

    assert client.get(f"{base}/opensm/partitions.conf", headers=headers).status_code == 200
    assert client.get(f"{base}/opensm/qos-policy.conf", headers=headers).status_code == 200
    for trick in (
        "opensm/opensm.conf",
        "opensm%2Fopensm.conf",
        "opensm/./opensm.conf",
        "opensm//opensm.conf",
        "x/../opensm/opensm.conf",
        "opensm%2F..%2Fopensm%2Fopensm.conf",
    ):
        response = client.get(f"{base}/{trick}", headers=headers)
        assert response.status_code in (403, 404), trick
        assert "sm_key" not in response.text and "m_key" not in response.text


@pytest.mark.parametrize(
    "url",
    [
        "/v1/tenants/acme%2F..%2Fglobex",
        "/v1/tenants/acme/..%2Fglobex",
        "/v1/tenants/%2A",
        "/v1/tenants/*/allocations",
        "/v1/tenants/globex%00",
        "/v1/tenants/GLOBEX",
        "/v1/tenants/globex/",
        "/v1/tenants/acme/allocations/..%2F..%2Fglobex",
    ],
)
def test_path_tricks_never_reach_another_tenant(world, url):
    client, secrets, _victims, _onboarded = world

    response = client.get(url, headers=bearer(secrets["tenant-viewer"]))

    assert response.status_code in (403, 404), response.text
    assert "gpu0005" not in response.text and "bronze" not in response.text


def test_reachability_of_a_tenant_lists_its_edges_only(world):
    client, secrets, _victims, _onboarded = world

    body = ok(client.get("/v1/tenants/acme/reachability", headers=bearer(secrets["tenant-viewer"])))

    assert body["tenant"] == "acme"
    [fabric] = body["fabrics"]
    assert fabric["fabric"] == FABRIC and fabric["holds"] is True
    assert fabric["edges"], "acme is granted the storage service"
    for edge in fabric["edges"]:
        assert "tenant:acme" in (edge["from"], edge["to"])
        assert "tenant:globex" not in (edge["from"], edge["to"])


def test_unauthenticated_requests_are_401_on_every_route(world):
    client = world[0]
    for method, path in MATRIX:
        url = url_for(path, OWN, world[3], world[2])
        assert_problem(client.request(method, url), 401, "unauthorized")
