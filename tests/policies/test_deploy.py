"""The deploy agent's pure decisions: P_Key model, read-back comparison, diffs, opensm.conf."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from policies.infiniband.deploy import (
    Mismatch,
    changed_ports,
    compare_tables,
    expected_tables,
    reachability_changes,
)
from policies.infiniband.observations import intended_tables
from policies.infiniband.opensm_conf import (
    HUP_RELOADABLE_OPTIONS,
    configuration_errors,
    management_keys,
    opensm_file_paths,
    opensm_options,
    restart_only_options,
    restart_option_changes,
)
from policies.infiniband.parse_partitions import parse_partitions_conf
from policies.infiniband.render import DEFAULT_STATEMENT, render_partitions_conf
from policies.model import Owner

from .snapshots import guid, two_tenant_snapshot

A1, A2, B1, S1, SM = 0xA1, 0xA2, 0xB1, 0x51, 0x99


def conf(*statements: str, default: str = DEFAULT_STATEMENT) -> str:
    return "\n".join([default, *statements]) + "\n"


def parsed(*statements: str, default: str = DEFAULT_STATEMENT):
    return parse_partitions_conf(conf(*statements, default=default))


BASE = (
    "tenant_acme=0x0101, ipoib : 0xa1=full, 0xa2=full ;",
    "tenant_globex=0x0102, ipoib : 0xb1=full ;",
    "service_storage=0x0100, ipoib : 0xa1=limited, 0xa2=limited, 0x51=full ;",
)


# --------------------------------------------------------------------------- the P_Key model


def test_every_ca_port_is_a_limited_default_member_and_the_sm_port_a_full_one():
    tables = expected_tables(parsed(*BASE), [A1, B1, S1, SM], SM)

    assert tables[A1] == {0x7FFF, 0x8101, 0x0100}
    assert tables[B1] == {0x7FFF, 0x8102}
    assert tables[S1] == {0x7FFF, 0x8100}
    assert tables[SM] == {0xFFFF}


def test_the_model_of_a_rendered_file_is_the_snapshots_intended_tables():
    snapshot = two_tenant_snapshot()
    intended = intended_tables(snapshot)
    model = expected_tables(
        parse_partitions_conf(render_partitions_conf(snapshot)), intended, self_guid=None
    )

    assert {g: set(keys) for g, keys in model.items()} == intended


def test_without_a_default_statement_opensm_uses_all_limited_self_full():
    tables = expected_tables(parsed(BASE[0], default=""), [A1, SM], SM)

    assert tables == {A1: {0x7FFF, 0x8101}, SM: {0xFFFF}}


def test_all_cas_members_add_the_key_to_every_ca_port():
    tables = expected_tables(parsed("shared=0x0200 : ALL_CAS=limited ;"), [A1, B1], None)

    assert tables[A1] == tables[B1] == {0x7FFF, 0x0200}


def test_a_file_that_fails_open_is_modelled_as_every_port_full_in_the_default_partition():
    tables = expected_tables(parse_partitions_conf("# nothing\n"), [A1, B1], SM)

    assert tables == {A1: {0xFFFF}, B1: {0xFFFF}}


def test_a_port_listed_limited_and_full_in_one_partition_holds_the_full_key_only():
    tables = expected_tables(
        parsed("p=0x0300 : 0xa1=limited ;", "q=0x0300 : 0xa1=full ;"), [A1], None
    )

    assert tables[A1] == {0x7FFF, 0x8300}


def test_read_back_tables_equal_to_the_model_have_no_mismatch():
    expected = expected_tables(parsed(*BASE), [A1, B1], SM)

    assert (
        compare_tables(expected, {A1: [0x7FFF, 0x8101, 0x0100, 0x0000], B1: [0x8102, 0x7FFF]}) == ()
    )


def test_a_missing_and_an_unexpected_key_are_named_per_port():
    expected = expected_tables(parsed(*BASE), [A1, B1], SM)

    found = compare_tables(expected, {A1: [0x7FFF, 0x8101], B1: [0x7FFF, 0x8102, 0x8101]})

    assert found == (Mismatch(A1, (0x0100,), ()), Mismatch(B1, (), (0x8101,)))
    assert found[0].as_report() == {
        "guid": "0x00000000000000a1",
        "missing": ["0x0100"],
        "unexpected": [],
    }


def test_only_the_ports_read_are_compared():
    expected = expected_tables(parsed(*BASE), [A1, B1], SM)

    assert compare_tables(expected, {B1: [0x7FFF, 0x8102]}) == ()


@given(st.sets(st.integers(min_value=1, max_value=0x7FFE), max_size=6))
def test_a_table_holding_exactly_the_model_never_mismatches(keys):
    members = ", ".join(f"0x{0x1000 + i:x}=full" for i in range(2))
    statements = [f"t{key}=0x{key:04x} : {members} ;" for key in sorted(keys)]
    model = expected_tables(parsed(*statements), [0x1000, 0x1001], None)

    assert compare_tables(model, {g: sorted(k) for g, k in model.items()}) == ()


# ----------------------------------------------------------------------- changes between files


def test_an_allocation_changes_the_ports_it_adds_and_the_tenants_reachability():
    before = parsed(*BASE)
    after = parsed(*BASE, "tenant_initech=0x0103, ipoib : 0xc1=full, 0xc2=full ;")

    assert changed_ports(before, after) == {0xC1, 0xC2}
    assert reachability_changes(before, after) == (Owner.tenant("initech"),)


def test_a_grant_changes_the_tenant_and_the_service():
    before = parsed(BASE[0], BASE[1], "service_storage=0x0100 : 0x51=full ;")
    after = parsed(*BASE)

    assert changed_ports(before, after) == {A1, A2}
    assert reachability_changes(before, after) == (Owner.tenant("acme"), Owner.service("storage"))


def test_offboarding_changes_the_tenant_that_left():
    before = parsed(*BASE)
    after = parsed(BASE[0], BASE[2])

    assert reachability_changes(before, after) == (Owner.tenant("globex"),)


def test_identical_files_change_nothing():
    assert changed_ports(parsed(*BASE), parsed(*BASE)) == frozenset()
    assert reachability_changes(parsed(*BASE), parsed(*BASE)) == ()


def test_the_rendered_snapshot_and_an_empty_file_differ_on_every_member():
    snapshot = two_tenant_snapshot()
    after = parse_partitions_conf(render_partitions_conf(snapshot))

    assert guid("gpu0001") in changed_ports(parsed(), after)


# ------------------------------------------------------------------------------ opensm.conf


def test_options_are_read_as_opensm_reads_them():
    text = 'a 1\n# comment\n  b\t"two words"  # trailing\nc\nd 5\nd 6\n'

    assert opensm_options(text) == {"a": "1", "b": "two words", "c": "", "d": "6"}


def test_hup_reloadable_options_follow_the_can_update_column():
    assert {"part_enforce", "qos_max_vls", "qos_sl2vl", "m_key", "force_log_flush"} <= (
        HUP_RELOADABLE_OPTIONS
    )
    assert not {"allow_both_pkeys", "partition_config_file", "routing_engine"} & (
        HUP_RELOADABLE_OPTIONS
    )


def test_restart_only_booleans_compare_as_opensm_parses_them():
    assert restart_only_options("")["allow_both_pkeys"] == "FALSE"
    assert restart_only_options("allow_both_pkeys false\n")["allow_both_pkeys"] == "FALSE"
    assert restart_only_options("allow_both_pkeys TRUE\n")["allow_both_pkeys"] == "TRUE"


def test_a_changed_restart_only_option_is_reported_and_a_reloadable_one_is_not():
    before = restart_only_options("allow_both_pkeys FALSE\npart_enforce both\nm_key 0x1\n")
    after = restart_only_options("allow_both_pkeys TRUE\npart_enforce off\nm_key 0x2\n")

    changes = restart_option_changes(before, after)

    assert [(c.name, c.before, c.after) for c in changes] == [("allow_both_pkeys", "FALSE", "TRUE")]
    assert str(changes[0]) == "allow_both_pkeys: FALSE -> TRUE"


def test_an_added_unknown_option_needs_a_restart():
    changes = restart_option_changes(restart_only_options(""), restart_only_options("novel 1\n"))

    assert [(c.name, c.before, c.after) for c in changes] == [("novel", None, "1")]


def test_management_keys_read_like_strtoull_and_m_key_zero_is_no_protection():
    assert management_keys("m_key 0x00000000000000ab  # c\nsa_key 0x5\n") == (0xAB, 5)
    assert management_keys("m_key 0x0000000000000000\n") == (None, None)
    assert management_keys("m_key junk\n") == (None, None)


def test_file_paths_come_from_the_command_line_first():
    argv = ["/usr/sbin/opensm", "-F", "/c/o.conf", "--Pconfig=/c/p.conf", "-Q", "-Y/c/q.conf"]

    assert opensm_file_paths(argv, {"partition_config_file": "/elsewhere"}) == {
        "opensm.conf": "/c/o.conf",
        "partitions.conf": "/c/p.conf",
        "qos-policy.conf": "/c/q.conf",
    }


def test_file_paths_fall_back_to_the_options_file_then_the_build_defaults():
    paths = opensm_file_paths(["opensm", "-config", "/c/o.conf"], {"qos": "TRUE"})

    assert paths == {
        "opensm.conf": "/c/o.conf",
        "partitions.conf": "/etc/opensm/partitions.conf",
        "qos-policy.conf": "/etc/opensm/qos-policy.conf",
    }
    assert opensm_file_paths(["opensm"], {})["qos-policy.conf"] is None


def test_configuration_errors_are_found_in_log_text():
    log = "x SUBNET UP\ny ERR 0510: osm_prtn_make_partitions() failed\nz PARSE ERROR line 3\n"

    assert configuration_errors(log) == [
        "y ERR 0510: osm_prtn_make_partitions() failed",
        "z PARSE ERROR line 3",
    ]


def test_an_additional_partition_belongs_to_its_tenant():
    before = parsed(*BASE)
    after = parsed(*BASE, "part_acme_data=0x0103, indx0 : 0xa1=full ;")
    cut = parsed(*BASE, f"part_{'a' * 10}_{'b' * 10}_0103=0x0103 : 0xc1=full ;")

    assert reachability_changes(before, after) == (Owner.tenant("acme"),)
    assert reachability_changes(before, cut) == (Owner.tenant("a" * 10),)
