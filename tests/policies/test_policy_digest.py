"""The policy in the v2 digest (issue 13): invisible under the default, part of it otherwise.

Existing data hashes under the default policy (version 0) without peerings, so its digests must
not move; tests/policies/test_digest_v2.py and the golden digests elsewhere pin them too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from policies.digest import FABRIC_GROUP, owner_key
from policies.infiniband.digest import ib_groups
from policies.model import Owner
from policies.policy import DEFAULT_POLICY, Isolation, Policy, TenantKind, TenantKindPolicy
from policies.roce.digest import roce_groups
from tests.policies import policy_fabrics as fab
from tests.policies.roce_snapshots import roce_snapshot as two_tenant_roce
from tests.policies.snapshots import two_tenant_snapshot

# What the reference snapshots hashed to before policies existed (computed at commit 9ff304e);
# RoCE's since issue 16, whose fabric group holds every defined class instead of the unused
# ones (migration 0020 drops the stored RoCE digest state).
IB_BEFORE = "v2:f4c8bed8502751ea3d6535371b2809df25ef834a09b9404ee15fade16d09a524"
ROCE_BEFORE = "v2:68909fea83ccf2c41519c6bf04de59f34d57afeb40f0d54e5c8231c45c10b1d2"

TECHS = {"infiniband": (fab.ib_snapshot, ib_groups), "roce": (fab.roce_snapshot, roce_groups)}


@pytest.fixture(params=sorted(TECHS))
def tech(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    return TECHS[request.param]


def test_facts_under_the_default_policy_without_peerings_leave_every_group_as_it_was(tech):
    build, groups = tech
    with_facts = build(policy=DEFAULT_POLICY)

    bare = replace(with_facts, tenants=())

    assert groups(with_facts) == groups(bare)
    assert with_facts.digest == bare.digest


def test_the_reference_snapshots_keep_their_digests():
    ib, roce = two_tenant_snapshot(), two_tenant_roce()

    assert (ib.digest, roce.digest) == (IB_BEFORE, ROCE_BEFORE)
    assert replace(ib, tenants=fab.TENANTS).digest == IB_BEFORE
    assert replace(roce, tenants=fab.TENANTS).digest == ROCE_BEFORE
    assert b"policy" not in ib_groups(ib)[FABRIC_GROUP]


def test_a_policy_version_moves_the_fabric_group_and_the_digest(tech):
    build, groups = tech
    one, two = (
        build(policy=replace(fab.POLICY, version=1)),
        build(policy=replace(fab.POLICY, version=2)),
    )

    fabric_one, fabric_two = groups(one)[FABRIC_GROUP], groups(two)[FABRIC_GROUP]

    assert fabric_one != fabric_two and b'"policy":[1,"sha256:' in fabric_one
    assert one.digest != two.digest


def test_other_rules_under_the_same_version_move_the_digest_through_the_fingerprint(tech):
    build, _ = tech
    stricter = replace(fab.POLICY, internal=replace(fab.POLICY.internal, max_nodes=1))

    assert build(policy=stricter).digest != build().digest


def test_a_tenants_kind_under_a_non_default_policy_moves_only_its_own_group(tech):
    build, groups = tech
    before = build()
    kinds = tuple(
        replace(t, kind=TenantKind.EXTERNAL) if t.name == "int-b" else t for t in fab.TENANTS
    )
    after = build(tenants=kinds)

    changed = {key for key, body in groups(after).items() if groups(before).get(key) != body}

    assert changed == {owner_key(Owner.tenant("int-b"))}
    assert after.digest != before.digest


def test_a_tenants_class_and_quota_under_a_non_default_policy_move_the_digest(tech):
    build, _ = tech
    before = build()

    assert build(tenants=fab.facts(**{"ext-b": "gold"})).digest != before.digest
    own_quota = tuple(replace(t, max_nodes=3) if t.name == "ext-b" else t for t in fab.TENANTS)
    assert build(tenants=own_quota).digest != before.digest


def test_a_peering_moves_both_peers_groups_and_no_other(tech):
    build, groups = tech
    before, after = (
        build(policy=DEFAULT_POLICY),
        build(policy=DEFAULT_POLICY, peerings=(fab.INT_PEERING,)),
    )

    changed = {key for key, body in groups(after).items() if groups(before).get(key) != body}

    assert changed == {owner_key(Owner.tenant("int-a")), owner_key(Owner.tenant("int-b"))}
    assert after.digest != before.digest


def test_a_scoped_call_gives_the_same_groups_as_the_whole_snapshot(tech):
    build, groups = tech
    snapshot = build(peerings=(fab.INT_PEERING,))
    wanted = [Owner.tenant("int-a"), Owner.service("storage")]

    scoped = groups(snapshot, owners=wanted)

    whole = groups(snapshot)
    assert scoped == {key: whole[key] for key in scoped}
    assert set(scoped) == {owner_key(owner) for owner in wanted}


def test_a_peered_tenants_facts_count_even_under_the_default_policy(tech):
    # Whether a peering is allowed depends on the kinds, so the kinds are part of the digest.
    build, _ = tech
    peered = build(policy=DEFAULT_POLICY, peerings=(fab.INT_PEERING,))
    kinds = tuple(
        replace(t, kind=TenantKind.EXTERNAL) if t.name == "int-b" else t for t in fab.TENANTS
    )

    assert build(policy=DEFAULT_POLICY, peerings=(fab.INT_PEERING,), tenants=kinds).digest != (
        peered.digest
    )


# What the fingerprints were before the pool share existed (computed at commit 1ee00ff).
DEFAULT_FINGERPRINT = "sha256:8828f071b2409a1b2eec8188e6f6a30532b35a77f7479ed2c42e8e01d065230d"
DEDICATED_FINGERPRINT = "sha256:4f546801932744ac9922facb83a7046b35ae75c1d01570a25caf065f257288ab"


def test_a_default_pool_share_leaves_the_fingerprints_of_earlier_policies_as_they_were():
    dedicated = TenantKindPolicy(isolation=Isolation.DEDICATED_LEAF, max_nodes=4)

    assert DEFAULT_POLICY.fingerprint == DEFAULT_FINGERPRINT
    assert Policy(version=3, external=dedicated).fingerprint == DEDICATED_FINGERPRINT
    assert DEFAULT_POLICY.document()["kinds"]["external"]["max_pool_share_percent"] == 25


def test_another_pool_share_is_another_rule_and_moves_the_digest(tech):
    build, _ = tech
    wider = replace(fab.POLICY, internal=replace(fab.POLICY.internal, max_pool_share_percent=50))

    assert wider.fingerprint != fab.POLICY.fingerprint
    assert build(policy=wider).digest != build().digest


def test_a_pool_share_is_a_percentage_rounded_down_but_never_below_one_value():
    rules = TenantKindPolicy(max_pool_share_percent=25)

    assert [rules.pool_share(size) for size in (1, 3, 4, 8, 32511)] == [1, 1, 1, 2, 8127]
    assert TenantKindPolicy(max_pool_share_percent=100).pool_share(8) == 8
