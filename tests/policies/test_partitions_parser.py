"""Tests for the OpenSM partitions.conf parser: grammar, one test per finding, memberships()."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.findings import Finding, Severity
from policies.infiniband.model import IbSettings, IbSnapshot, Member, Partition, QosClass
from policies.infiniband.parse_partitions import (
    ParsedMember,
    ParsedPartitions,
    memberships,
    parse_partitions_conf,
)
from policies.infiniband.render import render_partitions_conf
from policies.model import Owner

CRITICAL = Severity.CRITICAL
WARNING = Severity.WARNING
# The statement isofabric renders (line 1 of most inputs below).
DEFAULT = "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;\n"
LONG_MEMBER_LINE = ", ".join(f"0x{guid:016x}=full" for guid in range(1, 300))


def findings_of(parsed: ParsedPartitions, code: str) -> list[Finding]:
    return [finding for finding in parsed.findings if finding.code == code]


def criticals(parsed: ParsedPartitions) -> list[Finding]:
    return [finding for finding in parsed.findings if finding.severity is CRITICAL]


# (code, severity, line, fails_open, text): each input shows one construct.
FINDING_CASES = [
    ("line-too-long", CRITICAL, 2, True, DEFAULT + f"T=0x10 : {LONG_MEMBER_LINE} ;\n"),
    ("carriage-return", CRITICAL, 1, True, "Default=0x7fff : ALL=limited ;\r\n"),
    ("nul-byte", CRITICAL, 2, False, DEFAULT + "T=0x10 : 0x1=full ;\0 U=0x20 : 0x2 ;\n"),
    ("no-statement", CRITICAL, None, True, "# nothing but a comment\n\n"),
    ("no-definition", CRITICAL, 2, True, DEFAULT + "T=0x10 ;\n"),
    ("definition-split", CRITICAL, 2, True, DEFAULT + "T=0x10, ipoib\n  : 0x1=full ;\n"),
    ("bad-definition", CRITICAL, 2, True, DEFAULT + "T=0x1g : 0x1=full ;\n"),
    ("empty-statement", CRITICAL, 4, True, DEFAULT + "T=0x10 :\n  0x1=full\n;\n"),
    ("unterminated-statement", CRITICAL, 2, False, DEFAULT + "T=0x10 : 0x1=full\n"),
    ("bad-member", CRITICAL, 2, True, DEFAULT + "T=0x10 : gpu01=full ;\n"),
    ("guid-without-0x", CRITICAL, 2, True, DEFAULT + "T=0x10 : 0002c903000e0b72=full ;\n"),
    ("guid-misread", CRITICAL, 2, False, DEFAULT + "T=0x10 : -0x1=full ;\n"),
    ("unknown-membership", CRITICAL, 2, False, DEFAULT + "T=0x10 : 0x1=fulll ;\n"),
    ("pkey-truncated", CRITICAL, 2, False, DEFAULT + "T=0x10010 : 0x1=full ;\n"),
    ("pkey-is-default", CRITICAL, 2, False, DEFAULT + "T=0x7fff : 0x1=full ;\n"),
    (
        "mixed-auto-explicit-keys",
        CRITICAL,
        2,
        False,
        DEFAULT + "Foo : 0xa1=full ;\nBar=0x0001 : 0xc1=full ;\n",
    ),
    ("pkey-collision", CRITICAL, 3, False, DEFAULT + "A=0x10 : 0x1 ;\nB=0x10 : 0x2 ;\n"),
    ("default-all-full", CRITICAL, 1, False, "Default=0x7fff : ALL=full ;\n"),
    ("all-full", CRITICAL, 2, False, DEFAULT + "T=0x10 : ALL_CAS=full ;\n"),
    ("auto-key", WARNING, 2, False, DEFAULT + "T : 0x1=full ;\n"),
    ("pkey-zero", WARNING, 2, False, DEFAULT + "T=0x8000 : 0x1=full ;\n"),
    ("pkey-membership-bit", WARNING, 2, False, DEFAULT + "T=0x8010 : 0x1=full ;\n"),
    ("pkey-octal", WARNING, 2, False, DEFAULT + "T=010 : 0x1=full ;\n"),
    ("duplicate-pkey", WARNING, 3, False, DEFAULT + "T=0x10 : 0x1 ;\nT=0x10 : 0x2 ;\n"),
    ("duplicate-name", WARNING, 3, False, DEFAULT + "T=0x10 : 0x1 ;\nT=0x20 : 0x2 ;\n"),
    ("long-name", WARNING, 2, False, DEFAULT + "t" * 32 + "=0x10 : 0x1 ;\n"),
    ("default-name-mismatch", WARNING, 1, False, "Default=0x10 : ALL=limited ;\n"),
    ("no-default-statement", WARNING, None, False, "T=0x10 : 0x1=full ;\n"),
    ("default-full-member", WARNING, 1, False, "Default=0x7fff : ALL=limited, 0x1=full ;\n"),
    ("both-membership", WARNING, 2, False, DEFAULT + "T=0x10 : 0x1=both ;\n"),
    ("none-member", WARNING, 2, False, DEFAULT + "T=0x10 : NONE ;\n"),
    ("unknown-flag", WARNING, 2, False, DEFAULT + "T=0x10, IPoIB : 0x1=full ;\n"),
    ("bad-flag-value", WARNING, 2, False, DEFAULT + "T=0x10, sl=16 : 0x1=full ;\n"),
    ("bad-mgid", WARNING, 2, False, "Default=0x7fff, ipoib :\n  mgid=fe80::1\n  ALL=limited ;\n"),
]


@pytest.mark.parametrize(
    ("code", "severity", "line", "fails_open", "text"),
    FINDING_CASES,
    ids=[case[0] for case in FINDING_CASES],
)
def test_each_finding(code, severity, line, fails_open, text):
    parsed = parse_partitions_conf(text)

    found = findings_of(parsed, code)
    assert [(f.severity, f.line, f.fails_open) for f in found] == [(severity, line, fails_open)]
    assert found[0].message
    if fails_open:
        assert parsed.fails_open


def test_every_documented_code_has_a_case():
    import policies.infiniband.parse_partitions as module

    documented = {
        line.split()[0] for line in (module.__doc__ or "").splitlines() if "  critical  " in line
    } | {line.split()[0] for line in (module.__doc__ or "").splitlines() if "  warning  " in line}
    assert documented == {case[0] for case in FINDING_CASES}


# --- what OpenSM actually does with the constructs above ------------------------------------


def test_unterminated_statement_before_next_definition_fails_open():
    parsed = parse_partitions_conf(DEFAULT + "T=0x10 : 0x1=full\nU=0x20 : 0x2=full ;\n")

    [finding] = findings_of(parsed, "unterminated-statement")
    assert (finding.severity, finding.line, finding.fails_open) == (CRITICAL, 2, True)
    assert "line 3" in finding.message


def test_decimal_guid_without_0x_is_read_silently_as_decimal():
    parsed = parse_partitions_conf(DEFAULT + "T=0x10 : 1234=full ;\n")

    [finding] = findings_of(parsed, "guid-without-0x")
    assert (finding.severity, finding.line, finding.fails_open) == (CRITICAL, 2, False)
    assert memberships(parsed) == {0x10: {1234: "full"}}


def test_unknown_membership_becomes_limited_and_empty_becomes_full():
    parsed = parse_partitions_conf(DEFAULT + "T=0x10 : 0x1=fulll, 0x2=FULL, 0x3= ;\n")

    assert [f.line for f in findings_of(parsed, "unknown-membership")] == [2, 2, 2]
    assert memberships(parsed) == {0x10: {0x1: "limited", 0x2: "limited", 0x3: "full"}}


def test_membership_prefixes_are_valid_keywords():
    parsed = parse_partitions_conf(
        DEFAULT + "T=0x10 : 0x1=f, 0x2=fu, 0x3=l, 0x4=lim, 0x5=limited, 0x6=b ;\n"
    )

    assert not findings_of(parsed, "unknown-membership")
    assert [m.membership for m in parsed.partitions[1].members] == [
        "full", "full", "limited", "limited", "limited", "both",
    ]  # fmt: skip


def test_explicit_key_equal_to_generated_one_merges_partitions():
    parsed = parse_partitions_conf(DEFAULT + "Foo : 0xa1=full ;\nBar=0x0001 : 0xc1=full ;\n")

    assert [p.pkey for p in parsed.partitions] == [0x7FFF, None, 0x0001]
    assert memberships(parsed) == {0x0001: {0xA1: "full", 0xC1: "full"}}
    assert "line 3 joins" in findings_of(parsed, "mixed-auto-explicit-keys")[0].message


def test_auto_keys_alone_are_only_warnings():
    parsed = parse_partitions_conf(DEFAULT + "Foo : 0xa1=full ;\nBar : 0xb1=full ;\n")

    assert not criticals(parsed)
    assert [f.line for f in findings_of(parsed, "auto-key")] == [2, 3]
    assert memberships(parsed) == {0x0001: {0xA1: "full"}, 0x0002: {0xB1: "full"}}


def test_key_less_statement_reuses_the_partition_of_the_same_name():
    # OpenSM osm_prtn_make_new() looks the name up before generating (reference §1.5).
    parsed = parse_partitions_conf(DEFAULT + "Foo : 0xa1=full ;\nFoo : 0xa2=limited ;\n")

    assert memberships(parsed) == {0x0001: {0xA1: "full", 0xA2: "limited"}}
    assert findings_of(parsed, "duplicate-pkey")[0].line == 3


def test_key_less_default_statement_is_the_default_partition():
    parsed = parse_partitions_conf("Default : ALL=limited, SELF=full ;\n")

    assert not findings_of(parsed, "no-default-statement")
    assert not findings_of(parsed, "auto-key")


def test_key_with_bit_15_keeps_low_15_bits():
    parsed = parse_partitions_conf(DEFAULT + "T=0x8a01 : 0x1=full ;\n")

    assert parsed.partitions[1].pkey == 0x0A01
    assert memberships(parsed) == {0x0A01: {0x1: "full"}}


def test_keys_are_read_with_strtoul_base_0():
    parsed = parse_partitions_conf(
        DEFAULT + "T=0x10 : 0x1 ;\nT = 16 : 0x2 ;\nT=020 : 0x3 ;\n0x10 : 0x4 ;\n"
    )

    assert [p.pkey for p in parsed.partitions] == [0x7FFF, 0x10, 0x10, 0x10, 0x10]
    assert [p.name for p in parsed.partitions][1:] == ["T", "T", "T", None]
    assert memberships(parsed) == {0x10: dict.fromkeys((1, 2, 3, 4), "limited")}


def test_0x7fff_in_a_tenant_statement_joins_the_default_partition():
    parsed = parse_partitions_conf(DEFAULT + "tenant_a=0x7fff : 0x1=full ;\n")

    assert memberships(parsed) == {0x7FFF: {0x1: "full"}}


def test_none_and_mgid_lines_add_no_member():
    text = (
        "Default=0x7fff, ipoib :\n"
        "        mgid=ff12:401b::0707,sl=1 # random IPv4 group\n"
        "        mgid=ff12::1,sl=1,Q_Key=0xDEADBEEF,rate=3,mtu=2 # random group\n"
        "        ALL=limited, SELF=full, NONE ;\n"
    )
    parsed = parse_partitions_conf(text)

    assert not criticals(parsed)
    assert [(m.special, m.membership) for m in parsed.partitions[0].members] == [
        ("ALL", "limited"),
        ("SELF", "full"),
    ]


def test_mgid_consumes_the_rest_of_the_line():
    text = "Default=0x7fff, ipoib :\n  mgid=ff12:401b::1, rate=3, 0x1=full\n  ALL=limited ;\n"
    parsed = parse_partitions_conf(text)

    assert [f.line for f in findings_of(parsed, "unknown-flag")] == [2]
    assert [m.special for m in parsed.partitions[0].members] == ["ALL"]


# --- lexical rules -----------------------------------------------------------------------------


def test_comments_whitespace_and_multi_line_statements():
    text = (
        "  Default = 0x7fff , ipoib:ALL = limited,SELF=full;# trailing ; comment : x\n"
        "# T=0x20 : 0x9 ;\n"
        "T\t=\t0x10 ,ipoib, mtu=4 , rate=7, sl=1 :   # comment after the colon\n"
        "\t0x1 = full , # comment after a comma\n"
        "\n"
        "    0x2=limited ; U=0x20 : 0x3=full ;\n"
    )
    parsed = parse_partitions_conf(text)

    assert parsed.findings == ()
    default, tenant, other = parsed.partitions
    assert (default.name, default.pkey, default.ipoib, default.line) == ("Default", 0x7FFF, True, 1)
    assert (tenant.flags, tenant.mtu, tenant.rate, tenant.sl) == (
        ("ipoib", "mtu=4", "rate=7", "sl=1"), 4, 7, 1,
    )  # fmt: skip
    assert tenant.members == (ParsedMember(1, None, "full", 4), ParsedMember(2, None, "limited", 6))
    assert (other.name, other.line) == ("U", 6)


def test_defmember_sets_the_membership_of_bare_members():
    parsed = parse_partitions_conf(DEFAULT + "T=0x10, defmember=full : 0x1, 0x2=limited ;\n")

    assert memberships(parsed) == {0x10: {0x1: "full", 0x2: "limited"}}


def test_special_names_match_by_prefix():
    parsed = parse_partitions_conf("Default=0x7fff : A=limited, ALL_S=full, S=full ;\n")

    assert [m.special for m in parsed.partitions[0].members] == ["ALL", "ALL_SWITCHES", "SELF"]


def test_line_limit_counts_the_newline():
    # fgets(line, 4095) returns at most 4094 bytes including the newline.
    ok = DEFAULT + "# " + "x" * 4091 + "\n"
    too_long = DEFAULT + "# " + "x" * 4092 + "\n"

    assert not parse_partitions_conf(ok).findings
    assert findings_of(parse_partitions_conf(too_long), "line-too-long")[0].line == 2


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(" \t\n\r\0#;:,=-+xX0178afALSENOfulimtdb\udcff"))))
def test_any_text_parses_without_exceptions(text):
    parsed = parse_partitions_conf(text)

    assert all(f.severity is CRITICAL for f in parsed.findings if f.fails_open)
    assert isinstance(memberships(parsed), dict)


def test_empty_file_fails_open():
    parsed = parse_partitions_conf("")

    assert parsed.fails_open
    assert findings_of(parsed, "no-statement")
    assert memberships(parsed) == {}


# --- good files and memberships() --------------------------------------------------------------


def test_rendered_file_has_no_critical_finding():
    gold = QosClass("gold", ib_sl=1, ib_rate=7, ib_mtu=4, vlarb_weight=64)
    snapshot = IbSnapshot(
        fabric=IbSettings(name="lab"),
        partitions=(
            Partition(0x0101, Owner.tenant("acme"), (Member(0x2C90300A1B2C4, True),), "gold"),
            Partition(0x0102, Owner.tenant("beta"), (Member(0x2C90300A1B2C5, False),)),
            Partition(0x0103, Owner.service("storage"), ()),
        ),
        qos_classes=(gold,),
    )
    parsed = parse_partitions_conf(render_partitions_conf(snapshot))

    assert not criticals(parsed)
    assert not parsed.fails_open
    assert memberships(parsed) == {
        0x0101: {0x2C90300A1B2C4: "full"},
        0x0102: {0x2C90300A1B2C5: "limited"},
    }
    acme = next(p for p in parsed.partitions if p.pkey == 0x0101)
    assert (acme.name, acme.ipoib, acme.sl, acme.rate, acme.mtu) == ("tenant_acme", True, 1, 7, 4)


def test_upstream_recommended_default_statement_is_clean():
    parsed = parse_partitions_conf("Default=0x7fff : ALL, ALL_SWITCHES=full, SELF=full ;\n")

    assert parsed.findings == ()


def test_memberships_merges_statements_the_way_opensm_does():
    text = (
        DEFAULT
        + "A=0x0010 : 0x1=full, 0x2=limited ;\n"
        + "A=0x0010 : 0x2=full, 0x3 ;\n"  # same key: merged; 0x2 listed again: later wins
        + "B=0x8020 :\n  0x1=limited,\n  0x4=both,\n  ALL_CAS=limited ;\n"
        + "C=0x0030 : ALL=limited ;\n"  # no explicit GUID: omitted
        + "D=0x0040 : 0x5=full, 0x5=limited ;\n"
    )
    parsed = parse_partitions_conf(text)

    assert not parsed.fails_open
    assert memberships(parsed) == {
        0x0010: {0x1: "full", 0x2: "full", 0x3: "limited"},
        0x0020: {0x1: "limited", 0x4: "full"},
        0x0040: {0x5: "limited"},
    }


def test_memberships_is_empty_when_opensm_discards_the_file():
    parsed = parse_partitions_conf(DEFAULT + "T=0x10 : 0x1=full ;\nU=0x20 : gpu01 ;\n")

    assert parsed.fails_open
    assert parsed.partitions[1].members  # the statements are still reported
    assert memberships(parsed) == {}


def test_a_100k_member_partition_parses_whole():
    # Its time is a benchmark (tests/benchmarks/bench_parsers.py), never asserted here.
    parsed = parse_partitions_conf(partition_with_members(100_000))

    assert len(parsed.partitions[1].members) == 100_000
    assert not parsed.findings


def partition_with_members(count: int) -> str:
    """partitions.conf with one partition of `count` full/limited members, one per line."""
    lines = [DEFAULT, "T=0x0010, ipoib :\n"]
    lines += [f"    0x{0x2C90300000000 + i:016x}=full,\n" for i in range(count - 1)]
    lines.append("    0x0002c903ffffffff=limited ;\n")
    return "".join(lines)


def test_indx0_is_read_only_when_spelled_exactly():
    text = (
        "Default=0x7fff : ALL=limited ;\n"
        "a=0x0010, indx0 : 0x1=full ;\n"
        "b=0x0020, indx : 0x2=full ;\n"
    )

    parsed = parse_partitions_conf(text)

    assert [(p.name, p.index0, p.ipoib) for p in parsed.partitions[1:]] == [
        ("a", True, False),
        ("b", False, False),
    ]
    assert [f.code for f in parsed.findings] == ["unknown-flag"]
