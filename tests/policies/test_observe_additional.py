"""Observations and config audits of additional partitions and virtual GUIDs."""

from __future__ import annotations

from dataclasses import replace

from policies.config_audit import audit_partitions
from policies.config_audit.partitions import deployed_snapshot
from policies.infiniband.model import IbSnapshot, Member, Partition, VirtualGuid
from policies.infiniband.observations import compare_observation, intended_tables, observed_snapshot
from policies.infiniband.parse_partitions import parse_partitions_conf
from policies.infiniband.render import render_partitions_conf
from policies.model import Owner
from tests.policies.snapshots import guid, member, two_tenant_snapshot

VF = 0x0A00000000000001
DATA = Partition(
    0x0103,
    Owner.tenant("acme"),
    (member("gpu0001"), Member(VF, True)),
    "gold",
    label="data",
    ipoib=False,
    index0=True,
)


def intended() -> IbSnapshot:
    base = two_tenant_snapshot()
    return replace(
        base,
        partitions=(*base.partitions, DATA),
        virtual_guids=(VirtualGuid(VF, "acme"),),
    )


def test_virtual_guids_get_no_table_and_no_drift():
    snapshot = intended()
    tables = intended_tables(snapshot)

    assert VF not in tables
    assert 0x8103 in tables[guid("gpu0001")]
    report = compare_observation(snapshot, {g: sorted(k) for g, k in tables.items()})
    assert report.ports == () and report.holds


def test_the_observed_snapshot_keeps_the_label_and_flags_and_no_virtual_guid():
    snapshot = intended()
    tables = {g: sorted(k) for g, k in intended_tables(snapshot).items()}
    tables[VF] = [0x8103]  # even if a reader listed it, it cannot be observed

    observed = observed_snapshot(snapshot, tables)

    [data] = [p for p in observed.partitions if p.pkey == 0x0103]
    assert data == replace(DATA, members=(member("gpu0001"),))
    assert data.name == "part_acme_data"


def test_a_deployed_file_keeps_the_label_and_flags_and_audits_clean():
    snapshot = intended()
    text = render_partitions_conf(snapshot)

    deployed = deployed_snapshot(snapshot, parse_partitions_conf(text))

    assert [p for p in deployed.partitions if p.pkey == 0x0103] == [DATA]
    report = audit_partitions(snapshot, text)
    assert report.drift == () and report.counterexamples == ()
