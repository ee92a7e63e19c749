"""Conformance: a peering's route-target imports (issue 13) pass FRR's offline checkers.

The rail fabric of tests/policies/policy_fabrics.py with an accepted internal peering: every
leaf's rendered frr.conf goes through ``vtysh -C`` and bgpd's dry run (see test_frr.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.roce.render_frr import render_frr_conf
from tests.policies import policy_fabrics as fab

from .test_frr import FrrTools, frr, unexpected, write

pytestmark = pytest.mark.conformance

__all__ = ["frr"]  # the fixture, shared with test_frr.py

# Group 2's leaves carry both peers (int-a on gpu04, int-b on gpu05).
PEERED_LEAVES = ("leaf-g2-r0", "leaf-g2-r1")


@pytest.fixture(params=PEERED_LEAVES)
def peered(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    snapshot = fab.roce_snapshot(peerings=(fab.INT_PEERING,))
    text = render_frr_conf(snapshot, str(request.param))
    assert "route-target import 65000:50003" in text  # int-b imports int-a's L3VNI RT
    assert "route-target import 65000:50004" in text  # and int-a imports int-b's
    return write(tmp_path, f"{request.param}.conf", text)


def test_vtysh_accepts_a_leaf_with_peering_imports(frr: FrrTools, peered: Path) -> None:
    done = frr.vtysh_check(peered)

    assert done.returncode == 0, done.stdout + done.stderr


def test_bgpd_dry_run_accepts_the_peering_imports(frr: FrrTools, peered: Path) -> None:
    lines = frr.bgpd_dry_run(peered)

    assert not [line for line in lines if "% Malformed" in line]
    assert unexpected(lines) == []
