"""verify_isolation: InfiniBand semantics, each rule refuted by a literal counterexample."""

from __future__ import annotations

import dataclasses

from policies.infiniband.model import DEFAULT_PKEY, Partition
from policies.infiniband.verify import verify_isolation
from policies.model import Grant, Node, NodeRole, Owner
from policies.verdict import Rule, Verdict
from tests.policies.snapshots import (
    guid,
    member,
    two_tenant_nodes,
    two_tenant_snapshot,
    with_partitions,
)


def rules_of(verdict: Verdict) -> set[Rule]:
    return {c.rule for c in verdict.counterexamples}


def test_planned_fabric_is_isolated_and_reports_only_granted_edges():
    verdict = verify_isolation(two_tenant_snapshot())

    assert verdict.holds
    assert verdict.counterexamples == ()
    edges = [(str(e.source), str(e.target), e.segment, e.allowed) for e in verdict.reachability]
    assert edges == [("tenant:acme", "service:storage", 0x0100, True)]


def test_ungranted_tenant_does_not_reach_the_service():
    verdict = verify_isolation(two_tenant_snapshot())

    assert not any(e.source == Owner.tenant("globex") for e in verdict.reachability)


def test_two_tenants_in_one_partition_is_a_cross_tenant_counterexample_naming_both_ports():
    leak = Partition(0x0103, Owner.tenant("acme"), (member("gpu0001"), member("gpu0003")))

    verdict = verify_isolation(with_partitions(two_tenant_snapshot(), leak))

    assert not verdict.holds
    [example] = [c for c in verdict.counterexamples if c.rule is Rule.CROSS_TENANT]
    assert example.segment == 0x0103
    assert example.a is not None and example.b is not None
    assert (example.a.owner, example.a.node, example.a.guid) == (
        Owner.tenant("acme"),
        "gpu0001",
        guid("gpu0001"),
    )
    assert (example.b.owner, example.b.node, example.b.guid) == (
        Owner.tenant("globex"),
        "gpu0003",
        guid("gpu0003"),
    )


def test_limited_members_of_two_tenants_cannot_reach_each_other():
    # IBA: limited <-> limited never communicates (docs/facts/infiniband.md §1.3).
    shared = Partition(
        0x0103, Owner.tenant("acme"), (member("gpu0001", full=False), member("gpu0003", full=False))
    )

    verdict = verify_isolation(with_partitions(two_tenant_snapshot(), shared))

    assert verdict.holds


def test_limited_tenant_port_with_a_full_foreign_port_is_a_counterexample():
    shared = Partition(
        0x0103, Owner.tenant("acme"), (member("gpu0001", full=False), member("gpu0003", full=True))
    )

    verdict = verify_isolation(with_partitions(two_tenant_snapshot(), shared))

    assert rules_of(verdict) == {Rule.CROSS_TENANT}


def test_service_membership_without_a_grant_is_refuted():
    snapshot = two_tenant_snapshot()
    ungranted = dataclasses.replace(snapshot, grants=())

    verdict = verify_isolation(ungranted)

    assert rules_of(verdict) == {Rule.SERVICE_WITHOUT_GRANT}
    [example] = verdict.counterexamples
    assert example.segment == 0x0100
    assert {example.a.owner, example.b.owner} == {  # type: ignore[union-attr]
        Owner.tenant("acme"),
        Owner.service("storage"),
    }


def test_tenant_port_full_in_the_default_partition_is_refuted():
    snapshot = dataclasses.replace(two_tenant_snapshot(), default_full=(guid("gpu0003"),))

    verdict = verify_isolation(snapshot)

    assert Rule.DEFAULT_PARTITION_FULL in rules_of(verdict)
    assert Rule.CROSS_TENANT in rules_of(verdict)
    example = next(c for c in verdict.counterexamples if c.rule is Rule.DEFAULT_PARTITION_FULL)
    assert example.segment == DEFAULT_PKEY and example.a.node == "gpu0003"  # type: ignore[union-attr]


def test_management_port_full_in_the_default_partition_is_expected():
    snapshot = dataclasses.replace(two_tenant_snapshot(), default_full=(guid("sm01"),))

    assert verify_isolation(snapshot).holds


