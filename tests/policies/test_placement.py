"""Leaf-aware placement of `count` allocations (policies/placement.py, issue 13 item 3).

Properties over random fabrics, occupancies and policies: a placement is exactly `count` free
nodes none of which is cabled to a leaf the policy keeps apart, or a refusal that says why, and
it is refused only when no placement exists. Then the rules one at a time: fill the tenant's
leaf groups before opening new ones, open the fewest, count every rail of a multi-rail node,
keep `segment` tenants off dedicated tenants' leaves and otherwise pick by name as before.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.errors import ConflictError, NoPlacementError
from policies.model import Owner
from policies.placement import Candidate, Occupancy, blocked_leaves, place
from policies.policy import Isolation, Policy, TenantFacts, TenantKind, TenantKindPolicy
from policies.policy_rules import dedicated_leaf_violations
from policies.verdict import Endpoint

DEDICATED, SEGMENT = Isolation.DEDICATED_LEAF, Isolation.SEGMENT
FABRIC = "ib-rail"
TENANTS = ("acme", "globex", "initech", "research")


def rail_leaves(group: int, rails: int) -> frozenset[str]:
    """A rail-optimised leaf group: one leaf per rail, every node of the group on all of them."""
    return frozenset(f"leaf-g{group}-r{rail}" for rail in range(rails))


def group_nodes(group: int, sizes: Mapping[int, int]) -> list[str]:
    first = sum(size for g, size in sizes.items() if g < group) + 1
    return [f"gpu{n:04d}" for n in range(first, first + sizes[group])]


@dataclass(frozen=True)
class Fabric:
    """Nodes with their leaves and who holds each (a tenant, ``service:…``, or None: free)."""

    leaves: Mapping[str, frozenset[str]]
    holder: Mapping[str, str | None]

    def candidates(self) -> list[Candidate]:
        return [Candidate(n, self.leaves[n]) for n in sorted(self.leaves) if not self.holder[n]]

    def occupancy(self, dedicated: frozenset[str]) -> Occupancy:
        holders: dict[str, set[str]] = {}
        for node, owner in self.holder.items():
            if owner in TENANTS:  # services (and free nodes) hold no tenant's port
                for leaf in self.leaves[node]:
                    holders.setdefault(leaf, set()).add(owner)
        return Occupancy({k: frozenset(v) for k, v in holders.items()}, dedicated)

    def tenants_on(self, leaf: str) -> set[str]:
        return {
            owner
            for node, owner in self.holder.items()
            if owner in TENANTS and leaf in self.leaves[node]
        }


def rail_fabric(sizes: Mapping[int, int], rails: int, holder: Mapping[str, str | None]) -> Fabric:
    leaves = {n: rail_leaves(g, rails) for g in sizes for n in group_nodes(g, sizes)}
    return Fabric(leaves, {n: holder.get(n) for n in leaves})


@st.composite
def rail_fabrics(draw: st.DrawFn) -> tuple[Fabric, int]:
    """Random rail-optimised fabrics: groups of random size, one leaf per rail, random owners."""
    rails = draw(st.integers(1, 4))
    sizes = dict(enumerate(draw(st.lists(st.integers(1, 5), min_size=1, max_size=6)), start=1))
    owners = st.sampled_from([None, None, None, *TENANTS, "service:storage"])
    nodes = [n for g in sizes for n in group_nodes(g, sizes)]
    holder = {n: draw(owners) for n in nodes}
    return rail_fabric(sizes, rails, holder), rails


@st.composite
def irregular_fabrics(draw: st.DrawFn) -> Fabric:
    """Random cabling: each node on any set of leaves (none: uncabled), random owners."""
    leaves = [f"leaf{i:02d}" for i in range(1, 7)]
    count = draw(st.integers(1, 14))
    owners = st.sampled_from([None, None, *TENANTS, "service:storage"])
    cabling = st.frozensets(st.sampled_from(leaves), max_size=3)
    names = [f"gpu{n:04d}" for n in range(1, count + 1)]
    return Fabric({n: draw(cabling) for n in names}, {n: draw(owners) for n in names})


policies = st.builds(
    lambda internal, external: Policy(
        version=1,
        internal=TenantKindPolicy(isolation=internal),
        external=TenantKindPolicy(isolation=external),
    ),
    st.sampled_from(Isolation),
    st.sampled_from(Isolation),
)
kinds = st.fixed_dictionaries({t: st.sampled_from(TenantKind) for t in (*TENANTS, "newco")})


def dedicated_tenants(policy: Policy, kind: Mapping[str, TenantKind]) -> frozenset[str]:
    return frozenset(t for t, k in kind.items() if policy.for_tenant_kind(k).isolation is DEDICATED)


def may_place(fabric: Fabric, node: str, tenant: str, isolation: Isolation, dedicated) -> bool:
    """The rule checked node by node, apart from `blocked_leaves`: no leaf of the node holds
    another tenant (dedicated_leaf), or another tenant on dedicated leaves (segment)."""
    for leaf in fabric.leaves[node]:
        others = fabric.tenants_on(leaf) - {tenant}
        if (isolation is DEDICATED and others) or others & dedicated:
            return False
    return True


def placement(fabric, count, tenant, policy, kind) -> tuple[tuple[str, ...] | None, Exception]:
    dedicated = dedicated_tenants(policy, kind)
    isolation = policy.for_tenant_kind(kind[tenant]).isolation
    try:
        chosen = place(
            count,
            fabric.candidates(),
            tenant=tenant,
            isolation=isolation,
            occupancy=fabric.occupancy(dedicated),
            fabric=FABRIC,
        )
    except ConflictError as refusal:
        return None, refusal
    return chosen, ConflictError("placed")


def check_placement(fabric: Fabric, count: int, tenant: str, policy, kind) -> None:
    isolation = policy.for_tenant_kind(kind[tenant]).isolation
    dedicated = dedicated_tenants(policy, kind)
    chosen, refusal = placement(fabric, count, tenant, policy, kind)
    free = [c.node for c in fabric.candidates()]
    placeable = [n for n in free if may_place(fabric, n, tenant, isolation, dedicated)]
    if chosen is None:
        # Refused only when no placement exists, and the refusal says which case it is.
        assert len(placeable) < count
        assert isinstance(refusal, NoPlacementError) == (len(free) >= count)
        assert f"{len(free)} free compute node(s), {count} requested" in refusal.args[0]
        return
    assert len(chosen) == count == len(set(chosen))
    assert list(chosen) == sorted(chosen)
    assert set(chosen) <= set(placeable)
    # The verifier's rule agrees: the placement adds no shared leaf to what was there before.
    placed = Fabric(fabric.leaves, {**fabric.holder, **dict.fromkeys(chosen, tenant)})
    assert leaf_rule_refutations(placed, policy, kind) <= leaf_rule_refutations(
        fabric, policy, kind
    )


def leaf_rule_refutations(
    fabric: Fabric, policy: Policy, kind: Mapping[str, TenantKind]
) -> set[str]:
    """The messages of the verifier's dedicated-leaf counterexamples (policies/policy_rules.py)."""
    cabling = [
        (leaf, Endpoint(0, node, owner_of(holder)))
        for node, holder in fabric.holder.items()
        if holder
        for leaf in fabric.leaves[node]
    ]
    facts = [TenantFacts(name, tenant_kind) for name, tenant_kind in kind.items()]
    return {c.message for c in dedicated_leaf_violations(policy, facts, cabling)}


