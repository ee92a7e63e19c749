"""The internal/external policy (policies.policy) as rules with counterexamples.

Usage. The verifiers call `policy_violations` with a `PolicyInputs` built from their snapshot
(`verify_isolation`, `verify_roce`), and pass `allowed_peerings` to `is_allowed_edge` so that an
accepted peering the policy allows is an intended edge. The service calls `quota_violations` with
the nodes each tenant holds across every fabric: a quota is not a per-fabric rule, because a
fabric's verdict and digest depend on that fabric only.

Missing facts. A tenant that holds something in a snapshot but has no `TenantFacts` there has no
known kind, so the rules about its own kind (QoS class, service visibility, dedicated leaves of its
own) are not checkable and yield nothing; it still counts as another tenant on a dedicated
tenant's leaf, and a peering with it is never an intended edge (reachability fails closed: its
edge is refuted as cross-tenant). The service always provides the facts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain, combinations

from policies.model import Grant, Owner, OwnerKind
from policies.policy import Isolation, Peering, Policy, TenantFacts
from policies.verdict import Counterexample, Endpoint, Rule

__all__ = [
    "LeafPort",
    "PolicyInputs",
    "allowed_peerings",
    "dedicated_leaf_violations",
    "effective_quota",
    "peering_violations",
    "policy_violations",
    "qos_class_violations",
    "quota_violations",
    "visibility_violations",
]

# A host port and the leaf switch it is cabled to: (leaf, the port's endpoint with its owner).
LeafPort = tuple[str, Endpoint]


def _no_segment(_: object) -> int | None:
    return None


@dataclass(frozen=True)
class PolicyInputs:
    """What the policy rules read from one fabric's snapshot, whatever its technology.

    `cabling` yields every host port with the leaf it is cabled to (InfiniBand: the switch of an
    HCA port; RoCE: the leaf of a NIC), one entry per owner of the port's node; it is read only
    when some kind is on dedicated leaves, so it may be a lazy generator. `endpoint` names an
    owner's first port; `segment` its own segment (P_Key or L3VNI); `peering_segment` the
    segment a peering holds, if any.
    """

    policy: Policy
    tenants: tuple[TenantFacts, ...]
    peerings: tuple[Peering, ...]
    grants: tuple[Grant, ...]
    cabling: Iterable[LeafPort]
    endpoint: Callable[[Owner], Endpoint]
    segment: Callable[[Owner], int | None] = field(default=_no_segment)
    peering_segment: Callable[[Peering], int | None] = field(default=_no_segment)


def policy_violations(inputs: PolicyInputs) -> Iterator[Counterexample]:
    """Every per-fabric policy rule: dedicated leaves, QoS classes, visibility, peerings.

    Property: the snapshot satisfies the policy it carries iff this yields nothing (quotas
    aside, see `quota_violations`). Counterexamples come rule by rule, each rule's sorted.
    """
    known = {facts.name: facts for facts in inputs.tenants}
    return chain(
        dedicated_leaf_violations(inputs.policy, inputs.tenants, inputs.cabling),
        qos_class_violations(inputs.policy, inputs.tenants, inputs.endpoint, inputs.segment),
        visibility_violations(inputs.policy, known, inputs.grants, inputs.endpoint, inputs.segment),
        peering_violations(inputs, known),
    )


def allowed_peerings(
    policy: Policy, tenants: Iterable[TenantFacts], peerings: Iterable[Peering]
) -> frozenset[Peering]:
    """The accepted peerings the policy allows: both tenants' facts known, both kinds may peer.

    These, and only these, make the reachability between two tenants an intended edge.
    """
    kind = {facts.name: facts.kind for facts in tenants}
    return frozenset(
        p for p in peerings if p.a in kind and p.b in kind and policy.may_peer(kind[p.a], kind[p.b])
    )


def dedicated_leaf_violations(
    policy: Policy, tenants: Iterable[TenantFacts], cabling: Iterable[LeafPort]
) -> Iterator[Counterexample]:
    """Refute a leaf that holds a port of a `dedicated_leaf` tenant and one of another tenant.

    Only tenants count as others: ports of shared services, management nodes and free nodes
    do not. One counterexample per leaf and pair of tenants, with each tenant's first port there
    (`a` is the dedicated one; when both are, the first by name). Leaves sorted by name.
    """
    dedicated = {
        facts.name
        for facts in tenants
        if policy.for_tenant_kind(facts.kind).isolation is Isolation.DEDICATED_LEAF
    }
    if not dedicated:
        return
    for leaf, held in sorted(_tenants_by_leaf(cabling).items()):
        for x, y in combinations(sorted(held), 2):
            if x.name in dedicated or y.name in dedicated:
                a, b = (x, y) if x.name in dedicated else (y, x)
                yield Counterexample(
                    Rule.DEDICATED_LEAF,
                    f"leaf {leaf} holds ports of {a}, whose kind is on dedicated leaves, "
                    f"and of {b}",
                    None,
                    held[a],
                    held[b],
                )


def _tenants_by_leaf(cabling: Iterable[LeafPort]) -> dict[str, dict[Owner, Endpoint]]:
    """Per leaf, each tenant's first port there (by node, GUID and switch port)."""
    found: dict[str, dict[Owner, Endpoint]] = defaultdict(dict)
    for leaf, endpoint in cabling:
        if endpoint.owner.kind is not OwnerKind.TENANT:
            continue
        first = found[leaf].get(endpoint.owner)
        if first is None or _endpoint_key(endpoint) < _endpoint_key(first):
            found[leaf][endpoint.owner] = endpoint
    return found


