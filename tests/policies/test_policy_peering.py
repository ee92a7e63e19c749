"""Peering on the wire (issue 13): InfiniBand's shared partition, RoCE's route-target imports.

An accepted peering is, on InfiniBand, one more partition with its own P_Key in which the ports
of both tenants are full members; on RoCE, each tenant's VRF imports the other's L3VNI RT.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from policies.config_audit import audit_frr, deployed_snapshot
from policies.errors import InvalidValueError
from policies.findings import Severity
from policies.infiniband.intent import plan_partitions
from policies.infiniband.model import (
    MAX_PARTITION_NAME,
    Member,
    Partition,
    peering_partition_name,
)
from policies.infiniband.parse_partitions import memberships, parse_partitions_conf
from policies.infiniband.render import SubnetManagerKeys, render_opensm_artifacts
from policies.infiniband.render import render_partitions_conf as render_partitions
from policies.infiniband.verify import verify_isolation
from policies.model import Owner
from policies.policy import Peering
from policies.roce.model import route_target
from policies.roce.parse_frr import parse_frr_conf
from policies.roce.render_frr import render_frr_conf
from policies.verdict import Rule
from tests.golden import assert_golden
from tests.policies import policy_fabrics as fab
from tests.policies.snapshots import guid, ports, two_tenant_nodes

KEYS = SubnetManagerKeys(m_key=0x1111, sm_key=0x2222, sa_key=0x3333)


def peering_partition(snapshot_partitions: tuple[Partition, ...]) -> Partition:
    [found] = [p for p in snapshot_partitions if p.peering is not None]
    return found


# --- InfiniBand: the peering's partition ----------------------------------------------------------


def test_the_planner_adds_a_partition_where_both_peers_ports_are_full_members():
    partitions = plan_partitions(
        two_tenant_nodes(),
        ports(),
        {"acme": (0x0101, "gold"), "globex": (0x0102, None)},
        {"storage": 0x0100},
        (),
        {Peering("acme", "globex"): 0x0103},
    )

    shared = peering_partition(partitions)
    assert (shared.pkey, shared.owner, shared.qos_class) == (0x0103, Owner.tenant("acme"), None)
    hosts = ("gpu0001", "gpu0002", "gpu0003")
    assert shared.members == tuple(
        sorted(Member(guid(h, hca), True) for h in hosts for hca in (0, 1))
    )
    assert [p.pkey for p in partitions] == [0x0100, 0x0101, 0x0102, 0x0103]


def test_a_peering_without_a_key_gets_no_partition():
    partitions = plan_partitions(two_tenant_nodes(), ports(), {"acme": (0x0101, None)}, {}, ())

    assert [p.peering for p in partitions] == [None]


def test_the_peering_partition_is_named_after_both_tenants():
    shared = peering_partition(fab.ib_snapshot(peerings=(fab.INT_PEERING,)).partitions)

    assert shared.name == "peer_int-a_int-b"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("a" * 63, "b" * 63),
        ("a" * 3, "b" * 63),
        ("a" * 63, "b" * 3),
        ("a" * 13, "b" * 13),
        ("a", "b" * 40),
    ],
)
def test_a_long_peering_name_keeps_both_slugs_and_the_key_within_31_bytes(a: str, b: str):
    name = peering_partition_name(Peering(a, b), 0x0123)

    assert len(name.encode()) <= MAX_PARTITION_NAME
    assert name.count("_") == 3  # a whole peering name has two, tenants' and services' fewer
    peer, a_cut, b_cut, key = name.split("_")
    assert (peer, key) == ("peer", "0123")
    assert a.startswith(a_cut) and len(a_cut) >= min(len(a), 10)
    assert b.startswith(b_cut) and len(b_cut) >= min(len(b), 10)


def test_cut_peering_names_differ_by_key_and_never_equal_a_whole_one():
    long_a, long_b = "x" + "a" * 40, "y" + "b" * 40
    names = {
        peering_partition_name(Peering(long_a, long_b), 0x0101),
        peering_partition_name(Peering(long_a, long_b[:-1] + "c"), 0x0102),
        peering_partition_name(Peering("x" + "a" * 9, "y" + "b" * 9), 0x0103),  # 26 bytes, whole
    }

    assert len(names) == 3


def test_rendered_partitions_conf_with_a_peering_matches_the_reviewed_golden_file():
    snapshot = fab.ib_snapshot(peerings=(fab.INT_PEERING,))

    text = render_partitions(snapshot)

    assert_golden("partitions-peering.conf", text)
    deployed = memberships(parse_partitions_conf(text))
    peers = {fab.ib_guid(node, hca): "full" for node in ("gpu04", "gpu05") for hca in (0, 1)}
    assert deployed[fab.PEERING_KEY] == peers


def test_the_opensm_artifacts_with_a_peering_pass_the_hazard_check():
    artifacts = render_opensm_artifacts(fab.ib_snapshot(peerings=(fab.INT_PEERING,)), KEYS)

    assert "peer_int-a_int-b=0x0106, ipoib :" in artifacts[1].content.decode()


def test_the_peering_partition_counts_in_the_per_port_key_budget():
    # Each peered port holds its tenant's key, the peering's and 0x7fff; int-a also two services.
    snapshot = fab.ib_snapshot(peerings=(fab.INT_PEERING,))
    tight = replace(snapshot, fabric=replace(snapshot.fabric, pkeys_per_port=4))

    verdict = verify_isolation(tight)

    budget = [c for c in verdict.counterexamples if c.rule is Rule.PKEY_BUDGET]
    assert {c.a.node for c in budget} == {"gpu04"}  # type: ignore[union-attr]
    assert "needs 5 P_Keys" in budget[0].message
    assert verify_isolation(fab.ib_snapshot()).holds  # without the peering int-a needs 4


def test_a_deployed_peering_partition_keeps_its_peering():
    intended = fab.ib_snapshot(peerings=(fab.INT_PEERING,))
    deployed = deployed_snapshot(intended, parse_partitions_conf(render_partitions(intended)))

    assert peering_partition(deployed.partitions).peering == fab.INT_PEERING
    assert deployed.digest == intended.digest


# --- RoCE: route-target imports -------------------------------------------------------------------


def vrf_of(snapshot_segments: tuple[object, ...], owner: Owner) -> object:
    return next(s for s in snapshot_segments if s.owner == owner)  # type: ignore[attr-defined]


def test_a_peering_makes_each_vrf_import_the_others_l3vni_rt():
    snapshot = fab.roce_snapshot(peerings=(fab.INT_PEERING,))
    a, b = Owner.tenant("int-a"), Owner.tenant("int-b")
    rt_a, rt_b = (route_target(65000, fab.l3vni(o)) for o in (a, b))

    assert rt_b in vrf_of(snapshot.segments, a).imports  # type: ignore[attr-defined]
    assert vrf_of(snapshot.segments, b).imports == (rt_a,)  # type: ignore[attr-defined]


def test_the_rendered_frr_conf_shows_the_peering_imports_and_parses_cleanly():
    snapshot = fab.roce_snapshot(peerings=(fab.INT_PEERING,))

    text = render_frr_conf(snapshot, "leaf-g2-r0")

    int_b_vrf = text.split("router bgp 65103 vrf Vrf50004\n")[1].split("exit\n")[0]
    assert "  ! peering tenant:int-a <-> tenant:int-b\n  route-target import 65000:50003\n" in (
        int_b_vrf
    )
    int_a_vrf = text.split("router bgp 65103 vrf Vrf50003\n")[1].split("exit\n")[0]
    assert "  route-target import 65000:50004\n" in int_a_vrf
    # The parser's only remarks are informational, one per imported RT (grants' alike).
    findings = parse_frr_conf(text).findings
    assert {(f.code, f.severity) for f in findings} == {("import-without-export", Severity.INFO)}
    assert "Vrf50004|65000:50003" in {f.key for f in findings}


def test_the_frr_renderer_refuses_imports_of_a_peering_the_policy_does_not_allow():
    not_allowed = Peering("ext-a", "int-a")
    snapshot = fab.roce_snapshot(peerings=(not_allowed,))

    with pytest.raises(InvalidValueError, match="no grant or peering"):
        render_frr_conf(snapshot, "leaf-g1-r0")


def test_an_frr_audit_accepts_an_accepted_peerings_imports_and_refutes_them_once_ended():
    peered = fab.roce_snapshot(peerings=(fab.INT_PEERING,))
    text = render_frr_conf(peered, "leaf-g2-r0")

    report = audit_frr(peered, "leaf-g2-r0", text)
    ended = audit_frr(fab.roce_snapshot(), "leaf-g2-r0", text)

    assert report.counterexamples == ()
    a, b = Owner.tenant("int-a"), Owner.tenant("int-b")
    assert {(e.source, e.target, e.allowed) for e in report.reachability} >= {
        (a, b, True),
        (b, a, True),
    }
    assert {(c.rule, c.a.owner, c.b.owner) for c in ended.counterexamples} == {  # type: ignore[union-attr]
        (Rule.CROSS_TENANT, a, b),
        (Rule.CROSS_TENANT, b, a),
    }