def owner_of(holder: str) -> Owner:
    kind, _, name = holder.rpartition(":")
    return Owner.service(name) if kind == "service" else Owner.tenant(name)


@settings(max_examples=300, deadline=None)
@given(
    rail_fabrics(),
    st.integers(0, 20),
    st.sampled_from([*TENANTS, "newco"]),
    policies,
    kinds,
)
def test_a_placement_on_a_rail_fabric_keeps_the_leaf_rule_or_is_refused_only_when_none_exists(
    fabric_rails, count, tenant, policy, kind
):
    fabric, _ = fabric_rails

    check_placement(fabric, count, tenant, policy, kind)


@settings(max_examples=300, deadline=None)
@given(irregular_fabrics(), st.integers(0, 10), st.sampled_from(TENANTS), policies, kinds)
def test_a_placement_on_any_cabling_keeps_the_leaf_rule_or_is_refused_only_when_none_exists(
    fabric, count, tenant, policy, kind
):
    check_placement(fabric, count, tenant, policy, kind)


@settings(max_examples=300, deadline=None)
@given(rail_fabrics(), st.integers(1, 20), st.sampled_from([*TENANTS, "newco"]))
def test_a_dedicated_tenant_finds_whole_free_leaf_groups_and_opens_the_fewest_leaves(
    fabric_rails, count, tenant
):
    fabric, rails = fabric_rails
    groups: dict[frozenset[str], list[str]] = {}
    for node, leaves in fabric.leaves.items():
        groups.setdefault(leaves, []).append(node)
    # Whole leaf groups no other tenant holds a port in: the tenant's own, and fresh ones.
    clear = {g: ns for g, ns in groups.items() if fabric.tenants_on(next(iter(g))) <= {tenant}}
    own = [g for g in clear if tenant in fabric.tenants_on(next(iter(g)))]
    free = {g: sum(1 for n in ns if not fabric.holder[n]) for g, ns in clear.items()}
    fresh = sorted((free[g] for g in clear if g not in own), reverse=True)
    need = count - sum(free[g] for g in own)
    opened = next((k for k in range(len(fresh) + 1) if sum(fresh[:k]) >= need), None)
    occupancy = fabric.occupancy(frozenset({tenant}))

    arguments = {"tenant": tenant, "isolation": DEDICATED, "fabric": FABRIC}

    if opened is None:
        with pytest.raises(ConflictError):
            place(count, fabric.candidates(), occupancy=occupancy, **arguments)
        return
    chosen = place(count, fabric.candidates(), occupancy=occupancy, **arguments)
    new_leaves = {leaf for n in chosen for leaf in fabric.leaves[n]} - occupancy.own_leaves(tenant)
    assert len(new_leaves) == opened * rails


