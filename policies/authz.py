"""Authorization: RBAC with domains (domain = tenant) on pycasbin, built from strings only.

Requests are ``(subject, domain, object, action)``: the subject is a principal key, the domain
the tenant the request is about (``*`` for fabric-wide requests), the object and the action what
the caller's rules match (the service: the matched route template, never the raw URL, so no
encoding or ``..`` trick changes the decision, and the HTTP method; api/access_rules.py). Role
policies live in the wildcard domain ``*``; each principal adds one grouping row binding it to its
role, in its tenant or, for global roles, in ``*``. A domain matching function lets a ``*`` binding
match every tenant; a plain ``r.dom == p.dom`` matcher would silently deny operators everywhere but
in ``*``.
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
    ORCHESTRATOR = "orchestrator"


GLOBAL_ROLES = frozenset({Role.OPERATOR, Role.AUDITOR, Role.BILLING, Role.AGENT})
TENANT_ROLES = frozenset({Role.TENANT_ADMIN, Role.TENANT_VIEWER})
# Bound in a tenant's domain when it has one, else in ``*`` (a scheduler acting for every
# tenant of its fabric): the orchestrator role of the UFM-compatible API (api/ufm/).
EITHER_ROLES = frozenset({Role.ORCHESTRATOR})
# Roles that act for a machine, never in the console.
MACHINE_ROLES = frozenset({Role.AGENT, Role.ORCHESTRATOR})

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
        ValueError: the role is unknown, a tenant role has no tenant or a global role has one
            (the orchestrator role may have one or not).
    """
    parsed = Role(role)
    if parsed in EITHER_ROLES:
        return tenant or GLOBAL_DOMAIN
    if parsed in TENANT_ROLES:
        if not tenant:
            raise ValueError(f"role '{role}' needs a tenant")
        return tenant
    if tenant is not None:
        raise ValueError(f"role '{role}' is global and cannot have a tenant")
    return GLOBAL_DOMAIN


def build_enforcer(rules: str, subject: str, role: str, tenant: str | None) -> Any:
    """An enforcer holding the role policies `rules` and one grouping row for `subject`.

    `rules` is casbin's CSV policy text, one ``p, <role>, *, <object regex>, <action regex>,
    allow|deny`` row per line (the service's are api/access_rules.py).
    """
    domain = binding_domain(role, tenant)
    policy = f"{rules}\ng, {subject}, {Role(role).value}, {domain}"
    enforcer = casbin.Enforcer(casbin.Enforcer.new_model(text=MODEL_TEXT), StringAdapter(policy))
    enforcer.add_named_domain_matching_func("g", domain_matches)
    enforcer.build_role_links()
    return enforcer


def decide(
    rules: str, subject: str, role: str, tenant: str | None, domain: str, obj: str, act: str
) -> Decision:
    """Decide one request of principal `subject` (holding `role` in `tenant`) under `rules`.

    Args:
        rules: The role policies (`build_enforcer`); a decision is a pure function of them.
        subject: The principal's key (unique per request). Its one grouping row binds it to its
            role, so the decision is the same for every subject with that role and tenant.
        role: The principal's role.
        tenant: The principal's tenant (tenant roles) or None (global roles).
        domain: The tenant the request is about, or ``*`` for fabric-wide requests.
        obj: The object the request is about (the service's: its matched route template).
        act: The HTTP method.

    Returns:
        ALLOW if a policy allows it; HIDDEN if the request is about a tenant in which the
        principal holds no role (the caller must not learn that the tenant exists); FORBIDDEN
        otherwise.
    """
    if any(c in domain for c in ",\n\r"):
        return Decision.HIDDEN if tenant is not None else Decision.FORBIDDEN
    return _decision(rules, role, tenant, domain, obj, act)


# Placeholder principal key: no role name can be it (role names have no colon).
_SUBJECT = "principal:"


@lru_cache(maxsize=4096)
def _decision(
    rules: str, role: str, tenant: str | None, domain: str, obj: str, act: str
) -> Decision:
    """`decide` for any subject: a pure function of the request, computed once per shape.

    Building a casbin enforcer costs more than the rest of a small request's authorization;
    the policy is fixed text, so a decision never changes.
    """
    enforcer = build_enforcer(rules, _SUBJECT, role, tenant)
    if enforcer.enforce(_SUBJECT, domain, obj, act):
        return Decision.ALLOW
    if domain != GLOBAL_DOMAIN and not enforcer.get_roles_for_user_in_domain(_SUBJECT, domain):
        return Decision.HIDDEN
    return Decision.FORBIDDEN
