"""Config audits and observed-state drift, pure: literal files and tables against snapshots."""

from __future__ import annotations

import json

from policies.config_audit import audit_config_db, audit_frr, audit_partitions
from policies.infiniband.model import DEFAULT_PKEY, IbSnapshot, format_guid
from policies.infiniband.observations import compare_observation, intended_tables, observed_snapshot
from policies.roce.render_frr import render_frr_conf
from policies.roce.render_sonic import render_config_db_json
from policies.verdict import Rule

from .roce_snapshots import roce_snapshot
from .snapshots import guid, two_tenant_snapshot

ACME = (guid("gpu0001"), guid("gpu0001", 1), guid("gpu0002"), guid("gpu0002", 1))
GLOBEX = (guid("gpu0003"), guid("gpu0003", 1))
STORAGE = (guid("stor01"), guid("stor01", 1))
DEFAULT = "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;"


def statement(name: str, key: int, members: dict[int, str]) -> str:
    lines = [f"    {format_guid(g)}={how}" for g, how in members.items()]
    return f"{name}=0x{key:04x}, ipoib :\n" + ",\n".join(lines) + " ;"


def intended_file(
    *, acme_extra: dict[int, str] | None = None, globex_extra: dict[int, str] | None = None
) -> str:
    """The literal partitions.conf of `two_tenant_snapshot`, optionally edited."""
    storage = dict.fromkeys(ACME, "limited") | dict.fromkeys(STORAGE, "full")
    acme = dict.fromkeys(ACME, "full") | (acme_extra or {})
    globex = dict.fromkeys(GLOBEX, "full") | (globex_extra or {})
    return "\n".join(
        [
            DEFAULT,
            statement("service_storage", 0x0100, storage),
            statement("tenant_acme", 0x0101, acme),
            statement("tenant_globex", 0x0102, globex),
            "",
        ]
    )


def test_the_intended_file_audits_clean() -> None:
    report = audit_partitions(two_tenant_snapshot(), intended_file())

    assert report.findings == ()
    assert report.drift == ()
    assert report.counterexamples == ()
    assert report.holds and not report.critical


def test_an_acme_port_in_globex_partition_is_drift_and_a_cross_tenant_counterexample() -> None:
    report = audit_partitions(two_tenant_snapshot(), intended_file(globex_extra={ACME[0]: "full"}))

    [drift] = report.drift
    assert (drift.owner, drift.segment) == ("tenant:globex", "0x0102")
    assert drift.added == (format_guid(ACME[0]),) and drift.missing == ()
    [example] = report.counterexamples
    assert example.rule is Rule.CROSS_TENANT and example.segment == 0x0102
    assert example.a is not None and example.b is not None
    assert {str(example.a.owner), str(example.b.owner)} == {"tenant:acme", "tenant:globex"}
    assert ACME[0] in (example.a.guid, example.b.guid)
    assert not report.holds


def test_a_limited_member_of_another_tenant_still_reaches_its_full_members() -> None:
    report = audit_partitions(
        two_tenant_snapshot(), intended_file(acme_extra={GLOBEX[1]: "limited"})
    )

    assert report.drift[0].added == (format_guid(GLOBEX[1]),)
    assert [c.rule for c in report.counterexamples] == [Rule.CROSS_TENANT]


def test_a_changed_membership_is_drift_but_may_still_be_isolated() -> None:
    text = intended_file().replace(
        f"{format_guid(ACME[0])}=limited", f"{format_guid(ACME[0])}=full"
    )

    report = audit_partitions(two_tenant_snapshot(), text)

    [drift] = report.drift
    assert (drift.owner, drift.segment) == ("service:storage", "0x0100")
    assert drift.changed == (format_guid(ACME[0]),) and drift.added == drift.missing == ()
    assert report.holds  # a granted tenant as full member of the service's key is still allowed


def test_a_guid_without_0x_fails_open_every_port_full_in_the_default_partition() -> None:
    text = intended_file().replace(format_guid(GLOBEX[0]), format_guid(GLOBEX[0])[2:])

    report = audit_partitions(two_tenant_snapshot(), text)

    codes = {(f.code, f.severity) for f in report.findings}
    assert ("guid-without-0x", "critical") in codes and report.critical
    rules = {c.rule for c in report.counterexamples}
    assert {Rule.DEFAULT_PARTITION_FULL, Rule.CROSS_TENANT} <= rules
    missing = {d.segment for d in report.drift if d.missing}
    assert missing == {"0x0100", "0x0101", "0x0102"}  # OpenSM discards every tenant partition
    assert any(d.segment == "0x7fff" and format_guid(ACME[0]) in d.added for d in report.drift)


def test_a_default_statement_with_all_full_lets_every_tenant_reach_every_other() -> None:
    text = intended_file().replace("ALL=limited", "ALL=full")

    report = audit_partitions(two_tenant_snapshot(), text)

    assert ("default-all-full", "critical") in {(f.code, f.severity) for f in report.findings}
    cross = [c for c in report.counterexamples if c.rule is Rule.CROSS_TENANT]
    assert cross and all(c.segment == DEFAULT_PKEY for c in cross)


# --- observed tables --------------------------------------------------------------------------


def live_tables(snapshot: IbSnapshot) -> dict[int, list[int]]:
    tables = {g: sorted(keys) for g, keys in intended_tables(snapshot).items()}
    sm = guid("sm01")
    tables[sm] = [0xFFFF]  # SELF=full
    return tables


