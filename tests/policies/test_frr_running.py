"""Read-back comparison and phase-1 texts: policies/roce/frr_running.py.

``data/frr-running-leaf01.txt`` is ``vtysh -c 'show running-config'`` of FRR 8.4.4 (zebra and
bgpd in a network namespace) after ``frr-reload.py --reload`` of leaf01's rendered frr.conf:
FRR's own order (networks before ``activate``, L2VNI blocks reversed, RT imports sorted), its
banner, ``frr version`` and ``service integrated-vtysh-config``, no comments.
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path

import pytest

from policies.roce.frr_running import (
    removed_imports,
    running_differences,
    with_new_vrfs,
    without_imports,
)
from policies.roce.render_frr import render_frr_conf
from tests.policies.roce_snapshots import roce_snapshot

RUNNING = (Path(__file__).parent / "data" / "frr-running-leaf01.txt").read_text()
STORAGE_EVPN = "router bgp 65101 vrf Vrf50000 > address-family l2vpn evpn"
ACME_EVPN = "router bgp 65101 vrf Vrf50001 > address-family l2vpn evpn"


def leaf01() -> str:
    return render_frr_conf(roce_snapshot(), "leaf01")


def revoked() -> str:
    return render_frr_conf(roce_snapshot(grants=()), "leaf01")


def test_the_running_config_of_the_deployed_file_matches_it():
    assert running_differences(leaf01(), RUNNING) == []


def test_a_lost_l2vni_and_a_missing_rt_import_are_named_with_their_blocks():
    running = RUNNING.replace("  vni 10001\n", "  vni 10009\n").replace(
        "  route-target import 65000:50001\n  route-target export 65000:50000\n",
        "  route-target export 65000:50000\n",
    )

    differences = running_differences(leaf01(), running)

    assert f"{STORAGE_EVPN} > route-target import 65000:50001" in differences
    evpn = "router bgp 65101 > address-family l2vpn evpn"
    assert f"{evpn} > vni 10001 > rd 10.0.1.1:2" in differences
    assert f"{evpn} > vni 10009 > rd 10.0.1.1:2" in differences
    assert f"{evpn} > vni 10001" in differences
    assert differences == sorted(differences)


def test_a_vni_at_the_top_level_instead_of_in_its_vrf_is_a_difference():
    # The reload bug of the issue: `vrf VrfN` read as bgp's vrf-policy, ` vni N` lost.
    running = RUNNING.replace("vrf Vrf50002\n vni 50002\nexit-vrf\n", "")

    assert running_differences(leaf01(), running) == ["vrf Vrf50002", "vrf Vrf50002 > vni 50002"]


def test_an_extra_bgp_line_in_running_is_a_difference_but_foreign_blocks_are_not():
    running = RUNNING.replace(
        " no bgp default ipv4-unicast\n",
        " no bgp default ipv4-unicast\n bgp ebgp-requires-policy\n",
    )
    running += "interface eth0\n description mgmt\nexit\nip forwarding\nfpm address 127.0.0.1\n"
    running = running.replace("hostname leaf01", "hostname sonic\nlog syslog informational")

    assert running_differences(leaf01(), running) == ["router bgp 65101 > bgp ebgp-requires-policy"]


def test_comments_blank_lines_spacing_and_block_order_do_not_count():
    intended = leaf01()
    blocks_reversed = "\n!\n".join(reversed(intended.split("\n!\n")))

    assert running_differences(intended, intended.replace("  rd ", "  rd  ")) == []
    assert running_differences(intended, RUNNING + "\n\n! a comment\n") == []
    assert running_differences(blocks_reversed, RUNNING) == []
    assert running_differences(intended.replace(" vni 50001\n", ""), RUNNING) == [
        "vrf Vrf50001 > vni 50001"
    ]


def test_revoking_the_grant_removes_the_leak_on_both_sides():
    assert removed_imports(leaf01(), revoked()) == [
        (STORAGE_EVPN, "65000:50001"),
        (ACME_EVPN, "65000:50000"),
    ]
    assert removed_imports(revoked(), leaf01()) == []
    assert removed_imports(leaf01(), leaf01()) == []


def test_a_vrf_leaving_the_leaf_loses_all_its_imports_including_its_own():
    target = "\n".join(line for line in leaf01().splitlines() if "Vrf50002" not in line)
    globex = "router bgp 65101 vrf Vrf50002 > address-family l2vpn evpn"

    assert removed_imports(leaf01(), target) == [(globex, "65000:50002")]


def test_l2vni_imports_are_compared_per_vni_block():
    current = leaf01()
    target = current.replace("   route-target import 65000:10001\n", "")
    block = "router bgp 65101 > address-family l2vpn evpn > vni 10001"

    assert removed_imports(current, target) == [(block, "65000:10001")]


def test_phase_one_text_drops_the_revoked_imports_and_their_labels_only():
    current = leaf01()

    phase_one = without_imports(current, revoked())

    diff = difflib.ndiff(current.splitlines(), phase_one.splitlines())
    assert [line for line in diff if not line.startswith("  ")] == [
        "-   ! grant tenant:acme -> service:storage",
        "-   route-target import 65000:50001",
        "-   ! grant tenant:acme -> service:storage",
        "-   route-target import 65000:50000",
    ]
    assert phase_one.endswith("end\n")
    assert removed_imports(phase_one, revoked()) == []
    assert running_differences(phase_one, revoked()) == []


def test_phase_one_text_is_the_same_bytes_when_nothing_is_revoked():
    current = leaf01()
    crlf = current.replace("\n", "\r\n")

    assert without_imports(current, current) == current
    assert without_imports(crlf, crlf) == crlf
    assert without_imports(current, revoked()).count("\n") == current.count("\n") - 4


@pytest.mark.parametrize("comment", ["  ! tenant:acme", "  !", " ! grant tenant:acme -> x"])
def test_only_a_label_comment_at_the_same_indentation_is_dropped_with_its_import(comment):
    current = leaf01().replace(
        "  ! grant tenant:acme -> service:storage\n  route-target import 65000:50001\n",
        f"{comment}\n  route-target import 65000:50001\n",
    )

    phase_one = without_imports(current, revoked())

    assert comment in phase_one.splitlines()
    assert "route-target import 65000:50001\n  route-target export 65000:50000" not in phase_one


def only_storage() -> str:
    snapshot = roce_snapshot(grants=())
    nodes = tuple(
        n if n.name == "stor01" else dataclasses.replace(n, owners=()) for n in snapshot.nodes
    )
    return render_frr_conf(dataclasses.replace(snapshot, nodes=nodes), "leaf01")


def test_the_first_reload_step_adds_only_the_new_vrf_blocks_before_router_bgp():
    current, target = only_storage(), leaf01()

    step = with_new_vrfs(current, target)

    new_blocks = "vrf Vrf50001\n vni 50001\nexit-vrf\n!\nvrf Vrf50002\n vni 50002\nexit-vrf\n!\n"
    assert step == current.replace("router bgp 65101\n", new_blocks + "router bgp 65101\n", 1)
    assert step.index("vrf Vrf50002") < step.index("router bgp 65101\n")
    assert running_differences(step, current) == [
        "vrf Vrf50001", "vrf Vrf50001 > vni 50001", "vrf Vrf50002", "vrf Vrf50002 > vni 50002",
    ]  # fmt: skip


def test_no_new_vrf_leaves_the_text_as_it_is():
    assert with_new_vrfs(leaf01(), only_storage()) == leaf01()
    assert with_new_vrfs(leaf01(), leaf01()) == leaf01()


def test_new_vrfs_go_before_end_or_at_the_end_without_router_bgp():
    target = leaf01()

    assert with_new_vrfs("hostname leaf01\nend\n", target).endswith("exit-vrf\n!\nend\n")
    appended = with_new_vrfs("hostname leaf01", target)
    assert appended.startswith("hostname leaf01\nvrf Vrf50000\n vni 50000\nexit-vrf\n!\n")
