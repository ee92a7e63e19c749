"""The v2 snapshot digest (issue 12, item 0): a multiset hash a change updates in place."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from policies.digest import digest_of_hashes, hashes_of
from policies.digest.lthash import MultisetHash, element_hash
from policies.infiniband.digest import ib_digest, ib_groups
from policies.infiniband.model import Member, Partition
from policies.model import Owner
from tests.policies.snapshots import member, two_tenant_snapshot, with_partitions

elements = st.lists(st.binary(min_size=1, max_size=16), min_size=1, max_size=12)


@given(first=elements, second=elements)
def test_adding_then_removing_elements_leaves_the_hash_of_what_remains(first, second):
    grown = MultisetHash()
    for element in first + second:
        grown.add(element_hash(element))
    for element in reversed(second):
        grown.remove(element_hash(element))
    alone = MultisetHash()
    for element in reversed(first):
        alone.add(element_hash(element))

    assert grown.state() == alone.state() and grown.digest() == alone.digest()


def test_a_stored_state_resumes_where_it_stopped():
    total = MultisetHash()
    total.add(element_hash(b"a"))
    resumed = MultisetHash(total.state())
    resumed.add(element_hash(b"b"))
    total.add(element_hash(b"b"))

    assert resumed.digest() == total.digest()


def test_the_digest_is_the_multiset_hash_of_the_groups():
    snapshot = two_tenant_snapshot()

    assert ib_digest(snapshot) == digest_of_hashes(hashes_of(ib_groups(snapshot)).values())
    assert snapshot.digest == ib_digest(snapshot) and snapshot.digest.startswith("v2:")


def test_replacing_one_owners_group_gives_the_changed_snapshots_digest():
    before, after = two_tenant_snapshot(), two_tenant_snapshot(grants=())
    acme = Owner.tenant("acme")
    total = MultisetHash()
    for element in hashes_of(ib_groups(before)).values():
        total.add(element)
    old, new = (
        hashes_of(ib_groups(before, owners=[acme])),
        hashes_of(ib_groups(after, owners=[acme])),
    )
    for key in old.keys() | new.keys():
        if key in old:
            total.remove(old[key])
        if key in new:
            total.add(new[key])

    assert "v2:" + total.digest() == after.digest != before.digest


def test_a_grant_changes_only_the_tenants_group_not_the_services():
    before, after = two_tenant_snapshot(), two_tenant_snapshot(grants=())
    changed = {key for key, body in ib_groups(after).items() if ib_groups(before).get(key) != body}

    assert changed == {"owner:tenant:acme"}


def test_memberships_that_deviate_from_the_plan_change_the_digest():
    snapshot = two_tenant_snapshot()
    stray = with_partitions(snapshot, Partition(0x0103, Owner.tenant("acme"), (member("gpu0004"),)))
    limited = replace(
        snapshot,
        partitions=tuple(
            replace(p, members=tuple(Member(m.guid, False) for m in p.members))
            if p.owner == Owner.tenant("acme")
            else p
            for p in snapshot.partitions
        ),
    )

    assert len({snapshot.digest, stray.digest, limited.digest}) == 3
