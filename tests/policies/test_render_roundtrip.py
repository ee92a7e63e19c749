"""Property: what render_partitions_conf() writes, OpenSM's grammar reads back unchanged."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.findings import Severity
from policies.infiniband.model import IbSettings, IbSnapshot, Member, Partition, QosClass
from policies.infiniband.parse_partitions import memberships, parse_partitions_conf
from policies.infiniband.render import render_partitions_conf
from policies.model import Owner, OwnerKind

QOS_CLASSES = (
    QosClass("gold", ib_sl=1, ib_rate=16, ib_mtu=5, vlarb_weight=64),
    QosClass("silver", ib_sl=2, ib_rate=7, ib_mtu=4, vlarb_weight=32),
    QosClass("bronze", ib_sl=3, ib_rate=3, ib_mtu=4, vlarb_weight=8),
)
# A class name the snapshot does not define: the renderer then writes no QoS flags.
QOS_NAMES = st.sampled_from([None, "gold", "silver", "bronze", "unknown"])
SLUGS = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)
OWNERS = st.builds(Owner, st.sampled_from([OwnerKind.TENANT, OwnerKind.SERVICE]), SLUGS)
GUIDS = st.integers(min_value=1, max_value=2**64 - 1)
MEMBERS = st.dictionaries(GUIDS, st.booleans(), max_size=8).map(
    lambda guids: tuple(Member(guid, full) for guid, full in guids.items())
)


@st.composite
def snapshots(draw: st.DrawFn) -> IbSnapshot:
    owners = draw(st.lists(OWNERS, min_size=1, max_size=5, unique=True))
    count = draw(st.integers(min_value=len(owners), max_value=3 * len(owners)))
    keys = draw(
        st.lists(
            st.integers(min_value=0x0001, max_value=0x7FFE),
            min_size=count,
            max_size=count,
            unique=True,
        )
    )
    partitions = tuple(
        Partition(key, owners[index % len(owners)], draw(MEMBERS), draw(QOS_NAMES))
        for index, key in enumerate(keys)
    )
    return IbSnapshot(
        fabric=IbSettings(name=draw(SLUGS)), partitions=partitions, qos_classes=QOS_CLASSES
    )


@st.composite
def flagged_snapshots(draw: st.DrawFn) -> IbSnapshot:
    """Snapshots whose partitions carry labels, ``ipoib`` or not and ``indx0`` or not."""
    snapshot = draw(snapshots())
    flagged = tuple(
        replace(
            p,
            owner=Owner.tenant(p.owner.name),
            label=draw(st.none() | SLUGS),
            ipoib=draw(st.booleans()),
            index0=draw(st.booleans()),
        )
        for p in snapshot.partitions
    )
    return replace(snapshot, partitions=flagged)


def expected_memberships(snapshot: IbSnapshot) -> dict[int, dict[int, str]]:
    return {
        partition.pkey: {m.guid: "full" if m.full else "limited" for m in partition.members}
        for partition in snapshot.partitions
        if partition.members
    }


@settings(max_examples=200, deadline=None)
@given(snapshots())
def test_rendered_partitions_parse_back_to_the_snapshot(snapshot):
    parsed = parse_partitions_conf(render_partitions_conf(snapshot))

    assert [f for f in parsed.findings if f.severity is Severity.CRITICAL] == []
    assert memberships(parsed) == expected_memberships(snapshot)


@settings(max_examples=100, deadline=None)
@given(snapshots())
def test_rendered_qos_flags_parse_back(snapshot):
    parsed = parse_partitions_conf(render_partitions_conf(snapshot))
    classes = {cls.name: cls for cls in QOS_CLASSES}

    by_key = {p.pkey: p for p in parsed.partitions}
    for partition in snapshot.partitions:
        if not partition.members:
            assert partition.pkey not in by_key
            continue
        rendered = by_key[partition.pkey]
        cls = classes.get(partition.qos_class or "")
        assert rendered.ipoib
        assert (rendered.sl, rendered.rate, rendered.mtu) == (
            (cls.ib_sl, cls.ib_rate, cls.ib_mtu) if cls else (None, None, None)
        )


@settings(max_examples=100, deadline=None)
@given(flagged_snapshots())
def test_rendered_names_and_partition_flags_parse_back(snapshot):
    parsed = parse_partitions_conf(render_partitions_conf(snapshot))

    assert [f for f in parsed.findings if f.severity is Severity.CRITICAL] == []
    assert memberships(parsed) == expected_memberships(snapshot)
    by_key = {p.pkey: p for p in parsed.partitions}
    for partition in snapshot.partitions:
        if partition.members:
            rendered = by_key[partition.pkey]
            assert (rendered.name, rendered.ipoib, rendered.index0) == (
                partition.name,
                partition.ipoib,
                partition.index0,
            )