@settings(max_examples=200, deadline=None)
@given(irregular_fabrics(), st.integers(0, 10), st.sampled_from(TENANTS), policies, kinds)
def test_a_placement_does_not_depend_on_the_order_of_the_candidates(
    fabric, count, tenant, policy, kind
):
    dedicated = dedicated_tenants(policy, kind)
    isolation = policy.for_tenant_kind(kind[tenant]).isolation
    shuffled = fabric.candidates()
    random.Random(count).shuffle(shuffled)
    arguments = {"tenant": tenant, "isolation": isolation, "fabric": FABRIC}
    occupancy = fabric.occupancy(dedicated)

    try:
        expected = place(count, fabric.candidates(), occupancy=occupancy, **arguments)
    except ConflictError as refusal:
        with pytest.raises(type(refusal), match="requested"):
            place(count, shuffled, occupancy=occupancy, **arguments)
        return
    assert place(count, shuffled, occupancy=occupancy, **arguments) == expected


@settings(max_examples=200, deadline=None)
@given(irregular_fabrics(), st.integers(0, 10), st.sampled_from(TENANTS))
def test_a_segment_tenant_with_no_dedicated_tenant_about_gets_the_first_free_nodes_by_name(
    fabric, count, tenant
):
    free = [c.node for c in fabric.candidates()]
    occupancy = fabric.occupancy(frozenset())
    arguments = {"tenant": tenant, "isolation": SEGMENT, "fabric": FABRIC}

    if len(free) < count:
        with pytest.raises(ConflictError) as refusal:
            place(count, fabric.candidates(), occupancy=occupancy, **arguments)
        assert not isinstance(refusal.value, NoPlacementError)
        return
    chosen = place(count, fabric.candidates(), occupancy=occupancy, **arguments)
    assert chosen == tuple(free[:count])


# --- the rules, one at a time ------------------------------------------------------------------


def four_groups(holder: Mapping[str, str | None], sizes=(4, 4, 4, 4)) -> Fabric:
    """Four leaf groups of two rails: gpu0001-0004 on leaf-g1-r0/r1, gpu0005-0008 on g2, ..."""
    return rail_fabric(dict(enumerate(sizes, start=1)), 2, holder)


def place_for(fabric: Fabric, tenant: str, count: int, *, dedicated=frozenset({"acme"})):
    isolation = DEDICATED if tenant in dedicated else SEGMENT
    occupancy = fabric.occupancy(frozenset(dedicated))
    return place(
        count,
        fabric.candidates(),
        tenant=tenant,
        isolation=isolation,
        occupancy=occupancy,
        fabric=FABRIC,
    )


def test_a_dedicated_tenant_fills_its_own_leaf_group_before_an_earlier_named_free_one():
    fabric = four_groups({"gpu0009": "acme", "gpu0010": "acme"})

    assert place_for(fabric, "acme", 2) == ("gpu0011", "gpu0012")


def test_a_dedicated_tenant_opens_a_new_group_only_for_what_its_own_cannot_hold():
    fabric = four_groups({"gpu0009": "acme", "gpu0010": "acme", "gpu0001": "globex"})

    # gpu0011-12 fill its group; then the first free group in name order (group 1 is shared).
    assert place_for(fabric, "acme", 4) == ("gpu0005", "gpu0006", "gpu0011", "gpu0012")


def test_a_dedicated_tenant_takes_the_smallest_group_that_fits_the_rest():
    fabric = four_groups({}, sizes=(4, 3, 2, 4))

    assert place_for(fabric, "acme", 2) == ("gpu0008", "gpu0009")
    assert place_for(fabric, "acme", 3) == ("gpu0005", "gpu0006", "gpu0007")


def test_a_dedicated_tenant_opens_the_biggest_groups_when_none_fits_the_rest():
    fabric = four_groups({}, sizes=(2, 3, 2, 4))

    # The biggest (4), then the smallest that fits the 2 left: two groups, where name order
    # (2 + 3 + 2) would open three.
    assert place_for(fabric, "acme", 6) == tuple(f"gpu{n:04d}" for n in (1, 2, 8, 9, 10, 11))


