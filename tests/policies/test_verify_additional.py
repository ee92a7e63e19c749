"""verify_isolation with additional partitions and virtual GUIDs: each rule held and refuted."""

from __future__ import annotations

from dataclasses import replace

from policies.infiniband import UnobservedMembership, unobserved_memberships
from policies.infiniband.model import IbSnapshot, Member, Partition, VirtualGuid
from policies.infiniband.verify import verify_isolation
from policies.infiniband.verify_index import VerifyIndex
from policies.model import Owner
from policies.verdict import IB_RULES, Rule, Verdict
from tests.policies.snapshots import guid, member, two_tenant_snapshot

ACME, GLOBEX = Owner.tenant("acme"), Owner.tenant("globex")
VF_ACME, VF_GLOBEX, STRANGER = 0x0A00000000000001, 0x0B00000000000001, 0x0C00000000000001
BOUND = (VirtualGuid(VF_ACME, "acme"), VirtualGuid(VF_GLOBEX, "globex"))


def additional(pkey: int, *members: Member, label: str = "data", index0: bool = False) -> Partition:
    return Partition(pkey, ACME, members, label=label, index0=index0)


def snapshot_with(*extra: Partition, pkeys_per_port: int = 128) -> IbSnapshot:
    base = two_tenant_snapshot(pkeys_per_port=pkeys_per_port)
    partitions = tuple(sorted(base.partitions + extra, key=lambda p: p.pkey))
    return replace(base, partitions=partitions, virtual_guids=BOUND)


def rules_of(verdict: Verdict) -> set[Rule]:
    return {c.rule for c in verdict.counterexamples}


def test_both_new_rules_are_infiniband_rules():
    assert {Rule.FOREIGN_MEMBER, Rule.INDEX0_CONFLICT} <= set(IB_RULES)
    assert Rule.FOREIGN_MEMBER.value == "partition-foreign-member"
    assert Rule.INDEX0_CONFLICT.value == "index0-conflict"


def test_an_additional_partition_of_the_tenants_ports_and_virtual_guids_holds():
    extra = additional(
        0x0103, member("gpu0001"), member("gpu0002", full=False), Member(VF_ACME, True)
    )

    verdict = verify_isolation(snapshot_with(extra))

    assert verdict.holds
    assert not any(e.segment == 0x0103 for e in verdict.reachability)


def test_a_port_may_be_in_several_partitions_of_its_tenant():
    extras = [additional(0x0103 + i, member("gpu0001"), label=f"l{i}") for i in range(3)]

    assert verify_isolation(snapshot_with(*extras)).holds


def test_a_partition_holding_only_another_tenants_ports_is_a_foreign_member():
    extra = additional(0x0103, member("gpu0003"), member("gpu0003", 1))

    verdict = verify_isolation(snapshot_with(extra))

    assert rules_of(verdict) == {Rule.FOREIGN_MEMBER}  # no cross-owner edge: only globex's ports
    first = verdict.counterexamples[0]
    assert first.segment == 0x0103
    assert "part_acme_data" in first.message and "0x0103" in first.message
    assert first.a is not None
    assert (first.a.guid, first.a.node, first.a.owner) == (guid("gpu0003"), "gpu0003", GLOBEX)


def test_a_free_port_and_a_service_port_are_foreign_members_too():
    extra = additional(0x0103, member("gpu0001"), member("gpu0004"), member("stor01", full=False))

    examples = verify_isolation(snapshot_with(extra)).counterexamples

    foreign = {c.a.node for c in examples if c.rule is Rule.FOREIGN_MEMBER}  # type: ignore[union-attr]
    assert foreign == {"gpu0004", "stor01"}


def test_a_virtual_guid_of_another_tenant_is_a_foreign_member_and_an_edge():
    extra = additional(0x0103, member("gpu0001"), Member(VF_GLOBEX, True))

    verdict = verify_isolation(snapshot_with(extra))

    assert rules_of(verdict) == {Rule.FOREIGN_MEMBER, Rule.CROSS_TENANT}
    edge = next(c for c in verdict.counterexamples if c.rule is Rule.CROSS_TENANT)
    assert edge.segment == 0x0103 and edge.b is not None
    assert (edge.b.guid, edge.b.owner) == (VF_GLOBEX, GLOBEX)


