"""The policy rules (issue 13) on InfiniBand and RoCE: the rail fabric holds, one change refutes.

Every test runs on both technologies: the same nodes, owners and leaves (tests/policies/
policy_fabrics.py), verified by `verify_isolation` and by `verify_roce`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from policies.infiniband.model import format_pkey
from policies.infiniband.verify import verify_isolation
from policies.model import Grant, Owner
from policies.policy import DEFAULT_POLICY, Isolation, Peering, TenantKind, TenantKindPolicy
from policies.policy_rules import quota_violations
from policies.roce.verify import verify_roce
from policies.verdict import POLICY_RULES, Counterexample, Rule, Verdict
from tests.policies import policy_fabrics as fab

EXT_A, EXT_B = Owner.tenant("ext-a"), Owner.tenant("ext-b")
INT_A, INT_B = Owner.tenant("int-a"), Owner.tenant("int-b")


@dataclass(frozen=True)
class Tech:
    """One technology: how to build the rail fabric, verify it, and name an owner's segment."""

    name: str
    build: Callable[..., Any]
    verify: Callable[[Any], Verdict]
    segment: Callable[[Owner], int]

    def verdict(self, **changes: Any) -> Verdict:
        return self.verify(self.build(**changes))


def _pkey(owner: Owner) -> int:
    return {**fab.TENANT_KEYS, **fab.SERVICE_KEYS}[owner.name]


INFINIBAND = Tech("infiniband", fab.ib_snapshot, verify_isolation, _pkey)
ROCE = Tech("roce", fab.roce_snapshot, verify_roce, fab.l3vni)


@pytest.fixture(params=[INFINIBAND, ROCE], ids=lambda tech: tech.name)
def tech(request: pytest.FixtureRequest) -> Tech:
    return request.param  # type: ignore[no-any-return]


def of_rule(verdict: Verdict, rule: Rule) -> list[Counterexample]:
    return [c for c in verdict.counterexamples if c.rule is rule]


def rules_of(verdict: Verdict) -> set[Rule]:
    return {c.rule for c in verdict.counterexamples}


def moved(**holders: Owner) -> dict[str, Owner]:
    return {**fab.HOLDERS, **holders}


def edge(verdict: Verdict, a: Owner, b: Owner) -> tuple[int, bool]:
    [found] = [
        (e.segment, e.allowed) for e in verdict.reachability if (e.source, e.target) == (a, b)
    ]
    return found


# --- the fabric that satisfies the policy ---------------------------------------------------------


def test_the_rail_fabric_satisfies_the_policy(tech: Tech):
    verdict = tech.verdict()

    assert verdict.holds, verdict.counterexamples
    assert set(POLICY_RULES) <= set(verdict.rules)
    assert Rule.QUOTA_EXCEEDED not in verdict.rules


def test_services_management_and_free_nodes_on_a_dedicated_leaf_do_not_count(tech: Tech):
    # stor01 (storage) and free gpu03 share ext-a's leaves, sm01 (management) ext-b's.
    assert fab.CABLING["stor01"][0] == ("leaf-g1-r0",)
    assert fab.CABLING["gpu03"][0] == fab.CABLING["gpu01"][0]
    assert fab.CABLING["sm01"][0][0] in fab.CABLING["gpu07"][0]

    assert tech.verdict().holds


# --- dedicated leaves -----------------------------------------------------------------------------


def test_a_dedicated_tenant_on_another_tenants_leaf_is_refuted_naming_the_leaf_and_both(tech: Tech):
    # gpu06 sits in leaf group 2 with int-a (gpu04) and int-b (gpu05).
    verdict = tech.verdict(holders=moved(gpu06=EXT_A))

    found = of_rule(verdict, Rule.DEDICATED_LEAF)
    assert rules_of(verdict) == {Rule.DEDICATED_LEAF}
    pairs = [(c.message.split()[1], c.a.node, c.b.owner, c.b.node) for c in found]  # type: ignore[union-attr]
    assert pairs == [
        ("leaf-g2-r0", "gpu06", INT_A, "gpu04"),
        ("leaf-g2-r0", "gpu06", INT_B, "gpu05"),
        ("leaf-g2-r1", "gpu06", INT_A, "gpu04"),
        ("leaf-g2-r1", "gpu06", INT_B, "gpu05"),
    ]
    assert all(c.a.owner == EXT_A and c.segment is None for c in found)  # type: ignore[union-attr]
    assert "dedicated leaves" in found[0].message


