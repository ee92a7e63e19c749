"""FRR frr.conf parser: RT/RD syntax as bgpd 8.4 reads it, findings, and render round trips."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.findings import Severity
from policies.model import Grant
from policies.roce.model import RoceSnapshot, route_target, with_grant_imports
from policies.roce.parse_frr import parse_frr_conf, rd_rt_type
from policies.roce.render_frr import render_frr_conf
from tests.policies.roce_snapshots import roce_snapshot, segments

EVPN_LEAF = """\
frr defaults datacenter
hostname leaf1
vrf Vrf_tenA
 vni 50001
exit-vrf
router bgp 65101
 bgp router-id 10.1.0.1
 neighbor FABRIC peer-group
 neighbor swp51 interface peer-group FABRIC
 address-family ipv4 unicast
  network 10.1.0.1/32
 exit-address-family
 address-family l2vpn evpn
  advertise-all-vni
  vni 10100
   rd 10.1.0.1:10100
   route-target import 65000:10100
   route-target export 65000:10100
  exit-vni
 exit-address-family
exit
router bgp 65101 vrf Vrf_tenA
 address-family l2vpn evpn
  advertise ipv4 unicast
  rd 10.1.0.1:50001
  route-target import 65000:50001
  route-target export 65000:50001
 exit-address-family
