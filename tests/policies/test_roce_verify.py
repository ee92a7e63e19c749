"""verify_roce: EVPN-VXLAN reachability vs intent, each rule refuted by a literal mutation."""

from __future__ import annotations

import dataclasses
from ipaddress import IPv4Network

import pytest

from policies.infiniband.verify import verify_isolation
from policies.model import Grant, Node, NodeRole, Owner
from policies.roce.model import RoceQos, RoceSettings, RoceSnapshot, VrfSegment
from policies.roce.settings import check_roce_settings
from policies.roce.verify import verify_roce
from policies.verdict import (
    IB_RULES,
    POLICY_RULES,
    ROCE_RULES,
    Counterexample,
    Endpoint,
    Rule,
    Verdict,
)
from tests.policies.roce_snapshots import BRONZE, GOLD, SILVER, roce_snapshot
from tests.policies.snapshots import two_tenant_snapshot

ACME = Owner.tenant("acme")
GLOBEX = Owner.tenant("globex")
STORAGE = Owner.service("storage")
ACME_GPU = Endpoint(0, "gpu0001", ACME, "leaf01:Ethernet0")
GLOBEX_GPU = Endpoint(0, "gpu0003", GLOBEX, "leaf01:Ethernet16")
STOR = Endpoint(0, "stor01", STORAGE, "leaf01:Ethernet32")


def with_segment(owner: Owner, **changes: object) -> RoceSnapshot:
    snapshot = roce_snapshot()
    segments = tuple(
        dataclasses.replace(s, **changes) if s.owner == owner else s  # type: ignore[arg-type]
        for s in snapshot.segments
    )
    return dataclasses.replace(snapshot, segments=segments)


def segment_of(snapshot: RoceSnapshot, owner: Owner) -> VrfSegment:
    return next(s for s in snapshot.segments if s.owner == owner)


def only(verdict: Verdict, rule: Rule) -> Counterexample:
    [example] = [c for c in verdict.counterexamples if c.rule is rule]
    return example


def rules_of(verdict: Verdict) -> set[Rule]:
    return {c.rule for c in verdict.counterexamples}


def with_qos(*classes: RoceQos) -> Verdict:
    return verify_roce(dataclasses.replace(roce_snapshot(), qos_classes=classes))


# --- the sample -----------------------------------------------------------------------------------


def test_sample_fabric_holds_with_only_the_granted_edge_on_the_services_l3vni():
    snapshot = roce_snapshot()

    verdict = verify_roce(snapshot)

    assert verdict.holds
    assert verdict.counterexamples == ()
    edges = [(str(e.source), str(e.target), e.segment, e.allowed) for e in verdict.reachability]
    assert edges == [("tenant:acme", "service:storage", 50000, True)]
    assert verdict.snapshot_digest == snapshot.digest
    assert verdict.rules == ROCE_RULES


def test_roce_and_infiniband_verdicts_list_their_own_rules():
    assert verify_isolation(two_tenant_snapshot()).rules == IB_RULES
    assert Rule.VNI_DUPLICATE in ROCE_RULES and Rule.VNI_DUPLICATE not in IB_RULES
    assert Rule.PKEY_BUDGET in IB_RULES and Rule.PKEY_BUDGET not in ROCE_RULES
    # Quotas count nodes across fabrics, so no per-fabric verdict evaluates them.
    assert set(IB_RULES) | set(ROCE_RULES) == set(Rule) - {Rule.QUOTA_EXCEEDED}
    assert set(POLICY_RULES) <= set(IB_RULES) & set(ROCE_RULES)


def test_without_grant_and_without_imports_nothing_is_reachable():
    verdict = verify_roce(roce_snapshot(grants=()))

    assert verdict.holds
    assert verdict.reachability == ()


# --- reachability rules ---------------------------------------------------------------------------


def test_imports_left_behind_by_a_revoked_grant_reach_the_service_without_grant():
    snapshot = dataclasses.replace(roce_snapshot(), grants=())

    verdict = verify_roce(snapshot)

    example = only(verdict, Rule.SERVICE_WITHOUT_GRANT)
    assert (example.a, example.b, example.segment) == (ACME_GPU, STOR, 50000)
    assert "imports route target" in example.message
    assert [(e.source, e.target, e.allowed) for e in verdict.reachability] == [
        (ACME, STORAGE, False)
    ]


def test_importing_another_tenants_route_target_is_cross_tenant_reachability():
    snapshot = with_segment(GLOBEX, imports=("65000:50001",))

    verdict = verify_roce(snapshot)

    example = only(verdict, Rule.CROSS_TENANT)
    assert (example.a, example.b, example.segment) == (ACME_GPU, GLOBEX_GPU, 50002)
    assert "Vrf50002 of tenant:globex imports route target 65000:50001" in example.message


