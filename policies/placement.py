"""Where a `count` allocation puts a tenant's nodes: leaf-aware placement under the policy.

A node's ports are cabled to leaf switches (InfiniBand: the switch each HCA port connects to;
RoCE: each NIC's leaf); a multi-rail node reaches several leaves, and every one of them counts.
Under `dedicated_leaf` no leaf one of a tenant's ports is cabled to may hold another tenant's
port (shared-service, management and free ports do not count), so a dedicated tenant
takes whole leaf groups: the nodes that share the same leaves. Placement keeps that rule for the
tenant being placed and for every dedicated tenant already on the fabric, and `place` says why
when it cannot.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from policies.errors import ConflictError, NoPlacementError
from policies.policy import Isolation

__all__ = ["Candidate", "Occupancy", "blocked_leaves", "place"]


@dataclass(frozen=True, slots=True, order=True)
class Candidate:
    """A free compute node and the leaves its ports are cabled to (none when it is uncabled)."""

    node: str
    leaves: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Who holds ports on the leaves that matter to a placement.

    `holders` maps a leaf to the tenants holding at least one port cabled to it (tenants only:
    services, management and free nodes are no one's); a leaf it does not name holds no tenant.
    `dedicated` names the tenants on the fabric whose kind is under `dedicated_leaf`.
    """

    holders: Mapping[str, frozenset[str]]
    dedicated: frozenset[str] = frozenset()

    def own_leaves(self, tenant: str) -> frozenset[str]:
        """The leaves `tenant` already holds a port on."""
        return frozenset(leaf for leaf, tenants in self.holders.items() if tenant in tenants)


def blocked_leaves(tenant: str, isolation: Isolation, occupancy: Occupancy) -> frozenset[str]:
    """The leaves no node of `tenant` may be placed on.

    Under `dedicated_leaf`: every leaf holding another tenant's port. Under `segment`: every
    leaf holding a port of another tenant that is under `dedicated_leaf` (placing there would
    break that tenant's isolation, and the verifier would refuse the allocation).
    """
    guarded = None if isolation is Isolation.DEDICATED_LEAF else occupancy.dedicated
    return frozenset(
        leaf
        for leaf, tenants in occupancy.holders.items()
        if any(other != tenant and (guarded is None or other in guarded) for other in tenants)
    )


def place(
    count: int,
    candidates: Iterable[Candidate],
    *,
    tenant: str,
    isolation: Isolation,
    occupancy: Occupancy,
    fabric: str,
) -> tuple[str, ...]:
    """Pick `count` of the free `candidates` for `tenant` (of `isolation`); names sorted.

    Property: no chosen node is cabled to a leaf of `blocked_leaves`, and a placement is found
    whenever `count` candidates avoid those leaves (placing a tenant never blocks its own
    leaves). Under `segment` the choice is the first `count` such candidates by name, which is
    the choice from before policies existed whenever no dedicated tenant is on the fabric.
    Under `dedicated_leaf` the nodes fill leaf groups: first those within leaves the tenant
    already holds, then new groups opened fewest new leaves first, a group that fits the rest
    (the smallest one) before a bigger one that does not, else the biggest (on a rail-optimised
    fabric, disjoint groups of equal leaf count, this opens the fewest leaves there are);
    ties go by node name. Deterministic: the same inputs give the same nodes.

    Raises:
        ConflictError: fewer than `count` candidates are free at all.
        NoPlacementError: enough are free, but too few avoid the blocked leaves; the detail
            says so, and the extensions count ``requested``, ``available`` and ``placeable``.
    """
    free = sorted(candidates)
    blocked = blocked_leaves(tenant, isolation, occupancy)
    placeable = [c for c in free if not c.leaves & blocked]
    if len(placeable) < count:
        raise _refusal(fabric, count, len(free), len(placeable), isolation)
    if isolation is Isolation.SEGMENT:
        return tuple(c.node for c in placeable[:count])
    return tuple(sorted(_fill_groups(count, placeable, occupancy.own_leaves(tenant))))


def _refusal(
    fabric: str, count: int, free: int, placeable: int, isolation: Isolation
) -> ConflictError:
    """Why `count` nodes cannot be placed: too few free, or too few on unshared leaves."""
    if free < count:
        # The message from before policies existed (tenancy/usecases/placement.py keeps it for the
        # default).
        return ConflictError(
            f"fabric '{fabric}' has {free} free compute node(s), {count} requested",
            available=free,
        )
    if isolation is Isolation.DEDICATED_LEAF:
        holder, clear = "another tenant's port", "no other tenant's port"
    else:
        holder, clear = "a port of a tenant on dedicated leaves", "no dedicated tenant's port"
    why = (
        f"every leaf they are cabled to holds {holder}"
        if placeable == 0
        else f"only {placeable} are cabled to leaves that hold {clear}"
    )
    return NoPlacementError(
        f"fabric '{fabric}' has {free} free compute node(s), {count} requested, but {why} "
        "(dedicated_leaf)",
        requested=count,
        available=free,
        placeable=placeable,
        isolation=isolation.value,
    )


def _fill_groups(count: int, placeable: Sequence[Candidate], own: Collection[str]) -> list[str]:
    """`count` nodes of `placeable` (sorted by name) filling leaf groups as `place` describes."""
    groups: dict[frozenset[str], list[str]] = {}
    for candidate in placeable:
        groups.setdefault(candidate.leaves, []).append(candidate.node)
    used, chosen = set(own), list[str]()
    while len(chosen) < count:
        need = count - len(chosen)
        leaves = min(groups, key=lambda g: _group_rank(g, groups[g], used, need))
        taken, groups[leaves] = groups[leaves][:need], groups[leaves][need:]
        if not groups[leaves]:
            del groups[leaves]
        chosen += taken
        used |= leaves
    return chosen


def _group_rank(
    leaves: frozenset[str], nodes: Sequence[str], used: set[str], need: int
) -> tuple[int, int, int, str]:
    """Lower is taken first: fewest new leaves; a group that fits (smallest), else the biggest.

    Groups within leaves already used cost nothing and go by name, cabled ones first (an
    uncabled node reaches no leaf, so it opens none either).
    """
    new = len(leaves - used)
    if new == 0:
        return (0, 0 if leaves else 1, 0, nodes[0])
    fits = len(nodes) >= need
    return (new, 0 if fits else 1, len(nodes) if fits else -len(nodes), nodes[0])
