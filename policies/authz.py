"""Authorization: RBAC with domains (domain = tenant) on pycasbin, built from strings only.

Requests are ``(subject, domain, object, action)``: the subject is a principal key, the domain
the tenant the request is about (``*`` for fabric-wide requests), the object the matched route
template (never the raw URL, so no encoding or ``..`` trick changes the decision) and the action
the HTTP method. Role policies live in the wildcard domain ``*``; each principal adds one
grouping row binding it to its role, in its tenant or, for global roles, in ``*``. A domain
matching function lets a ``*`` binding match every tenant; a plain ``r.dom == p.dom`` matcher
would silently deny operators everywhere but in ``*``.
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache
from typing import Any

import casbin
from casbin.persist.adapters import StringAdapter

GLOBAL_DOMAIN = "*"


class Role(StrEnum):
    """The roles a principal can hold."""

    OPERATOR = "operator"
    AUDITOR = "auditor"
    BILLING = "billing"
    TENANT_ADMIN = "tenant-admin"
    TENANT_VIEWER = "tenant-viewer"
    AGENT = "agent"


GLOBAL_ROLES = frozenset({Role.OPERATOR, Role.AUDITOR, Role.BILLING, Role.AGENT})
TENANT_ROLES = frozenset({Role.TENANT_ADMIN, Role.TENANT_VIEWER})

MODEL_TEXT = """
[request_definition]
r = sub, dom, obj, act

[policy_definition]
p = sub, dom, obj, act, eft

[role_definition]
g = _, _, _

[policy_effect]
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))

