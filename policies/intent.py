"""What isolation *should* allow: an owner reaches itself, a tenant the services it was granted.

Every technology's verifier compares the reachability it computes with `is_allowed_edge`.
"""

from __future__ import annotations

from policies.model import Grant, Owner, OwnerKind
from policies.policy import Peering

__all__ = ["is_allowed_edge"]


def is_allowed_edge(
    a: Owner, b: Owner, grants: frozenset[Grant], peerings: frozenset[Peering] = frozenset()
) -> bool:
    """Intent: an owner reaches itself, a tenant a service it was granted, a peer; no more.

    `peerings` are the accepted peerings the policy allows (`policy_rules.allowed_peerings`):
    two tenants peered there may reach each other.
    """
    if a == b:
        return True
    if a.kind is OwnerKind.SERVICE:
        a, b = b, a
    if a.kind is OwnerKind.TENANT and b.kind is OwnerKind.TENANT:
        return bool(peerings) and Peering.between(a.name, b.name) in peerings
    return (
        a.kind is OwnerKind.TENANT
        and b.kind is OwnerKind.SERVICE
        and Grant(a.name, b.name) in grants
    )
