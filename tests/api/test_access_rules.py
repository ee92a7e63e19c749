"""The service's access rules under the engine's RBAC with domains: decisions per role and route."""

from __future__ import annotations

import pytest

from api.access_rules import ROUTE_RULES, decide, object_for
from policies.authz import (
    GLOBAL_DOMAIN,
    Decision,
    binding_domain,
    build_enforcer,
    domain_matches,
)

TENANT = "/v1/tenants/{tenant}"
ALLOCATIONS = "/v1/tenants/{tenant}/allocations"
FABRICS = "/v1/fabrics"
ARTIFACT = "/v1/fabrics/{fabric}/artifacts/{path:path}"


def test_an_operator_bound_in_the_wildcard_domain_holds_its_role_in_every_tenant():
    enforcer = build_enforcer(ROUTE_RULES, "op", "operator", None)

    for tenant in ("acme", "globex", "never-heard-of"):
        assert enforcer.enforce("op", tenant, ALLOCATIONS, "POST")
        assert enforcer.get_roles_for_user_in_domain("op", tenant) == ["operator"]
    assert enforcer.enforce("op", GLOBAL_DOMAIN, FABRICS, "POST")


def test_without_the_domain_matching_function_the_wildcard_binding_would_deny_operators():
    """Why `add_named_domain_matching_func` is there: plain domain equality silently denies."""
    import casbin
    from casbin.persist.adapters import StringAdapter

    from policies.authz import MODEL_TEXT

    policy = f"{ROUTE_RULES}\ng, op, operator, *"
    plain = casbin.Enforcer(casbin.Enforcer.new_model(text=MODEL_TEXT), StringAdapter(policy))

    assert not plain.enforce("op", "acme", TENANT, "GET")
    assert build_enforcer(ROUTE_RULES, "op", "operator", None).enforce("op", "acme", TENANT, "GET")


def test_a_tenant_binding_holds_in_its_own_tenant_only():
    assert domain_matches("acme", "acme")
    assert domain_matches("acme", "*")
    assert not domain_matches("globex", "acme")
    assert not domain_matches("*", "acme")


@pytest.mark.parametrize(
    ("role", "tenant", "domain", "obj", "act", "expected"),
    [
        ("operator", None, "acme", ALLOCATIONS, "POST", Decision.ALLOW),
        ("operator", None, "*", FABRICS, "POST", Decision.ALLOW),
        ("auditor", None, "*", FABRICS, "GET", Decision.ALLOW),
        ("auditor", None, "*", FABRICS, "POST", Decision.FORBIDDEN),
        ("auditor", None, "acme", ALLOCATIONS, "GET", Decision.ALLOW),
        ("auditor", None, "acme", TENANT, "DELETE", Decision.FORBIDDEN),
        ("billing", None, "*", "/v1/tenants", "GET", Decision.ALLOW),
        ("billing", None, "acme", TENANT, "GET", Decision.ALLOW),
        ("billing", None, "acme", ALLOCATIONS, "GET", Decision.FORBIDDEN),
        ("billing", None, "*", FABRICS, "GET", Decision.FORBIDDEN),
        ("tenant-viewer", "acme", "acme", TENANT, "GET", Decision.ALLOW),
        ("tenant-viewer", "acme", "acme", "/v1/tenants/{tenant}/reachability", "GET", "allow"),
        ("tenant-viewer", "acme", "acme", ALLOCATIONS, "POST", Decision.FORBIDDEN),
        ("tenant-viewer", "acme", "globex", TENANT, "GET", Decision.HIDDEN),
        ("tenant-viewer", "acme", "globex", ALLOCATIONS, "POST", Decision.HIDDEN),
        ("tenant-viewer", "acme", "*", FABRICS, "GET", Decision.FORBIDDEN),
        ("tenant-viewer", "acme", "acme", "/v1/tokens", "GET", Decision.FORBIDDEN),
        ("tenant-admin", "acme", "acme", "/v1/tokens", "POST", Decision.ALLOW),
        ("tenant-admin", "acme", "acme", "/v1/tokens/{token_id}", "DELETE", Decision.ALLOW),
        ("tenant-admin", "acme", "*", "/v1/tokens", "POST", Decision.FORBIDDEN),
        ("tenant-admin", "acme", "globex", "/v1/tokens", "POST", Decision.HIDDEN),
        ("tenant-admin", "acme", "acme", TENANT, "DELETE", Decision.FORBIDDEN),
        ("tenant-admin", "acme", "*", "/v1/fabrics/{fabric}/verification", "GET", "forbidden"),
        ("tenant-viewer", "acme", "acme", "/v1/tenants/{tenant}/allocationsX", "GET", "forbidden"),
        ("tenant-viewer", "acme", "acme", "/v1/tenants/{tenant}/../x", "GET", "forbidden"),
    ],
)
def test_decisions(role, tenant, domain, obj, act, expected):
    assert decide("who", role, tenant, domain, obj, act) == Decision(expected)


@pytest.mark.parametrize(
    "path",
    ["opensm/opensm.conf", "x/opensm.conf", "opensm.conf"],
)
def test_the_auditor_never_reads_the_file_holding_the_subnet_keys(path):
    obj = object_for(ARTIFACT, {"fabric": "ib-east", "path": path})

    assert decide("a", "auditor", None, "*", obj, "GET") is Decision.FORBIDDEN
    assert decide("o", "operator", None, "*", obj, "GET") is Decision.ALLOW


def test_the_auditor_reads_the_other_artifacts():
    obj = object_for(ARTIFACT, {"fabric": "ib-east", "path": "opensm/partitions.conf"})

    assert obj == "/v1/fabrics/{fabric}/artifacts/opensm/partitions.conf"
    assert decide("a", "auditor", None, "*", obj, "GET") is Decision.ALLOW


def test_a_domain_that_could_smuggle_a_policy_row_is_refused():
    assert decide("v", "tenant-viewer", "acme", "acme\ng", TENANT, "GET") is Decision.HIDDEN
    assert decide("o", "billing", None, "a,b", TENANT, "GET") is Decision.FORBIDDEN


@pytest.mark.parametrize(
    ("role", "tenant"),
    [("tenant-viewer", None), ("tenant-admin", ""), ("operator", "acme"), ("root", None)],
)
def test_bindings_need_a_tenant_exactly_for_tenant_roles(role, tenant):
    with pytest.raises(ValueError):
        binding_domain(role, tenant)
