"""FRR renderer: the reviewed golden file, leaks only where grants are, per-leaf VRFs and RDs."""

from __future__ import annotations

import dataclasses
from ipaddress import IPv4Address

import pytest

from policies.errors import ArtifactHazardError, InvalidValueError, NotFoundError
from policies.findings import Severity
from policies.model import Grant
from policies.roce.model import RoceSnapshot
from policies.roce.parse_frr import ParsedBgp, parse_frr_conf
from policies.roce.render_frr import render_frr_conf
from tests.golden import assert_golden
from tests.policies.roce_snapshots import roce_snapshot

ACME, GLOBEX, STORAGE = "Vrf50001", "Vrf50002", "Vrf50000"


def vrf_instance(text: str, vrf: str) -> ParsedBgp:
    instance = parse_frr_conf(text).instance(vrf)
    assert instance is not None, f"no router bgp for {vrf}"
    return instance


def test_leaf01_matches_the_reviewed_golden_file():
    assert_golden("frr-leaf01.conf", render_frr_conf(roce_snapshot(), "leaf01"))


def test_rendering_is_byte_identical_for_equal_state_in_any_order():
    snapshot = roce_snapshot()
    shuffled = dataclasses.replace(
        snapshot,
        segments=tuple(reversed(snapshot.segments)),
        nics=tuple(reversed(snapshot.nics)),
        links=tuple(reversed(snapshot.links)),
        nodes=tuple(reversed(snapshot.nodes)),
    )

    for leaf in ("leaf01", "leaf02"):
        assert render_frr_conf(snapshot, leaf) == render_frr_conf(roce_snapshot(), leaf)
        assert render_frr_conf(shuffled, leaf) == render_frr_conf(snapshot, leaf)


@pytest.mark.parametrize("leaf", ["leaf01", "leaf02"])
def test_grant_leaks_routes_both_ways_and_nowhere_else(leaf):
    text = render_frr_conf(roce_snapshot(), leaf)

    acme, globex, storage = (vrf_instance(text, v) for v in (ACME, GLOBEX, STORAGE))
    assert acme.rt_imports == ("65000:50001", "65000:50000")
    assert storage.rt_imports == ("65000:50000", "65000:50001")
    assert globex.rt_imports == ("65000:50002",)
    assert (acme.rt_exports, globex.rt_exports, storage.rt_exports) == (
        ("65000:50001",),
        ("65000:50002",),
        ("65000:50000",),
    )
    assert text.count("! grant tenant:acme -> service:storage") == 2


def test_without_grants_every_vrf_imports_only_its_own_route_target():
    text = render_frr_conf(roce_snapshot(grants=()), "leaf01")

    for instance in parse_frr_conf(text).bgp:
        assert instance.rt_imports == instance.rt_exports
    assert "grant" not in text
    assert not [f for f in parse_frr_conf(text).findings if f.code == "import-without-export"]


def test_the_leak_is_the_only_import_without_export_finding():
    findings = parse_frr_conf(render_frr_conf(roce_snapshot(), "leaf01")).findings

    assert {(f.code, f.severity) for f in findings} == {("import-without-export", Severity.INFO)}
    assert sorted(f.message for f in findings) == [
        "Vrf50000 imports 65000:50001, which it does not export",
        "Vrf50001 imports 65000:50000, which it does not export",
    ]


def without_nic(snapshot: RoceSnapshot, node: str, switch: str) -> RoceSnapshot:
    nics = tuple(n for n in snapshot.nics if not (n.node == node and n.switch == switch))
    return dataclasses.replace(snapshot, nics=nics)


def test_vrfs_only_on_leaves_where_the_owner_has_ports():
    # gpu0003 (globex's only node) loses its rail-1 NIC: leaf02 carries no globex state at all.
    snapshot = without_nic(roce_snapshot(), "gpu0003", "leaf02")

    leaf01 = parse_frr_conf(render_frr_conf(snapshot, "leaf01"))
    leaf02 = parse_frr_conf(render_frr_conf(snapshot, "leaf02"))

    assert [v.name for v in leaf01.vrfs] == [STORAGE, ACME, GLOBEX]
    assert [v.name for v in leaf02.vrfs] == [STORAGE, ACME]
    assert leaf02.instance(GLOBEX) is None
    default = leaf02.instance(None)
    assert default is not None and [v.vni for v in default.vnis] == [10000, 10002]


def test_unowned_nodes_bring_no_vrf():
    snapshot = roce_snapshot()
    idle = dataclasses.replace(
        snapshot, nodes=tuple(dataclasses.replace(n, owners=()) for n in snapshot.nodes)
    )

    parsed = parse_frr_conf(render_frr_conf(idle, "leaf01"))

    assert parsed.vrfs == () and [b.vrf for b in parsed.bgp] == [None]