exit
"""


def codes(text: str) -> list[str]:
    return [f.code for f in parse_frr_conf(text).findings]


# docs/facts/roce.md §4: what bgpd's dry run accepted and rejected (observed with FRR 8.4.4
# in this project's lab).
@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("65000:50001", "type0"),
        ("65000:4294967295", "type0"),
        ("4200000000:100", "type2"),
        ("10.1.0.1:100", "type1"),
        ("65000", None),
        ("tenantA:1", None),
        ("65000:50001:7", None),
        ("70000:5000000000", None),
        ("4200000000:70000", None),
        ("*:50001", None),
        ("10.1.0.1:70000", None),
        ("10.1.0.300:1", None),
        ("65000:-1", None),
    ],
)
def test_value_kind_follows_bgpd(value, kind):
    assert rd_rt_type(value) == kind


def test_reference_evpn_leaf_parses_clean():
    parsed = parse_frr_conf(EVPN_LEAF)

    assert parsed.hostname == "leaf1"
    assert [(v.name, v.l3vni) for v in parsed.vrfs] == [("Vrf_tenA", 50001)]
    default, tenant = parsed.bgp
    assert (default.asn, default.vrf, default.router_id) == (65101, None, "10.1.0.1")
    assert default.advertise_all_vni and default.neighbors == ("swp51",)
    assert default.networks == ("10.1.0.1/32",)
    assert [(v.vni, v.rd, v.rt_imports, v.rt_exports) for v in default.vnis] == [
        (10100, "10.1.0.1:10100", ("65000:10100",), ("65000:10100",))
    ]
    assert (tenant.vrf, tenant.rd, tenant.rt_imports, tenant.rt_exports) == (
        "Vrf_tenA",
        "10.1.0.1:50001",
        ("65000:50001",),
        ("65000:50001",),
    )
    assert tenant.advertise_ipv4_unicast and not tenant.advertise_all_vni
    assert parsed.findings == ()


@pytest.mark.parametrize(
    ("old", "new", "code", "line"),
    [
        ("import 65000:50001", "import 65000", "malformed-rt", 26),
        ("import 65000:50001", "import tenantA:1", "malformed-rt", 26),
        ("export 65000:10100", "export 65000:10100:7", "malformed-rt", 18),
        ("import 65000:50001", "import 65000:50001 65000:50002", "rt-list", 26),
        ("rd 10.1.0.1:50001", "rd 10.1.0.1", "malformed-rd", 25),
        ("rd 10.1.0.1:50001", "rd 10.1.0.1:10100", "duplicate-rd", 25),
        (" vni 50001", " vni 16777216", "bad-vni", 4),
        ("  vni 10100", "  vni 0", "bad-vni", 15),
        ("vrf Vrf_tenA\n", "vrf Vrf_tenant_alpha_one\n", "vrf-name-too-long", 3),
        ("  advertise ipv4 unicast", "  advertise-all-vni", "advertise-all-vni-in-vrf", 24),
        ("  rd 10.1.0.1:50001", "  vni 10200\n  exit-vni", "vni-in-vrf-instance", 25),
        ("  advertise-all-vni\n", "", "vni-before-advertise-all-vni", 14),
        ("import 65000:50001", "import 65000:50002", "import-without-export", 26),
    ],
)
def test_each_construct_gets_its_finding(old, new, code, line):
    assert old in EVPN_LEAF
    findings = parse_frr_conf(EVPN_LEAF.replace(old, new, 1)).findings

    assert (code, line) in [(f.code, f.line) for f in findings]


def test_duplicate_l3vni_and_vrf_without_vni_are_errors():
    text = EVPN_LEAF.replace("exit-vrf\n", "exit-vrf\nvrf Vrf_tenB\n vni 50001\nexit-vrf\n", 1)
    text += "router bgp 65101 vrf Vrf_tenC\nexit\n"

    findings = parse_frr_conf(text).findings

    assert [(f.code, f.line) for f in findings if f.severity is Severity.ERROR] == [
        ("duplicate-l3vni", 3),
        ("duplicate-l3vni", 6),
        ("vrf-without-vni", 33),
    ]


def test_two_vrfs_exporting_one_rt_is_reported():
    text = EVPN_LEAF.replace("export 65000:50001", "export 65000:10100")

    assert "shared-export-rt" in codes(text)


def test_missing_exit_vni_keeps_lines_in_the_right_block_like_vtysh():
    # vtysh walks up to the parent node when a command does not exist in the current one.
    text = EVPN_LEAF.replace("  exit-vni\n", "").replace(" exit-address-family\n", "")

    parsed = parse_frr_conf(text)

    default = parsed.instance(None)
    assert default is not None and default.vnis[0].rt_exports == ("65000:10100",)
    assert default.networks == ("10.1.0.1/32",)
    tenant = parsed.instance("Vrf_tenA")
    assert tenant is not None and tenant.rd == "10.1.0.1:50001"


def test_route_target_both_counts_as_import_and_export_and_comments_are_skipped():
    text = EVPN_LEAF.replace(
        "  route-target import 65000:50001\n  route-target export 65000:50001\n",
        "  ! leak\n  # note\n  route-target both 65000:50001\n",
    )

    tenant = parse_frr_conf(text).instance("Vrf_tenA")

    assert tenant is not None
    assert (tenant.rt_imports, tenant.rt_exports) == (("65000:50001",), ("65000:50001",))


def test_unmodelled_nodes_do_not_swallow_what_follows():
    text = "interface Ethernet0\n ipv6 nd ra-interval 10\nlog syslog\n" + EVPN_LEAF

    assert [b.vrf for b in parse_frr_conf(text).bgp] == [None, "Vrf_tenA"]


# Property: every VRF, VNI, RD and RT the renderer writes, the parser reads back.
GRANT_SETS = st.sets(st.sampled_from([Grant("acme", "storage"), Grant("globex", "storage")]))


@st.composite
def snapshots(draw: st.DrawFn) -> RoceSnapshot:
    vnis = draw(st.lists(st.integers(1, 2**24 - 1), min_size=6, max_size=6, unique=True))
    rd_indexes = draw(st.lists(st.integers(0, 2**16 - 1), min_size=3, max_size=3, unique=True))
    rt_asn = draw(st.integers(1, 2**16 - 1))
    grants = tuple(sorted(draw(GRANT_SETS), key=lambda g: g.tenant))
    varied = tuple(
        dataclasses.replace(s, l3vni=l3, vrf=f"Vrf{l3}", l2vni=l2, rd_index=rd)
        for s, l3, l2, rd in zip(segments(), vnis[:3], vnis[3:], rd_indexes, strict=True)
    )
    base = roce_snapshot()
    return dataclasses.replace(
        base,
        fabric=dataclasses.replace(base.fabric, rt_asn=rt_asn),
        segments=with_grant_imports(varied, grants, rt_asn),
        grants=grants,
    )


@settings(max_examples=60, deadline=None)
@given(snapshot=snapshots(), leaf=st.sampled_from(["leaf01", "leaf02"]))
def test_parsing_a_rendered_file_gives_back_every_vrf_vni_rd_and_rt(snapshot, leaf):
    switch = next(s for s in snapshot.switches if s.name == leaf)
    asn = snapshot.fabric.rt_asn

    parsed = parse_frr_conf(render_frr_conf(snapshot, leaf))

    expected = sorted(snapshot.segments, key=lambda s: s.l3vni)
    assert [(v.name, v.l3vni) for v in parsed.vrfs] == [(s.vrf, s.l3vni) for s in expected]
    for segment in expected:
        instance = parsed.instance(segment.vrf)
        own = route_target(asn, segment.l3vni)
        assert instance is not None and instance.rd == f"{switch.loopback}:{segment.rd_index}"
        assert instance.rt_exports == (own,)
        assert set(instance.rt_imports) == {own, *segment.imports}
        assert len(instance.rt_imports) == 1 + len(segment.imports)
    default = parsed.instance(None)
    assert default is not None
    assert sorted((v.vni, v.rd, v.rt_imports, v.rt_exports) for v in default.vnis) == sorted(
        (s.l2vni, f"{switch.vtep}:{s.rd_index}", (r,), (r,))
        for s in expected
        for r in [route_target(asn, s.l2vni)]
    )
    assert not [f for f in parsed.findings if f.severity is not Severity.INFO]
