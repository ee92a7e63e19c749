"""The v2 digest with additional partitions and virtual GUIDs: explicit, in their owner's group."""

from __future__ import annotations

import json
from dataclasses import replace

from policies.infiniband.digest import ib_groups
from policies.infiniband.model import IbSnapshot, Member, Partition, VirtualGuid
from policies.model import Owner
from tests.policies.snapshots import guid, member, two_tenant_snapshot

ACME = Owner.tenant("acme")
VF = 0x0A00000000000001


def with_additional(snapshot: IbSnapshot | None = None, **changes: object) -> IbSnapshot:
    base = snapshot or two_tenant_snapshot()
    extra = Partition(0x0103, ACME, (member("gpu0001"), Member(VF, False)), "gold", label="data")
    extra = replace(extra, **changes)  # type: ignore[arg-type]
    partitions = tuple(sorted((*base.partitions, extra), key=lambda p: p.pkey))
    return replace(base, partitions=partitions, virtual_guids=(VirtualGuid(VF, "acme"),))


def group(snapshot: IbSnapshot, key: str) -> dict[str, object]:
    return dict(json.loads(ib_groups(snapshot)[key]))


def test_a_snapshot_without_them_has_no_new_entries():
    groups = ib_groups(two_tenant_snapshot())

    for body in groups.values():
        assert not {"partitions", "virtual_guids"} & set(json.loads(body))


def test_an_additional_partition_is_an_entry_of_its_owner_and_no_deviation():
    acme = group(with_additional(), "owner:tenant:acme")

    assert acme["partitions"] == [
        ["data", 0x0103, "gold", True, False, [[guid("gpu0001"), True], [VF, False]]]
    ]
    assert acme["virtual_guids"] == [VF]
    assert "deviations" not in acme
    assert acme["keys"] == [[0x0101, "gold"]]  # the default partition only


def test_changing_an_additional_partition_changes_its_owners_group_only():
    before = with_additional()
    for after in (
        with_additional(ipoib=False),
        with_additional(index0=True),
        with_additional(members=(member("gpu0001"),)),
        with_additional(label="other"),
    ):
        changed = {k for k, body in ib_groups(after).items() if ib_groups(before).get(k) != body}
        assert changed == {"owner:tenant:acme"}


def test_the_fabric_setting_is_in_the_fabric_group_only_when_true():
    snapshot = two_tenant_snapshot()
    enabled = replace(snapshot, fabric=replace(snapshot.fabric, virtual_guids=True))

    assert "virtual_guids" not in group(snapshot, "fabric")
    assert group(enabled, "fabric")["virtual_guids"] is True
    assert enabled.digest != snapshot.digest


def test_scoped_groups_equal_the_whole_snapshots_for_those_owners():
    whole = with_additional()
    acme_nodes = {n.name for n in whole.nodes if ACME in n.owners}
    part = replace(
        whole,
        nodes=tuple(n for n in whole.nodes if n.name in acme_nodes),
        ports=tuple(p for p in whole.ports if p.node in acme_nodes),
        partitions=tuple(p for p in whole.partitions if p.owner == ACME),
        grants=tuple(g for g in whole.grants if g.tenant == "acme"),
    )

    scoped = ib_groups(part, owners=[ACME], nodes=acme_nodes)

    assert scoped == ib_groups(whole, owners=[ACME], nodes=acme_nodes)
    assert set(scoped) == {"owner:tenant:acme", *(f"node:{n}" for n in acme_nodes)}
