"""The phased rollout's pure rules (policies/roce/rollout.py): which leaf must remove access,
which phase a leaf applied, and which phase the fabric publishes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.errors import InvalidValueError
from policies.roce.rollout import (
    LeafFiles,
    TargetProgress,
    applied_phase,
    fabric_phase,
    removes_access,
)
from tests.policies.test_roce_ownership import OWNERSHIP

MEMBER = {"tagging_mode": "untagged"}
BASE: dict[str, Any] = {
    "PORT": {"Ethernet0": {"mtu": "9100"}, "Ethernet8": {"mtu": "9100"}},
    "VLAN": {"Vlan100": {"vlanid": "100"}, "Vlan102": {"vlanid": "102"}},
    "VLAN_MEMBER": {"Vlan100|Ethernet0": MEMBER, "Vlan102|Ethernet8": MEMBER},
}
FRR = """router bgp 65101 vrf Vrf50001
 address-family l2vpn evpn
  route-target import 65000:50001
  ! grant tenant:acme -> service:storage
  route-target import 65000:50000
  route-target export 65000:50001
 exit-address-family
exit
"""
FRR_REVOKED = FRR.replace(
    "  ! grant tenant:acme -> service:storage\n  route-target import 65000:50000\n", ""
)


def files(config: dict[str, Any], frr: str = FRR) -> LeafFiles:
    return LeafFiles(json.dumps(config), frr, OWNERSHIP.to_json())


def without_member(key: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(json.dumps(BASE))
    del config["VLAN_MEMBER"][key]
    return config


def test_nothing_removed_is_no_access_removal():
    assert removes_access(files(BASE), files(BASE)) is False


def test_an_addition_is_no_access_removal():
    grown = json.loads(json.dumps(BASE))
    grown["VLAN_MEMBER"]["Vlan102|Ethernet0"] = MEMBER
    frr = FRR.replace(
        "  route-target export", "  route-target import 65000:50009\n  route-target export"
    )

    assert removes_access(files(BASE), files(grown, frr)) is False


def test_a_port_leaving_a_tenant_vlan_removes_access():
    assert removes_access(files(BASE), files(without_member("Vlan102|Ethernet8"))) is True


def test_a_revoked_route_target_import_removes_access():
    assert removes_access(files(BASE), files(BASE, FRR_REVOKED)) is True


def test_a_vlan_member_isofabric_does_not_own_is_not_its_removal():
    foreign = json.loads(json.dumps(BASE))
    foreign["VLAN_MEMBER"]["Vlan10|Ethernet0"] = MEMBER  # VLAN 10 is outside the VLAN range

    assert removes_access(files(foreign), files(BASE)) is False


def test_a_malformed_ownership_document_is_refused():
    with pytest.raises(InvalidValueError):
        removes_access(files(BASE), LeafFiles(json.dumps(BASE), FRR, "{}"))


@pytest.mark.parametrize(
    ("deployed", "phase", "phase_digest", "expected"),
    [
        ("d2", None, None, 2),  # holds the desired snapshot
        ("d2", 1, "d2", 2),  # a phase 1 after it holds it changes nothing
        ("d1", 1, "d2", 1),
        ("d1", 2, "d1", None),  # a phase of another snapshot
        ("d1", None, None, None),
        (None, None, None, None),
    ],
)
def test_the_phase_a_leaf_applied_is_of_the_desired_snapshot_only(
    deployed, phase, phase_digest, expected
):
    found = applied_phase(desired="d2", deployed=deployed, phase=phase, phase_digest=phase_digest)

    assert found == expected


def test_the_fabric_is_in_phase_1_while_an_affected_leaf_applied_neither_phase():
    waiting = TargetProgress(affected=True, applied_phase=None)
    removed = TargetProgress(affected=True, applied_phase=1)
    down_but_unaffected = TargetProgress(affected=False, applied_phase=None)

    assert fabric_phase([]) == 2
    assert fabric_phase([down_but_unaffected]) == 2
    assert fabric_phase([removed, down_but_unaffected]) == 2
    assert fabric_phase([removed, waiting, down_but_unaffected]) == 1
    assert fabric_phase([TargetProgress(affected=True, applied_phase=2)]) == 2
