"""The service's access rules: which role may use which route, as casbin policy rows.

The engine (policies/authz.py) holds the roles, the domains and the decision function; this
module holds what only the HTTP service knows: its route templates. A rule's object is an
anchored regular expression over the matched route template (never the raw URL: no encoding or
``..`` trick changes a decision), its action one over the HTTP method. `decide` is the engine's
decision under these rules; `object_for` and `agent_scope_allows` read a request's route and
path parameters.
"""

from __future__ import annotations

from policies.authz import Decision
from policies.authz import decide as decide_under

_TENANT_READS = (
    r"^/v1/tenants/\{tenant\}(/(allocations|grants)(/\{(allocation_id|grant_id)\})?"
    r"|/reachability|/peerings|/peering-requests|/partitions(/\{name\})?)?$"
)
# A tenant-admin creates, deletes and fills its own tenant's partitions.
_PARTITION_WRITES = r"^/v1/tenants/\{tenant\}/partitions(/\{name\}(/members(/\{guid\})?)?)?$"
# Consented peering: a tenant-admin requests, accepts and ends its own tenant's.
_PEERING_WRITES = (
    r"^/v1/tenants/\{tenant\}/(peerings(/\{peering_id\})?"
    r"|peering-requests/\{peering_id\}/accept)$"
)
# opensm.conf holds the subnet's management keys: never an auditor's, live or from history.
_SECRET_FILES = r"^/v1/fabrics/\{fabric\}/(snapshots/\{digest\}/)?artifacts/(.*/)?opensm\.conf$"
# A RoCE leaf's agent also reads its leaf's patch between two snapshots.
_AGENT_READS = (
    r"^/v1/fabrics/\{fabric\}/(signed-manifest|sync|artifacts|artifacts/.+|targets/\{name\}"
    r"|snapshots|snapshots/\{digest\}/artifacts/.+|snapshots/\{digest\}/patches/\{leaf\})$"
)
# Console operator actions: the operator's only, whatever another row allows.
_UI_ACTIONS = r"^/ui/(.+/)?actions(/.*)?$"
_NOT_OPERATORS = ("auditor", "billing", "tenant-admin", "tenant-viewer", "agent", "orchestrator")
# Anchored regexes over route templates; the artifact route carries its file path (see
# `object_for`). No regex may contain a comma: the policy text is CSV.
ROUTE_RULES = "\n".join(
    [
        # The policy document is covered by these two rows: operators read and
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
        rf"p, tenant-admin, *, {_PARTITION_WRITES}, ^(POST|PUT|DELETE)$, allow",
        # isolation proofs: issuing changes nothing, so auditors may POST it too
        r"p, auditor, *, ^/v1/tenants/\{tenant\}/isolation-proofs$, ^POST$, allow",
        r"p, tenant-admin, *, ^/v1/tenants/\{tenant\}/isolation-proofs$, ^POST$, allow",
        r"p, tenant-admin, *, ^/v1/proofs(/\{proof_id\})?$, ^GET$, allow",
        r"p, tenant-viewer, *, ^/v1/proofs(/\{proof_id\})?$, ^GET$, allow",
        r"p, billing, *, ^/v1/keys(/transitions)?$, ^GET$, allow",
        # usage metering: billing reads usage; operators and auditors read everything
        r"p, billing, *, ^/v1/usage/(records|records\.csv|events)$, ^GET$, allow",
        r"p, tenant-viewer, *, ^/v1/keys(/transitions)?$, ^GET$, allow",
        r"p, tenant-admin, *, ^/v1/keys(/transitions)?$, ^GET$, allow",
        # deploy agents: read their fabric's files, post their target's reports;
        # `agent_scope_allows` narrows both to the one fabric and target of the token
        rf"p, agent, *, {_AGENT_READS}, ^GET$, allow",
        r"p, agent, *, ^/v1/fabrics/\{fabric\}/targets/\{name\}/reports$, ^POST$, allow",
        r"p, agent, *, ^/v1/keys/transitions$, ^GET$, allow",
        # orchestrators (the UFM-compatible API, api/ufm/) read their scope's partitions
        # here, on their own fabric (api/routes/partitions.py `own_fabric`), and nothing else
        r"p, orchestrator, *, ^/v1/tenants/\{tenant\}/partitions(/\{name\})?$, ^GET$, allow",
        # /metrics names every fabric: the roles that read every fabric read it
        # (ISOFABRIC_METRICS_ACCESS=open lets anyone, without this policy)
        r"p, operator, *, ^/metrics$, ^GET$, allow",
        r"p, auditor, *, ^/metrics$, ^GET$, allow",
        # The console: its route templates under /ui, the API's rules page by page.
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


def decide(
    subject: str, role: str, tenant: str | None, domain: str, obj: str, act: str
) -> Decision:
    """The engine's decision for one request under the service's `ROUTE_RULES`."""
    return decide_under(ROUTE_RULES, subject, role, tenant, domain, obj, act)


def agent_scope_allows(
    fabric: str | None,
    deploy_target: str | None,
    path_params: dict[str, str],
    template: str = "",
) -> bool:
    """Whether an agent scoped to (`fabric`, `deploy_target`) may use the path parameters.

    The policy rows say which routes an agent may use; this says on which fabric and target: its
    own only (a RoCE leaf's target is named after its leaf, and reads its own leaf's files,
    ``sonic/<leaf>/…`` and ``frr/<leaf>/…``, not another leaf's). A route without a fabric
    parameter is never an agent's, except the key transitions every agent follows.
    """
    if template in _AGENT_ANY_FABRIC:
        return True
    if fabric is None or path_params.get("fabric") != fabric:
        return False
    leaf = _leaf_of_file(path_params.get("path", ""))
    if leaf is not None and leaf != deploy_target:
        return False
    return all(path_params.get(key, deploy_target) == deploy_target for key in ("name", "leaf"))


# Routes about no fabric that every agent reads: how the service's signing key was rotated.
_AGENT_ANY_FABRIC = frozenset({"/v1/keys/transitions"})
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