def test_every_rail_of_a_multi_rail_node_counts():
    fabric = Fabric(
        leaves={
            "gpu0001": frozenset({"leaf01", "leaf02"}),
            "gpu0002": frozenset({"leaf02", "leaf03"}),
            "gpu0003": frozenset({"leaf03", "leaf04"}),
            "gpu0004": frozenset({"leaf04"}),
        },
        holder={"gpu0001": None, "gpu0002": None, "gpu0003": None, "gpu0004": "globex"},
    )

    # gpu0003 reaches leaf04 through one rail only, and globex holds a port there.
    assert place_for(fabric, "acme", 2) == ("gpu0001", "gpu0002")
    assert blocked_leaves("acme", DEDICATED, fabric.occupancy(frozenset({"acme"}))) == {"leaf04"}
    with pytest.raises(NoPlacementError, match="only 2 are cabled to leaves that hold no other"):
        place_for(fabric, "acme", 3)


def test_a_multi_rail_node_sharing_leaves_with_two_groups_opens_only_its_new_leaves():
    fabric = Fabric(
        leaves={
            "gpu0001": frozenset({"leaf01", "leaf02"}),
            "gpu0002": frozenset({"leaf01", "leaf02"}),
            "gpu0003": frozenset({"leaf02", "leaf03"}),
            "gpu0004": frozenset({"leaf04", "leaf05"}),
        },
        holder={"gpu0001": "acme", "gpu0002": None, "gpu0003": None, "gpu0004": None},
    )

    # gpu0002 opens nothing, gpu0003 one leaf (leaf03), gpu0004 two.
    assert place_for(fabric, "acme", 2) == ("gpu0002", "gpu0003")


def test_a_segment_tenant_is_kept_off_a_dedicated_tenants_leaves_and_otherwise_goes_by_name():
    fabric = four_groups({"gpu0001": "acme", "gpu0009": "research"})

    assert place_for(fabric, "globex", 3) == ("gpu0005", "gpu0006", "gpu0007")


def test_a_segment_tenant_may_share_a_leaf_with_another_segment_tenant():
    fabric = four_groups({"gpu0001": "research"})

    assert place_for(fabric, "globex", 2) == ("gpu0002", "gpu0003")


def test_shared_service_ports_do_not_keep_a_dedicated_tenant_off_a_leaf():
    fabric = four_groups({"gpu0001": "service:storage"})

    assert place_for(fabric, "acme", 3) == ("gpu0002", "gpu0003", "gpu0004")


def test_the_refusal_says_that_every_leaf_is_shared_when_free_nodes_exist():
    fabric = four_groups({f"gpu{g * 4 + 1:04d}": "globex" for g in range(4)})

    with pytest.raises(NoPlacementError) as refusal:
        place_for(fabric, "acme", 2)

    assert refusal.value.detail == (
        "fabric 'ib-rail' has 12 free compute node(s), 2 requested, but every leaf they are "
        "cabled to holds another tenant's port (dedicated_leaf)"
    )
    assert refusal.value.extensions == {
        "requested": 2,
        "available": 12,
        "placeable": 0,
        "isolation": "dedicated_leaf",
    }


def test_the_refusal_of_a_segment_tenant_names_the_dedicated_leaves():
    fabric = four_groups({f"gpu{g * 4 + 1:04d}": "acme" for g in range(4)})

    with pytest.raises(NoPlacementError, match="holds a port of a tenant on dedicated leaves"):
        place_for(fabric, "globex", 1)


def test_too_few_free_nodes_is_the_plain_refusal_from_before_policies():
    fabric = four_groups({}, sizes=(1, 1, 1, 1))

    with pytest.raises(ConflictError) as refusal:
        place_for(fabric, "acme", 5)

    assert not isinstance(refusal.value, NoPlacementError)
    assert refusal.value.detail == "fabric 'ib-rail' has 4 free compute node(s), 5 requested"
    assert refusal.value.extensions == {"available": 4}


def test_an_uncabled_node_reaches_no_leaf_and_comes_after_the_tenants_own_group():
    fabric = Fabric(
        leaves={
            "gpu0001": frozenset(),
            "gpu0002": frozenset({"leaf01"}),
            "gpu0004": frozenset({"leaf02"}),
            "gpu0005": frozenset({"leaf02"}),
        },
        holder={"gpu0001": None, "gpu0002": None, "gpu0004": "acme", "gpu0005": None},
    )

    assert place_for(fabric, "acme", 1) == ("gpu0005",)
    assert place_for(fabric, "acme", 2) == ("gpu0001", "gpu0005")
    assert place_for(fabric, "acme", 3) == ("gpu0001", "gpu0002", "gpu0005")