[matchers]
m = g(r.sub, p.sub, r.dom) && (p.dom == "*" || r.dom == p.dom) \
&& regexMatch(r.obj, p.obj) && regexMatch(r.act, p.act)
"""

_TENANT_READS = (
    r"^/v1/tenants/\{tenant\}(/(allocations|grants)(/\{(allocation_id|grant_id)\})?"
    r"|/reachability|/peerings|/peering-requests)?$"
)
# Consented peering (issue 13): a tenant-admin requests, accepts and ends its own tenant's.
_PEERING_WRITES = (
    r"^/v1/tenants/\{tenant\}/(peerings(/\{peering_id\})?"
    r"|peering-requests/\{peering_id\}/accept)$"
)
# opensm.conf holds the subnet's management keys: never an auditor's, live or from history.
_SECRET_FILES = r"^/v1/fabrics/\{fabric\}/(snapshots/\{digest\}/)?artifacts/(.*/)?opensm\.conf$"
# A RoCE leaf's agent also reads its leaf's patch between two snapshots (issue 16).
_AGENT_READS = (
    r"^/v1/fabrics/\{fabric\}/(signed-manifest|sync|artifacts|artifacts/.+|targets/\{name\}"
    r"|snapshots|snapshots/\{digest\}/artifacts/.+|snapshots/\{digest\}/patches/\{leaf\})$"
)
# Console operator actions: the operator's only, whatever another row allows.
_UI_ACTIONS = r"^/ui/(.+/)?actions(/.*)?$"
_NOT_OPERATORS = ("auditor", "billing", "tenant-admin", "tenant-viewer", "agent")
# Anchored regexes over route templates; the artifact route carries its file path (see
# `object_for`). No regex may contain a comma: the policy text is CSV.
POLICY_TEXT = "\n".join(
    [
        # The policy document (issue 13) is covered by these two rows: operators read and
        # change it (/v1/policy, PATCH /v1/tenants/{tenant}), auditors read it and its versions.
        # Tenant roles and billing get no row for it: it is the operator's configuration (it
        # names internal services and the other kind's rules).
        r"p, operator, *, ^/v1(/.*)?$, ^[A-Z]+$, allow",
        r"p, auditor, *, ^/v1(/.*)?$, ^GET$, allow",
        r"p, auditor, *, ^/v1/fabrics/\{fabric\}/(audits|observations)$, ^POST$, allow",
        rf"p, auditor, *, {_SECRET_FILES}, ^[A-Z]+$, deny",
        r"p, billing, *, ^/v1/tenants(/\{tenant\})?$, ^GET$, allow",
        r"p, tenant-viewer, *, ^/v1/(tenants|qos-classes)$, ^GET$, allow",
        rf"p, tenant-viewer, *, {_TENANT_READS}, ^GET$, allow",
        r"p, tenant-admin, *, ^/v1/(tenants|qos-classes)$, ^GET$, allow",
        rf"p, tenant-admin, *, {_TENANT_READS}, ^GET$, allow",
        r"p, tenant-admin, *, ^/v1/tokens(/\{token_id\})?$, ^(GET|POST|DELETE)$, allow",
        rf"p, tenant-admin, *, {_PEERING_WRITES}, ^(POST|DELETE)$, allow",
        # isolation proofs (issue 5): issuing changes nothing, so auditors may POST it too
        r"p, auditor, *, ^/v1/tenants/\{tenant\}/isolation-proofs$, ^POST$, allow",
        r"p, tenant-admin, *, ^/v1/tenants/\{tenant\}/isolation-proofs$, ^POST$, allow",
        r"p, tenant-admin, *, ^/v1/proofs(/\{proof_id\})?$, ^GET$, allow",
        r"p, tenant-viewer, *, ^/v1/proofs(/\{proof_id\})?$, ^GET$, allow",
        r"p, billing, *, ^/v1/keys$, ^GET$, allow",
        # usage metering (issue 6): billing reads usage; operators and auditors read everything
        r"p, billing, *, ^/v1/usage/(records|records\.csv|events)$, ^GET$, allow",
        r"p, tenant-viewer, *, ^/v1/keys$, ^GET$, allow",
        r"p, tenant-admin, *, ^/v1/keys$, ^GET$, allow",
        # deploy agents (issue 11): read their fabric's files, post their target's reports;
        # `agent_scope_allows` narrows both to the one fabric and target of the token
        rf"p, agent, *, {_AGENT_READS}, ^GET$, allow",
        r"p, agent, *, ^/v1/fabrics/\{fabric\}/targets/\{name\}/reports$, ^POST$, allow",
        # /metrics (issue 14) names every fabric: the roles that read every fabric read it
        # (ISOFABRIC_METRICS_ACCESS=open lets anyone, without this policy)
        r"p, operator, *, ^/metrics$, ^GET$, allow",
        r"p, auditor, *, ^/metrics$, ^GET$, allow",
        # The console (issue 15): its route templates under /ui, the API's rules page by page.
        # Fabric-wide pages (fabrics, matrix, map, evidence, audit log) are the operator's and
        # the auditor's; a tenant role sees its own tenant's pages (the domain is the path's
        # tenant: another tenant's is hidden, 404), billing the tenants; operator actions
        # (any path with an `actions` segment) are the operator's alone.
        r"p, operator, *, ^/ui(/.*)?$, ^(GET|POST)$, allow",
        r"p, auditor, *, ^/ui(/.*)?$, ^GET$, allow",
        r"p, billing, *, ^/ui(/tenants(/\{tenant\})?)?$, ^GET$, allow",
        r"p, tenant-admin, *, ^/ui(/tenants/\{tenant\}(/.*)?)?$, ^GET$, allow",
        r"p, tenant-viewer, *, ^/ui(/tenants/\{tenant\}(/.*)?)?$, ^GET$, allow",
        # Evidence as GET /v1/proofs(/{proof_id}): a tenant role lists and reads its own
        # tenant's tenant views (the page narrows, api/ui/deps.py SELF_SCOPED_PAGES); no
        # fabric file (/ui/evidence/fabrics/...), as it reads none over the API.
        r"p, tenant-admin, *, ^/ui/evidence(/verify|/proofs/\{proof_id\})?$, ^GET$, allow",
        r"p, tenant-viewer, *, ^/ui/evidence(/verify|/proofs/\{proof_id\})?$, ^GET$, allow",
        *(rf"p, {role}, *, {_UI_ACTIONS}, ^[A-Z]+$, deny" for role in _NOT_OPERATORS),
    ]
)


class Decision(StrEnum):
    """What the API makes of a request: allow it, refuse it (403) or hide the tenant (404)."""

    ALLOW = "allow"
    FORBIDDEN = "forbidden"
    HIDDEN = "hidden"


def domain_matches(request_domain: str, binding_domain: str) -> bool:
    """A binding in ``*`` holds in every domain; any other binding only in its own."""
    return binding_domain == GLOBAL_DOMAIN or request_domain == binding_domain


def binding_domain(role: str, tenant: str | None) -> str:
    """The domain a principal's role is bound in: its tenant, or ``*`` for global roles.

    Raises:
        ValueError: the role is unknown, a tenant role has no tenant or a global role has one.
    """
    parsed = Role(role)
    if parsed in TENANT_ROLES:
        if not tenant:
            raise ValueError(f"role '{role}' needs a tenant")
        return tenant
    if tenant is not None:
        raise ValueError(f"role '{role}' is global and cannot have a tenant")
    return GLOBAL_DOMAIN


def build_enforcer(subject: str, role: str, tenant: str | None) -> Any:
    """An enforcer holding the role policies and one grouping row for `subject`."""
    domain = binding_domain(role, tenant)
    policy = f"{POLICY_TEXT}\ng, {subject}, {Role(role).value}, {domain}"
    enforcer = casbin.Enforcer(casbin.Enforcer.new_model(text=MODEL_TEXT), StringAdapter(policy))
    enforcer.add_named_domain_matching_func("g", domain_matches)
    enforcer.build_role_links()
    return enforcer


def agent_scope_allows(fabric: str | None, target: str | None, path_params: dict[str, str]) -> bool:
    """Whether an agent scoped to (`fabric`, `target`) may touch the request's path parameters.

    The policy rows say which routes an agent may use; this says on which fabric and target: its
    own only (a RoCE leaf's target is named after its leaf, and reads its own leaf's files,
    ``sonic/<leaf>/…`` and ``frr/<leaf>/…``, not another leaf's). A route without a fabric
    parameter is never an agent's.
    """
    if fabric is None or path_params.get("fabric") != fabric:
        return False
    leaf = _leaf_of_file(path_params.get("path", ""))
    if leaf is not None and leaf != target:
        return False
    return all(path_params.get(key, target) == target for key in ("name", "leaf"))


# The RoCE bundle's per-leaf directories (policies/roce/bundle.py).
_LEAF_FILE_DIRS = ("sonic", "frr")


def _leaf_of_file(path: str) -> str | None:
    """The leaf an artifact path belongs to (``sonic/leaf01/config_db.json``), if any."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] in _LEAF_FILE_DIRS:
        return parts[1]
    return None


def object_for(template: str, path_params: dict[str, str]) -> str:
    """The object of a request: the route template, with an artifact's file path filled in."""
    suffix = "/artifacts/{path:path}"
    if template.endswith(suffix):
        return template.removesuffix("{path:path}") + path_params.get("path", "")
    return template


def decide(
    subject: str, role: str, tenant: str | None, domain: str, obj: str, act: str
) -> Decision:
    """Decide one request of principal `subject` (holding `role` in `tenant`).

    Args:
        subject: The principal's key (unique per request). Its one grouping row binds it to its
            role, so the decision is the same for every subject with that role and tenant.
        role: The principal's role.
        tenant: The principal's tenant (tenant roles) or None (global roles).
        domain: The tenant the request is about, or ``*`` for fabric-wide requests.
        obj: The object (`object_for` of the matched route).
        act: The HTTP method.

    Returns:
        ALLOW if a policy allows it; HIDDEN if the request is about a tenant in which the
        principal holds no role (the caller must not learn that the tenant exists); FORBIDDEN
        otherwise.
    """
    if any(c in domain for c in ",\n\r"):
        return Decision.HIDDEN if tenant is not None else Decision.FORBIDDEN
    return _decision(role, tenant, domain, obj, act)


# Placeholder principal key: no role name can be it (role names have no colon).
_SUBJECT = "principal:"


@lru_cache(maxsize=4096)
def _decision(role: str, tenant: str | None, domain: str, obj: str, act: str) -> Decision:
    """`decide` for any subject: a pure function of the request, computed once per shape.

    Building a casbin enforcer costs more than the rest of a small request's authorization;
    the policy is fixed text, so a decision never changes.
    """
    enforcer = build_enforcer(_SUBJECT, role, tenant)
    if enforcer.enforce(_SUBJECT, domain, obj, act):
        return Decision.ALLOW
    if domain != GLOBAL_DOMAIN and not enforcer.get_roles_for_user_in_domain(_SUBJECT, domain):
        return Decision.HIDDEN
    return Decision.FORBIDDEN