def test_tables_as_intended_hold_without_drift() -> None:
    snapshot = two_tenant_snapshot()

    report = compare_observation(snapshot, live_tables(snapshot))

    assert report.ports == () and report.holds
    assert observed_snapshot(snapshot, live_tables(snapshot)).partitions == snapshot.partitions


def test_a_live_globex_key_on_an_acme_port_is_drift_and_reachability() -> None:
    snapshot = two_tenant_snapshot()
    tables = live_tables(snapshot)
    tables[ACME[1]].append(0x8102)

    report = compare_observation(snapshot, tables)

    [port] = report.ports
    assert (port.guid, port.node, str(port.owner)) == (ACME[1], "gpu0001", "tenant:acme")
    assert port.unexpected == (0x8102,) and port.missing == ()
    [example] = report.verdict.counterexamples
    assert example.rule is Rule.CROSS_TENANT and example.segment == 0x0102
    assert not report.holds


def test_the_fallback_table_is_full_default_membership_everywhere() -> None:
    snapshot = two_tenant_snapshot()
    tables = {p.guid: [0xFFFF] for p in snapshot.ports}

    report = compare_observation(snapshot, tables)

    acme = next(p for p in report.ports if p.guid == ACME[0])
    assert 0x8101 in acme.missing and acme.unexpected == (0xFFFF,)
    rules = {c.rule for c in report.verdict.counterexamples}
    assert {Rule.DEFAULT_PARTITION_FULL, Rule.CROSS_TENANT} <= rules


def test_an_unobserved_port_is_not_drift_though_an_empty_table_is() -> None:
    snapshot = two_tenant_snapshot()
    tables = live_tables(snapshot)
    del tables[ACME[0]]  # the collector could not read it

    unread = compare_observation(snapshot, tables, unobserved={ACME[0]})
    empty = compare_observation(snapshot, {**tables, ACME[0]: []})

    assert unread.ports == () and unread.holds
    [drift] = empty.ports
    assert drift.guid == ACME[0] and 0x8101 in drift.missing


def test_an_unobserved_port_adds_no_reachability_and_a_read_listing_wins() -> None:
    snapshot = two_tenant_snapshot()
    tables = live_tables(snapshot)
    tables[ACME[1]].append(0x8102)  # an intruder, read

    report = compare_observation(snapshot, tables, unobserved={ACME[0], ACME[1]})

    [port] = report.ports
    assert port.guid == ACME[1] and port.unexpected == (0x8102,)
    assert [c.rule for c in report.verdict.counterexamples] == [Rule.CROSS_TENANT]


# --- RoCE ---------------------------------------------------------------------------------------


def test_rendered_config_db_and_frr_audit_clean() -> None:
    snapshot = roce_snapshot()
    for leaf in ("leaf01", "leaf02"):
        db = audit_config_db(snapshot, leaf, render_config_db_json(snapshot, leaf))
        frr = audit_frr(snapshot, leaf, render_frr_conf(snapshot, leaf))
        assert (db.drift, db.counterexamples) == ((), ()), leaf
        assert (frr.drift, frr.counterexamples) == ((), ()), leaf


def test_a_globex_port_in_acme_vlan_is_drift_and_a_counterexample() -> None:
    snapshot = roce_snapshot()
    document = json.loads(render_config_db_json(snapshot, "leaf01"))
    # roce_snapshots: gpu0003 (globex) is cabled to leaf01:Ethernet16; acme's VLAN is 100.
    del document["VLAN_MEMBER"]["Vlan101|Ethernet16"]
    document["VLAN_MEMBER"]["Vlan100|Ethernet16"] = {"tagging_mode": "untagged"}

    report = audit_config_db(snapshot, "leaf01", json.dumps(document))

    drift = {(d.owner, d.segment): d for d in report.drift}
    assert drift[("tenant:acme", "Vlan100")].added == ("Ethernet16",)
    assert drift[("tenant:globex", "Vlan101")].missing == ("Ethernet16",)
    [example] = report.counterexamples
    assert example.rule is Rule.CROSS_TENANT
    assert example.b is not None and example.b.port == "leaf01:Ethernet16"
    assert str(example.b.owner) == "tenant:globex"


def test_an_extra_rt_import_is_drift_and_a_counterexample() -> None:
    snapshot = roce_snapshot()
    text = render_frr_conf(snapshot, "leaf01").replace(
        "  route-target import 65000:50002\n",
        "  route-target import 65000:50002\n  route-target import 65000:50001\n",
        1,
    )

    report = audit_frr(snapshot, "leaf01", text)

    [drift] = report.drift
    assert (drift.owner, drift.segment, drift.added) == (
        "tenant:globex",
        "Vrf50002",
        ("65000:50001",),
    )
    [example] = report.counterexamples
    assert example.rule is Rule.CROSS_TENANT and example.segment == 50002


def test_an_rt_no_segment_exports_is_a_route_leak() -> None:
    snapshot = roce_snapshot()
    text = render_frr_conf(snapshot, "leaf01").replace(
        "  route-target import 65000:50002\n",
        "  route-target import 65000:50002\n  route-target import 65000:59999\n",
        1,
    )

    report = audit_frr(snapshot, "leaf01", text)

    assert [c.rule for c in report.counterexamples] == [Rule.ROUTE_LEAK]