def test_node_held_by_two_tenants_is_refuted():
    nodes = tuple(
        Node(n.name, n.role, (Owner.tenant("acme"), Owner.tenant("globex")))
        if n.name == "gpu0002"
        else n
        for n in two_tenant_nodes()
    )

    verdict = verify_isolation(two_tenant_snapshot(nodes=nodes))

    assert Rule.NODE_SHARED in rules_of(verdict)
    assert Rule.CROSS_TENANT in rules_of(verdict)


def test_management_node_held_by_a_tenant_is_refuted():
    nodes = tuple(
        Node(n.name, NodeRole.MANAGEMENT, n.owners) if n.name == "gpu0001" else n
        for n in two_tenant_nodes()
    )

    assert Rule.MANAGEMENT_ASSIGNED in rules_of(verify_isolation(two_tenant_snapshot(nodes=nodes)))


def test_port_budget_counts_the_default_partition():
    # acme's ports hold 0x0101, the storage key 0x0100 and 0x7fff: three keys.
    assert verify_isolation(two_tenant_snapshot(pkeys_per_port=3)).holds

    verdict = verify_isolation(two_tenant_snapshot(pkeys_per_port=2))

    assert rules_of(verdict) == {Rule.PKEY_BUDGET}
    assert {c.a.node for c in verdict.counterexamples} == {"gpu0001", "gpu0002"}  # type: ignore[union-attr]


def test_invalid_out_of_range_and_duplicated_keys_are_refuted():
    snapshot = with_partitions(
        two_tenant_snapshot(),
        Partition(0x7FFF, Owner.tenant("t-default"), ()),
        Partition(0x8104, Owner.tenant("t-membership-bit"), ()),
        Partition(0x0000, Owner.tenant("t-zero"), ()),
        Partition(0x0300, Owner.tenant("t-outside"), ()),
        Partition(0x0101, Owner.tenant("t-duplicate"), ()),
    )

    examples = {(c.rule, c.segment) for c in verify_isolation(snapshot).counterexamples}

    assert examples == {
        (Rule.PKEY_INVALID, 0x7FFF),
        (Rule.PKEY_INVALID, 0x8104),
        (Rule.PKEY_INVALID, 0x0000),
        (Rule.PKEY_OUT_OF_RANGE, 0x0300),
        (Rule.PKEY_DUPLICATE, 0x0101),
    }


def test_unknown_member_port_is_refuted():
    unknown = dataclasses.replace(member("gpu0001"), guid=0xDEAD)
    stray = Partition(0x0103, Owner.tenant("acme"), (member("gpu0001"), unknown))

    assert Rule.UNKNOWN_MEMBER in rules_of(
        verify_isolation(with_partitions(two_tenant_snapshot(), stray))
    )


def test_free_node_in_a_tenant_partition_is_refuted():
    leak = Partition(0x0103, Owner.tenant("acme"), (member("gpu0001"), member("gpu0004")))

    assert rules_of(verify_isolation(with_partitions(two_tenant_snapshot(), leak))) == {
        Rule.UNASSIGNED_MEMBER
    }


def test_granting_two_tenants_the_same_service_does_not_connect_them():
    nodes = tuple(
        Node(n.name, n.role, (Owner.tenant("acme"),)) if n.name == "gpu0004" else n
        for n in two_tenant_nodes()
    )
    grants = (Grant("acme", "storage"), Grant("globex", "storage"))

    verdict = verify_isolation(two_tenant_snapshot(nodes=nodes, grants=grants))

    assert verdict.holds
    assert {(str(e.source), str(e.target)) for e in verdict.reachability} == {
        ("tenant:acme", "service:storage"),
        ("tenant:globex", "service:storage"),
    }


def test_verdict_carries_the_snapshot_digest_which_changes_with_state():
    a, b = two_tenant_snapshot(), two_tenant_snapshot(grants=())

    assert verify_isolation(a).snapshot_digest == a.digest
    assert a.digest.startswith("v2:") and len(a.digest) == 3 + 64
    assert a.digest == two_tenant_snapshot().digest
    assert a.digest != b.digest


def test_counterexamples_are_capped_per_rule():
    from policies.verdict import MAX_COUNTEREXAMPLES_PER_RULE

    snapshot = with_partitions(
        two_tenant_snapshot(), *(Partition(0x7FFF, Owner.tenant(f"t{i}"), ()) for i in range(150))
    )

    invalid = [c for c in verify_isolation(snapshot).counterexamples if c.rule is Rule.PKEY_INVALID]

    assert len(invalid) == MAX_COUNTEREXAMPLES_PER_RULE