def _by_name(facts: TenantFacts) -> str:
    return facts.name


def _endpoint_key(endpoint: Endpoint) -> tuple[str, int, str]:
    return endpoint.node, endpoint.guid, endpoint.port or ""


def qos_class_violations(
    policy: Policy,
    tenants: Iterable[TenantFacts],
    endpoint: Callable[[Owner], Endpoint],
    segment: Callable[[Owner], int | None] = _no_segment,
) -> Iterator[Counterexample]:
    """Refute a tenant whose QoS class is not among the classes its kind may hold.

    A tenant without a class, or of a kind that admits every class, always holds.
    """
    for facts in sorted(tenants, key=_by_name):
        allowed = policy.for_tenant_kind(facts.kind).qos_classes
        if allowed is None or facts.qos_class is None or facts.qos_class in allowed:
            continue
        owner = Owner.tenant(facts.name)
        yield Counterexample(
            Rule.POLICY_QOS_CLASS,
            f"{owner} ({facts.kind.value}) holds QoS class {facts.qos_class!r}; "
            f"{facts.kind.value} tenants may hold {_listed(allowed)}",
            segment(owner),
            endpoint(owner),
        )


def _listed(names: Iterable[str]) -> str:
    quoted = [repr(name) for name in sorted(names)]
    return ", ".join(quoted) if quoted else "no class"


def visibility_violations(
    policy: Policy,
    known: Mapping[str, TenantFacts],
    grants: Iterable[Grant],
    endpoint: Callable[[Owner], Endpoint],
    segment: Callable[[Owner], int | None] = _no_segment,
) -> Iterator[Counterexample]:
    """Refute a grant of a service whose visibility does not admit the tenant's kind.

    `known` maps tenant names to their facts; a grant to a tenant without facts is skipped (not
    checkable, see the module docstring). The counterexample's segment is the service's.
    """
    for grant in sorted(grants):
        facts = known.get(grant.tenant)
        visibility = policy.visibility(grant.service)
        if facts is None or visibility.admits(facts.kind):
            continue
        tenant, service = Owner.tenant(grant.tenant), Owner.service(grant.service)
        yield Counterexample(
            Rule.SERVICE_VISIBILITY,
            f"{tenant} ({facts.kind.value}) is granted {service}, which the policy makes "
            f"visible to {visibility.value} tenants only",
            segment(service),
            endpoint(tenant),
            endpoint(service),
        )


def peering_violations(
    inputs: PolicyInputs, known: Mapping[str, TenantFacts]
) -> Iterator[Counterexample]:
    """Refute an accepted peering between two tenants whose kinds the policy does not let peer.

    A peering with a tenant without facts is not checkable here and yields nothing; it is not
    an intended edge either (`allowed_peerings`), so any reach it creates is refuted as such.
    """
    for peering in sorted(inputs.peerings):
        a, b = known.get(peering.a), known.get(peering.b)
        if a is None or b is None or inputs.policy.may_peer(a.kind, b.kind):
            continue
        yield Counterexample(
            Rule.PEERING_NOT_ALLOWED,
            f"tenant:{a.name} ({a.kind.value}) and tenant:{b.name} ({b.kind.value}) are peered, "
            f"but the policy does not let {a.kind.value} tenants peer with {b.kind.value} tenants",
            inputs.peering_segment(peering),
            inputs.endpoint(Owner.tenant(a.name)),
            inputs.endpoint(Owner.tenant(b.name)),
        )


def effective_quota(policy: Policy, facts: TenantFacts) -> int | None:
    """The most nodes a tenant may hold: its own quota if set, else its kind's (None: no limit)."""
    return (
        facts.max_nodes
        if facts.max_nodes is not None
        else policy.for_tenant_kind(facts.kind).max_nodes
    )


def quota_violations(
    policy: Policy, tenants: Iterable[TenantFacts], held_nodes: Mapping[str, int]
) -> list[Counterexample]:
    """Refute each tenant that holds more nodes than its quota, counted across every fabric.

    Args:
        policy: the policy in force (each kind's `max_nodes`).
        tenants: the facts of the tenants to check (a tenant's own `max_nodes` wins).
        held_nodes: tenant name -> nodes it holds on all fabrics together (absent: none).

    Returns:
        One `policy-quota` counterexample per tenant over its quota, sorted by tenant name;
        no endpoint (a quota is not about any one port or fabric).
    """
    found = []
    for facts in sorted(tenants, key=_by_name):
        quota = effective_quota(policy, facts)
        held = held_nodes.get(facts.name, 0)
        if quota is not None and held > quota:
            whose = "its own quota" if facts.max_nodes is not None else f"the {facts.kind} quota"
            found.append(
                Counterexample(
                    Rule.QUOTA_EXCEEDED,
                    f"tenant:{facts.name} ({facts.kind.value}) holds {held} nodes across all "
                    f"fabrics, more than {whose} of {quota}",
                )
            )
    return found