def test_importing_an_l2vni_route_target_also_reaches_its_owner():
    verdict = verify_roce(with_segment(GLOBEX, imports=("65000:10000",)))

    assert only(verdict, Rule.CROSS_TENANT).a == ACME_GPU


def test_two_services_importing_each_other_is_cross_service_reachability():
    snapshot = roce_snapshot()
    backup = VrfSegment(
        Owner.service("backup"),
        "Vrf50003",
        50003,
        3003,
        103,
        10003,
        IPv4Network("10.64.3.0/24"),
        4,
        imports=("65000:50000",),
    )
    snapshot = dataclasses.replace(snapshot, segments=(*snapshot.segments, backup))

    example = only(verify_roce(snapshot), Rule.CROSS_SERVICE)

    # Owners sort by name within a kind: backup (no hosts yet) is the source, storage the target.
    assert example.a == Endpoint(0, "?", Owner.service("backup"), None)
    assert (example.b, example.segment) == (STOR, 50000)


def test_route_target_nobody_exports_is_a_route_leak():
    verdict = verify_roce(with_segment(ACME, imports=("65000:50000", "65000:59999")))

    example = only(verdict, Rule.ROUTE_LEAK)
    assert (example.a, example.b, example.segment) == (ACME_GPU, None, 50001)
    assert "65000:59999" in example.message


def test_a_globex_nic_on_an_acme_port_shares_the_port_and_reaches_acme():
    snapshot = roce_snapshot()
    intruder = dataclasses.replace(snapshot.nics[4], name="eth2", port="Ethernet0")
    assert intruder.node == "gpu0003"

    verdict = verify_roce(dataclasses.replace(snapshot, nics=(*snapshot.nics, intruder)))

    on_port = Endpoint(0, "gpu0003", GLOBEX, "leaf01:Ethernet0")
    shared = only(verdict, Rule.PORT_SHARED)
    assert (shared.a, shared.b, shared.segment) == (ACME_GPU, on_port, 50002)
    leak = only(verdict, Rule.CROSS_TENANT)
    assert (leak.a, leak.b, leak.segment) == (ACME_GPU, on_port, 50002)


def test_a_free_node_cabled_to_a_tenant_port_is_an_unassigned_member():
    snapshot = roce_snapshot()
    free = dataclasses.replace(snapshot.nics[6], name="eth2", port="Ethernet0")
    assert free.node == "gpu0004"

    verdict = verify_roce(dataclasses.replace(snapshot, nics=(*snapshot.nics, free)))

    example = only(verdict, Rule.UNASSIGNED_MEMBER)
    assert example.a == ACME_GPU
    assert example.b == Endpoint(0, "gpu0004", Owner.unassigned("gpu0004"), "leaf01:Ethernet0")
    assert example.segment == 50001
    assert Rule.PORT_SHARED in rules_of(verdict)


def test_a_node_held_by_two_tenants_is_node_shared_and_joins_both_segments():
    snapshot = roce_snapshot()
    shared = Node("gpu0001", NodeRole.COMPUTE, (ACME, GLOBEX))
    snapshot = dataclasses.replace(snapshot, nodes=(shared, *snapshot.nodes[1:]))

    verdict = verify_roce(snapshot)

    example = only(verdict, Rule.NODE_SHARED)
    assert (example.a, example.b) == (ACME_GPU, dataclasses.replace(ACME_GPU, owner=GLOBEX))
    assert only(verdict, Rule.CROSS_TENANT).segment == 50002
    assert Rule.PORT_SHARED not in rules_of(verdict)


def test_a_management_node_held_by_a_tenant():
    snapshot = roce_snapshot()
    nodes = (dataclasses.replace(snapshot.nodes[0], role=NodeRole.MANAGEMENT), *snapshot.nodes[1:])

    example = only(
        verify_roce(dataclasses.replace(snapshot, nodes=nodes)), Rule.MANAGEMENT_ASSIGNED
    )

    assert example.a == ACME_GPU


# --- identifiers ----------------------------------------------------------------------------------


def test_an_l2vni_reused_by_another_tenant_is_a_duplicate_and_bridges_them():
    verdict = verify_roce(with_segment(GLOBEX, l2vni=10000))

    duplicate = only(verdict, Rule.VNI_DUPLICATE)
    assert (duplicate.a, duplicate.b, duplicate.segment) == (ACME_GPU, GLOBEX_GPU, 10000)
    leak = only(verdict, Rule.CROSS_TENANT)
    assert (leak.a, leak.b, leak.segment) == (ACME_GPU, GLOBEX_GPU, 10000)


def test_an_l2vni_equal_to_an_l3vni_is_a_duplicate():
    verdict = verify_roce(with_segment(GLOBEX, l2vni=50001))

    example = only(verdict, Rule.VNI_DUPLICATE)
    assert (example.a, example.b, example.segment) == (ACME_GPU, GLOBEX_GPU, 50001)
    assert "L2VNI 50001 of tenant:globex is also the L3VNI of tenant:acme" in example.message