def test_the_dedicated_counterexample_names_the_ports_on_that_leaf(tech: Tech):
    verdict = tech.verdict(holders=moved(gpu06=EXT_A))

    first = of_rule(verdict, Rule.DEDICATED_LEAF)[0]
    assert first.a is not None and first.b is not None
    if tech is INFINIBAND:
        assert (first.a.guid, first.b.guid) == (fab.ib_guid("gpu06", 0), fab.ib_guid("gpu04", 0))
    else:
        assert first.a.port == "leaf-g2-r0:Ethernet16" and first.b.port == "leaf-g2-r0:Ethernet0"


def test_two_dedicated_tenants_on_one_leaf_give_one_counterexample_per_leaf(tech: Tech):
    verdict = tech.verdict(holders=moved(gpu08=EXT_A))  # group 3 holds ext-b

    found = of_rule(verdict, Rule.DEDICATED_LEAF)
    assert [(c.message.split()[1], c.a.owner, c.b.owner) for c in found] == [  # type: ignore[union-attr]
        ("leaf-g3-r0", EXT_A, EXT_B),
        ("leaf-g3-r1", EXT_A, EXT_B),
    ]


def test_tenants_of_a_segment_kind_may_share_leaves(tech: Tech):
    shared = replace(fab.POLICY, external=replace(fab.POLICY.external, isolation=Isolation.SEGMENT))

    verdict = tech.verdict(holders=moved(gpu06=EXT_A, gpu08=EXT_A), policy=shared)

    assert verdict.holds


def test_a_tenant_without_facts_still_counts_as_another_tenant_on_a_dedicated_leaf(tech: Tech):
    without_int_a = tuple(t for t in fab.TENANTS if t.name != "int-a")

    verdict = tech.verdict(holders=moved(gpu06=EXT_A), tenants=without_int_a)

    assert {c.b.owner for c in of_rule(verdict, Rule.DEDICATED_LEAF)} == {INT_A, INT_B}  # type: ignore[union-attr]


# --- QoS classes ----------------------------------------------------------------------------------


def test_a_class_outside_the_kinds_classes_is_refuted(tech: Tech):
    verdict = tech.verdict(tenants=fab.facts(**{"ext-a": "bronze"}))

    [example] = of_rule(verdict, Rule.POLICY_QOS_CLASS)
    assert rules_of(verdict) == {Rule.POLICY_QOS_CLASS}
    assert example.a is not None and (example.a.owner, example.a.node) == (EXT_A, "gpu01")
    assert example.segment == tech.segment(EXT_A)
    assert "'bronze'" in example.message and "'gold', 'silver'" in example.message


def test_any_class_is_admitted_when_the_kind_lists_none(tech: Tech):
    any_class = replace(fab.POLICY, external=replace(fab.POLICY.external, qos_classes=None))

    assert tech.verdict(tenants=fab.facts(**{"ext-a": "bronze"}), policy=any_class).holds


def test_an_empty_class_list_admits_only_tenants_without_a_class(tech: Tech):
    no_class = replace(fab.POLICY, internal=replace(fab.POLICY.internal, qos_classes=()))

    verdict = tech.verdict(tenants=fab.facts(**{"int-b": None}), policy=no_class)

    assert [c.a.owner for c in of_rule(verdict, Rule.POLICY_QOS_CLASS)] == [INT_A]  # type: ignore[union-attr]
    assert "no class" in verdict.counterexamples[0].message


# --- service visibility ---------------------------------------------------------------------------


def test_an_internal_service_granted_to_an_external_tenant_is_refuted(tech: Tech):
    verdict = tech.verdict(grants=(*fab.GRANTS, Grant("ext-a", "telemetry")))

    [example] = of_rule(verdict, Rule.SERVICE_VISIBILITY)
    assert rules_of(verdict) == {Rule.SERVICE_VISIBILITY}
    telemetry = Owner.service("telemetry")
    assert (example.a.owner, example.b.owner) == (EXT_A, telemetry)  # type: ignore[union-attr]
    assert example.b.node == "tel01"  # type: ignore[union-attr]
    assert example.segment == tech.segment(telemetry)
    # The grant still makes the edge intended: the refutation is the visibility rule alone.
    assert edge(verdict, EXT_A, telemetry)[1] is True


def test_a_service_the_policy_does_not_name_is_visible_to_every_kind(tech: Tech):
    unnamed = replace(fab.POLICY, services=())

    assert tech.verdict(grants=(*fab.GRANTS, Grant("ext-a", "telemetry")), policy=unnamed).holds


