"""What a snapshot carries for the policy rules: the policy, tenant facts, accepted peerings.

Every snapshot, whole or scoped, carries the policy in force and the facts (kind, QoS class, own
quota) of every tenant that holds something in it: nodes, a segment or a grant.
Under the built-in default (version 0) with no peering the rules need no facts and the digest
holds none (existing digests must not move), so none are read: the default costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlmodel import Session

from policies.model import Grant, Node, OwnerKind
from policies.policy import Peering, Policy, TenantFacts
from tenancy import models as m
from tenancy.record.policy_store import current_policy, tenant_facts
from tenancy.record.snapshot.common import Context
from tenancy.record.snapshot.peerings import accepted


@dataclass(frozen=True, slots=True)
class PolicyInputs:
    """The three policy fields of `IbSnapshot` and `RoceSnapshot`."""

    policy: Policy
    tenants: tuple[TenantFacts, ...]
    peerings: tuple[Peering, ...]


def accepted_peerings(
    session: Session, fabric: m.Fabric, context: Context | None = None
) -> tuple[Peering, ...]:
    """The accepted peerings on `fabric` (those `widen` read for the context, if given), sorted.

    Whether the policy allows each one is the verifier's rule (policies.policy_rules).
    """
    return tuple(peering for peering, _ in accepted(session, fabric, context))


def policy_inputs(
    session: Session,
    fabric: m.Fabric,
    context: Context | None,
    *,
    nodes: Iterable[Node],
    grants: Iterable[Grant],
    segment_tenants: Iterable[str],
) -> PolicyInputs:
    """The policy in force and the facts of the tenants holding `nodes`, segments or `grants`."""
    policy = current_policy(session)
    peerings = accepted_peerings(session, fabric, context)
    if policy.version == 0 and not peerings:
        return PolicyInputs(policy, (), peerings)
    names = set(segment_tenants) | {g.tenant for g in grants}
    names.update(o.name for n in nodes for o in n.owners if o.kind is OwnerKind.TENANT)
    names.update(name for p in peerings for name in (p.a, p.b))
    return PolicyInputs(policy, tenant_facts(session, names), peerings)
