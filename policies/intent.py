"""What isolation *should* allow: an owner reaches itself, a tenant the services it was granted.

Every technology's verifier compares the reachability it computes with `is_allowed_edge`.
"""

from __future__ import annotations

from policies.model import Grant, Owner, OwnerKind

__all__ = ["is_allowed_edge"]


def is_allowed_edge(a: Owner, b: Owner, grants: frozenset[Grant]) -> bool:
    """Intent: an owner reaches itself, and a tenant reaches a service it was granted; no more."""
    if a == b:
        return True
    if a.kind is OwnerKind.SERVICE:
        a, b = b, a
    return (
        a.kind is OwnerKind.TENANT
        and b.kind is OwnerKind.SERVICE
        and Grant(a.name, b.name) in grants
    )