# --- peering --------------------------------------------------------------------------------------


def test_an_allowed_peering_is_an_intended_edge(tech: Tech):
    verdict = tech.verdict(peerings=(fab.INT_PEERING,))

    assert verdict.holds, verdict.counterexamples
    segment, allowed = edge(verdict, INT_A, INT_B)
    assert allowed is True
    assert segment == (fab.PEERING_KEY if tech is INFINIBAND else tech.segment(INT_B))


def test_without_the_peering_the_two_tenants_do_not_reach_each_other(tech: Tech):
    verdict = tech.verdict()

    assert not [e for e in verdict.reachability if {e.source, e.target} == {INT_A, INT_B}]


def test_a_peering_the_policy_does_not_allow_is_refuted_and_its_edge_is_not_intended(tech: Tech):
    verdict = tech.verdict(peerings=(Peering("ext-a", "int-a"),))

    [example] = of_rule(verdict, Rule.PEERING_NOT_ALLOWED)
    assert (example.a.owner, example.b.owner) == (EXT_A, INT_A)  # type: ignore[union-attr]
    assert "external" in example.message and "internal" in example.message
    assert edge(verdict, EXT_A, INT_A)[1] is False
    assert rules_of(verdict) == {Rule.PEERING_NOT_ALLOWED, Rule.CROSS_TENANT}
    if tech is INFINIBAND:
        assert example.segment == fab.PEERING_KEY
        assert format_pkey(fab.PEERING_KEY) in of_rule(verdict, Rule.CROSS_TENANT)[0].message


def test_both_kinds_must_allow_a_peering(tech: Tech):
    one_sided = replace(
        fab.POLICY, external=replace(fab.POLICY.external, peering=(TenantKind.INTERNAL,))
    )

    verdict = tech.verdict(peerings=(Peering("ext-a", "int-a"),), policy=one_sided)

    assert Rule.PEERING_NOT_ALLOWED in rules_of(verdict)


def test_the_default_policy_lets_internal_tenants_peer(tech: Tech):
    verdict = tech.verdict(peerings=(fab.INT_PEERING,), policy=DEFAULT_POLICY)

    assert verdict.holds and edge(verdict, INT_A, INT_B)[1] is True


def test_a_peering_with_a_tenant_without_facts_is_not_an_intended_edge(tech: Tech):
    without_int_b = tuple(t for t in fab.TENANTS if t.name != "int-b")

    verdict = tech.verdict(peerings=(fab.INT_PEERING,), tenants=without_int_b)

    assert rules_of(verdict) == {Rule.CROSS_TENANT}
    assert edge(verdict, INT_A, INT_B)[1] is False


# --- quota (global, not part of a fabric's verdict) -----------------------------------------------


QUOTA = replace(
    fab.POLICY,
    internal=replace(fab.POLICY.internal, max_nodes=4),
    external=TenantKindPolicy(max_nodes=None),
)


def test_a_tenant_over_its_kinds_quota_across_fabrics_is_refuted():
    [example] = quota_violations(QUOTA, fab.TENANTS, {"int-a": 5, "int-b": 4, "ext-a": 900})

    assert example.rule is Rule.QUOTA_EXCEEDED
    assert example.message == (
        "tenant:int-a (internal) holds 5 nodes across all fabrics, more than the internal "
        "quota of 4"
    )
    assert (example.a, example.b, example.segment) == (None, None, None)


def test_a_tenants_own_quota_wins_over_its_kinds_in_both_directions():
    tenants = (
        replace(fab.TENANTS[2], max_nodes=10),  # int-a: more than the kind's 4
        replace(fab.TENANTS[0], max_nodes=2),  # ext-a: the kind has no quota
    )

    found = quota_violations(QUOTA, tenants, {"int-a": 10, "ext-a": 3})

    assert [c.message for c in found] == [
        "tenant:ext-a (external) holds 3 nodes across all fabrics, more than its own quota of 2"
    ]


def test_a_quota_of_zero_refutes_any_node_and_absent_counts_hold_none():
    zero = replace(fab.POLICY, external=replace(fab.POLICY.external, max_nodes=0))

    found = quota_violations(zero, fab.TENANTS, {"ext-b": 1})

    assert [c.message.split()[0] for c in found] == ["tenant:ext-b"]


def test_no_quota_holds_under_the_default_policy():
    assert quota_violations(DEFAULT_POLICY, fab.TENANTS, {t.name: 10**6 for t in fab.TENANTS}) == []