def test_cross_owner_edges_through_virtual_guids_are_found_in_any_partition():
    # globex's virtual GUID, full, in globex's own additional partition with an acme port.
    leak = Partition(
        0x0103, GLOBEX, (Member(VF_GLOBEX, True), member("gpu0001", full=False)), label="x"
    )

    verdict = verify_isolation(snapshot_with(leak))

    assert Rule.CROSS_TENANT in rules_of(verdict)
    assert any({e.source, e.target} == {ACME, GLOBEX} for e in verdict.reachability)


def test_limited_virtual_guids_of_two_tenants_do_not_reach_each_other():
    shared = Partition(
        0x0103, Owner.service("storage"), (Member(VF_ACME, False), Member(VF_GLOBEX, False))
    )

    assert verify_isolation(snapshot_with(shared)).holds


def test_peering_and_default_partitions_are_not_judged_as_foreign():
    # A default partition is derived: a stray member there is an edge (and drift), not this rule.
    stray = Partition(0x0103, ACME, (member("gpu0001"), member("gpu0004")))

    assert Rule.FOREIGN_MEMBER not in rules_of(verify_isolation(snapshot_with(stray)))


def test_a_member_neither_port_nor_bound_virtual_guid_is_unknown():
    extra = additional(0x0103, member("gpu0001"), Member(VF_ACME, True), Member(STRANGER, True))

    examples = verify_isolation(snapshot_with(extra)).counterexamples

    unknown = [c for c in examples if c.rule is Rule.UNKNOWN_MEMBER]
    assert len(unknown) == 1 and f"{STRANGER:016x}" in unknown[0].message
    assert Rule.FOREIGN_MEMBER not in {c.rule for c in examples}


def test_one_index0_partition_per_member_holds_two_do_not():
    one = additional(0x0103, member("gpu0001"), Member(VF_ACME, True), index0=True)
    other = additional(0x0104, member("gpu0002"), label="other", index0=True)
    assert verify_isolation(snapshot_with(one, other)).holds

    clash = additional(0x0105, member("gpu0001"), Member(VF_ACME, True), label="third", index0=True)
    verdict = verify_isolation(snapshot_with(one, other, clash))

    examples = [c for c in verdict.counterexamples if c.rule is Rule.INDEX0_CONFLICT]
    assert {c.a.guid for c in examples} == {guid("gpu0001"), VF_ACME}  # type: ignore[union-attr]
    assert all("0x0103, 0x0105" in c.message and c.segment == 0x0103 for c in examples)


def test_additional_partitions_count_against_the_port_budget_virtual_guids_do_not():
    # acme's ports hold 0x0101, storage's 0x0100 and 0x7fff: three keys; two more make five.
    extras = [
        additional(0x0103 + i, member("gpu0001"), Member(VF_ACME, True), label=f"l{i}")
        for i in range(2)
    ]
    assert verify_isolation(snapshot_with(*extras, pkeys_per_port=5)).holds

    verdict = verify_isolation(snapshot_with(*extras, pkeys_per_port=4))

    assert rules_of(verdict) == {Rule.PKEY_BUDGET}
    assert [c.a.guid for c in verdict.counterexamples] == [guid("gpu0001")]  # type: ignore[union-attr]
    assert "needs 5 P_Keys" in verdict.counterexamples[0].message


def test_the_own_key_stays_the_default_partition_whatever_the_order():
    extra = additional(0x0103, member("gpu0001"))
    base = snapshot_with()
    snapshot = replace(base, partitions=(extra, *base.partitions))

    assert VerifyIndex(snapshot).own_key[ACME] == 0x0101


def test_unobserved_memberships_list_every_virtual_guid_membership():
    data = additional(0x0104, member("gpu0001"), Member(VF_ACME, True))
    scratch = additional(0x0103, Member(VF_ACME, False), label="scratch")
    theirs = Partition(0x0105, GLOBEX, (Member(VF_GLOBEX, True),), label="x")

    found = unobserved_memberships(snapshot_with(data, scratch, theirs))

    assert found == (
        UnobservedMembership(VF_ACME, 0x0103, "part_acme_scratch", "acme", False),
        UnobservedMembership(VF_ACME, 0x0104, "part_acme_data", "acme", True),
        UnobservedMembership(VF_GLOBEX, 0x0105, "part_globex_x", "globex", True),
    )
    assert unobserved_memberships(two_tenant_snapshot()) == ()