@pytest.mark.parametrize("l2vni", [0, 9999, 20000, 2**24])
def test_l2vni_outside_the_fabric_range(l2vni: int):
    example = only(verify_roce(with_segment(GLOBEX, l2vni=l2vni)), Rule.VNI_OUT_OF_RANGE)

    assert (example.a, example.segment) == (GLOBEX_GPU, 50002)
    assert "10000-19999" in example.message


def test_a_vlan_id_reused_fabric_wide_is_a_duplicate_and_bridges_the_tenants():
    verdict = verify_roce(with_segment(GLOBEX, vlan=100))

    duplicate = only(verdict, Rule.VLAN_DUPLICATE)
    assert (duplicate.a, duplicate.b, duplicate.segment) == (ACME_GPU, GLOBEX_GPU, 50002)
    leak = only(verdict, Rule.CROSS_TENANT)
    assert (leak.a, leak.b, leak.segment) == (ACME_GPU, GLOBEX_GPU, 50002)
    assert "VLAN 100" in leak.message


@pytest.mark.parametrize(("field", "vlan"), [("vlan", 1), ("vlan", 4095), ("l3vni_vlan", 99)])
def test_vlan_outside_the_fabric_range(field: str, vlan: int):
    example = only(verify_roce(with_segment(GLOBEX, **{field: vlan})), Rule.VLAN_OUT_OF_RANGE)

    assert (example.a, example.segment) == (GLOBEX_GPU, 50002)


def test_a_vrf_not_named_after_its_l3vni_is_invalid():
    example = only(verify_roce(with_segment(ACME, vrf="Vrf_acme")), Rule.VRF_INVALID)

    assert (example.a, example.segment) == (ACME_GPU, 50001)
    assert "'Vrf50001'" in example.message


def test_one_vrf_holding_two_l3vnis_is_invalid():
    verdict = verify_roce(with_segment(GLOBEX, vrf="Vrf50001"))

    [two_vnis] = [c for c in verdict.counterexamples if c.rule is Rule.VRF_INVALID and c.b]
    assert (two_vnis.a, two_vnis.b, two_vnis.segment) == (ACME_GPU, GLOBEX_GPU, 50002)


def test_an_rd_index_used_twice_is_invalid():
    example = only(verify_roce(with_segment(GLOBEX, rd_index=1)), Rule.RD_INVALID)

    assert (example.a, example.b, example.segment) == (ACME_GPU, GLOBEX_GPU, 50002)


def test_an_rd_index_beyond_two_bytes_is_invalid():
    example = only(verify_roce(with_segment(GLOBEX, rd_index=65536)), Rule.RD_INVALID)

    assert (example.a, example.b) == (GLOBEX_GPU, None)


def test_overlapping_subnets():
    example = only(
        verify_roce(with_segment(GLOBEX, subnet=IPv4Network("10.64.0.0/23"))), Rule.SUBNET_OVERLAP
    )

    assert (example.a, example.b, example.segment) == (GLOBEX_GPU, ACME_GPU, 50001)


def test_a_subnet_outside_the_tenant_pool():
    verdict = verify_roce(with_segment(GLOBEX, subnet=IPv4Network("192.168.0.0/24")))

    example = only(verdict, Rule.SUBNET_OUTSIDE_POOL)
    assert (example.a, example.segment) == (GLOBEX_GPU, 50002)


@pytest.mark.parametrize(
    ("switch", "port", "problem"),
    [
        ("leaf09", "Ethernet0", "unknown switch"),
        ("spine01", "Ethernet248", "spine"),
        ("leaf01", "Ethernet999", "does not have"),
        ("leaf01", "Ethernet248", "underlay"),
    ],
)
def test_a_nic_on_something_other_than_a_leaf_host_port(switch: str, port: str, problem: str):
    snapshot = roce_snapshot()
    moved = dataclasses.replace(snapshot.nics[4], switch=switch, port=port)
    nics = (*snapshot.nics[:4], moved, *snapshot.nics[5:])

    verdict = verify_roce(dataclasses.replace(snapshot, nics=nics))

    example = only(verdict, Rule.NIC_UNKNOWN_PORT)
    assert example.a == Endpoint(0, "gpu0003", GLOBEX, f"{switch}:{port}")
    assert example.segment == 50002
    assert problem in example.message


# --- QoS and MTU ----------------------------------------------------------------------------------


def test_a_lossy_class_on_a_lossless_traffic_class():
    example = only(with_qos(GOLD, SILVER, dataclasses.replace(BRONZE, tc=3)), Rule.QOS_PFC_ON_LOSSY)

    assert "gold and bronze share TC 3" in example.message