@pytest.mark.parametrize("leaf", ["leaf01", "leaf02"])
def test_rds_are_type1_and_unique_per_leaf(leaf):
    switch = next(s for s in roce_snapshot().switches if s.name == leaf)
    parsed = parse_frr_conf(render_frr_conf(roce_snapshot(), leaf))

    vrf_rds = [b.rd for b in parsed.bgp if b.vrf is not None]
    vni_rds = [v.rd for b in parsed.bgp for v in b.vnis]
    assert vrf_rds == [f"{switch.loopback}:{i}" for i in (3, 1, 2)]
    assert vni_rds == [f"{switch.vtep}:{i}" for i in (1, 2, 3)]
    assert len(set(vrf_rds + vni_rds)) == 6


def test_default_instance_peers_unnumbered_with_the_spine_and_announces_the_vtep():
    default = parse_frr_conf(render_frr_conf(roce_snapshot(), "leaf02")).instance(None)

    assert default is not None
    assert (default.asn, default.router_id, default.neighbors) == (
        65102,
        "10.0.0.2",
        ("Ethernet248",),
    )
    assert default.networks == ("10.0.0.2/32", "10.0.1.2/32")
    assert default.advertise_all_vni
    assert [(v.vni, v.rt_imports, v.rt_exports) for v in default.vnis] == [
        (10000, ("65000:10000",), ("65000:10000",)),
        (10001, ("65000:10001",), ("65000:10001",)),
        (10002, ("65000:10002",), ("65000:10002",)),
    ]


def test_spine_is_refused_and_unknown_switch_is_not_found():
    with pytest.raises(InvalidValueError, match="not a leaf"):
        render_frr_conf(roce_snapshot(), "spine01")
    with pytest.raises(NotFoundError):
        render_frr_conf(roce_snapshot(), "leaf99")


def with_segment(snapshot: RoceSnapshot, name: str, changes: dict[str, object]) -> RoceSnapshot:
    segments = tuple(
        dataclasses.replace(s, **changes) if s.vrf == name else s  # type: ignore[arg-type]
        for s in snapshot.segments
    )
    return dataclasses.replace(snapshot, segments=segments)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"imports": ("65000:50000",)}, "no grant"),  # globex never got storage
        ({"imports": ("tenantA:1",)}, "no grant"),
        ({"l3vni": 16777216, "vrf": "Vrf16777216"}, "not in 1..16777215"),
        ({"l2vni": 0}, "not in 1..16777215"),
        ({"vrf": "Vrf_globex"}, "must be Vrf50002"),
        ({"rd_index": 65536}, "16 bits"),
        ({"rd_index": 1}, "used twice"),  # acme has rd_index 1
        ({"l2vni": 50001}, "VNI 50001 is used more than once"),  # acme's L3VNI: a shared RT
    ],
)
def test_values_outside_the_domain_are_refused(changes, message):
    with pytest.raises(InvalidValueError, match=message):
        render_frr_conf(with_segment(roce_snapshot(), GLOBEX, changes), "leaf01")


def test_rt_asn_must_be_a_two_byte_asn():
    snapshot = roce_snapshot()
    big = dataclasses.replace(snapshot, fabric=dataclasses.replace(snapshot.fabric, rt_asn=70000))

    with pytest.raises(InvalidValueError, match="2-byte ASN"):
        render_frr_conf(big, "leaf01")


def test_vtep_equal_to_loopback_would_share_rds_and_is_refused():
    snapshot = roce_snapshot()
    switches = tuple(
        dataclasses.replace(s, vtep=IPv4Address("10.0.0.1")) if s.name == "leaf01" else s
        for s in snapshot.switches
    )

    with pytest.raises(InvalidValueError, match=r"RD 10\.0\.0\.1:1, 10\.0\.0\.1:2, 10\.0\.0\.1:3"):
        render_frr_conf(dataclasses.replace(snapshot, switches=switches), "leaf01")


def test_grant_for_a_tenant_without_segment_leaks_nothing():
    snapshot = roce_snapshot(grants=(Grant("acme", "storage"), Grant("initech", "storage")))

    storage = vrf_instance(render_frr_conf(snapshot, "leaf01"), STORAGE)

    assert storage.rt_imports == ("65000:50000", "65000:50001")


def test_a_renderer_defect_is_refused_before_emission(monkeypatch):
    import policies.roce.render_frr as render

    original = render._l2vni_block
    monkeypatch.setattr(
        render, "_l2vni_block", lambda vrf: [*original(vrf)[:2], "   route-target import 65000"]
    )

    with pytest.raises(ArtifactHazardError, match="malformed-rt"):
        render_frr_conf(roce_snapshot(), "leaf01")