def test_a_lossless_class_on_the_cnp_traffic_class():
    verdict = with_qos(dataclasses.replace(GOLD, tc=6), SILVER, BRONZE)

    assert rules_of(verdict) == {Rule.QOS_PFC_ON_LOSSY, Rule.QOS_CNP_CONFLICT}


@pytest.mark.parametrize("change", [{"dscp": 48}, {"tc": 6}])
def test_a_class_on_the_cnp_dscp_or_traffic_class(change: dict[str, int]):
    verdict = with_qos(GOLD, SILVER, dataclasses.replace(BRONZE, **change))  # type: ignore[arg-type]

    assert "bronze" in only(verdict, Rule.QOS_CNP_CONFLICT).message


def test_more_lossless_traffic_classes_than_the_fabric_allows():
    platinum = RoceQos("platinum", dscp=30, tc=2, lossless=True, ets_weight=0)

    example = only(with_qos(GOLD, SILVER, BRONZE, platinum), Rule.QOS_LOSSLESS_LIMIT)

    assert "[2, 3, 4]" in example.message


@pytest.mark.parametrize(
    "change",
    [{"ecn_min_bytes": 1_536_000}, {"ecn_min_bytes": 0}, {"ecn_probability": 0}],
)
def test_a_lossless_class_without_valid_ecn_marking(change: dict[str, int]):
    gold = dataclasses.replace(GOLD, **change)  # type: ignore[arg-type]

    assert "gold" in only(with_qos(gold, SILVER, BRONZE), Rule.QOS_ECN_MISSING).message


def test_ecn_thresholds_on_a_lossy_class_are_not_required():
    assert with_qos(GOLD, SILVER, dataclasses.replace(BRONZE, ecn_probability=0)).holds


def test_two_classes_with_one_dscp():
    verdict = with_qos(GOLD, dataclasses.replace(SILVER, dscp=26), BRONZE)

    assert "gold and silver both use DSCP 26" in only(verdict, Rule.QOS_DSCP_DUPLICATE).message


def test_ets_weights_above_100_percent():
    verdict = with_qos(GOLD, SILVER, dataclasses.replace(BRONZE, ets_weight=21))

    assert "101%" in only(verdict, Rule.QOS_ETS_OVERCOMMIT).message


@pytest.mark.parametrize(("host", "underlay"), [(9000, 9000), (9000, 9049), (9200, 9250)])
def test_underlay_mtu_without_room_for_vxlan(host: int, underlay: int):
    snapshot = roce_snapshot()
    fabric = dataclasses.replace(snapshot.fabric, host_mtu=host, underlay_mtu=underlay)

    verdict = verify_roce(dataclasses.replace(snapshot, fabric=fabric))

    assert rules_of(verdict) == {Rule.MTU_BUDGET}


def test_the_verdict_is_deterministic():
    snapshot = dataclasses.replace(
        with_segment(GLOBEX, vlan=100, l2vni=10000), grants=(Grant("globex", "storage"),)
    )

    assert verify_roce(snapshot) == verify_roce(snapshot)


# --- fabric settings ------------------------------------------------------------------------------


def test_default_settings_have_no_problems():
    assert check_roce_settings(RoceSettings(name="west")) == []


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"vlan_first": 1}, "VLAN range 1-3999 is outside 2-4094"),
        ({"vlan_last": 4095}, "VLAN range 100-4095 is outside 2-4094"),
        ({"vlan_first": 200, "vlan_last": 199}, "VLAN range 200-199 is empty"),
        ({"l2vni_first": 0}, "L2VNI range 0-19999 is outside 1-16777215"),
        ({"l3vni_last": 2**24}, "L3VNI range 50000-16777216 is outside 1-16777215"),
        ({"l3vni_first": 15000}, "L2VNI range 10000-19999 and L3VNI range 15000-59999 overlap"),
        ({"rt_asn": 0}, "rt_asn 0 is outside 1-65535"),
        ({"rt_asn": 65536}, "rt_asn 65536 is outside 1-65535"),
        ({"tenant_prefix_length": 8}, "tenant prefix length /8 must be between"),
        ({"tenant_prefix_length": 31}, "tenant prefix length /31 must be between"),
        ({"host_mtu": 9200}, "underlay MTU 9216 must be at least host MTU 9200 + 50"),
        ({"underlay_mtu": 9300, "host_mtu": 9250}, "at most 9216"),
        ({"max_lossless_priorities": 0}, "max_lossless_priorities 0 is outside 1-8"),
        ({"max_lossless_priorities": 9}, "max_lossless_priorities 9 is outside 1-8"),
    ],
)
def test_settings_problems(changes: dict[str, int], problem: str):
    settings = dataclasses.replace(RoceSettings(name="west"), **changes)  # type: ignore[arg-type]

    problems = check_roce_settings(settings)

    assert len(problems) == 1
    assert problem in problems[0]
