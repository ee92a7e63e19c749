"""What a drain waits for and which leaves no target covers (policies/enforcement.py)."""

from __future__ import annotations

from policies.enforcement import Enforcement, drain_wait, enforced_up_to, untargeted
from policies.model import FabricKind

IB, ROCE = FabricKind.INFINIBAND, FabricKind.ROCE


def test_infiniband_needs_every_target_to_hold_it_and_a_masters_read_back():
    master = Enforcement("sm-a", held=7, observed=7)
    standby = Enforcement("sm-b", held=5, observed=None)

    assert enforced_up_to(IB, [master, standby]) == 5
    assert enforced_up_to(IB, [Enforcement("sm-a", held=7, observed=None)]) is None
    assert enforced_up_to(IB, [master, Enforcement("sm-b", held=None, observed=None)]) is None
    assert enforced_up_to(IB, []) is None


def test_roce_needs_every_leafs_read_back():
    leaves = [Enforcement("leaf01", held=9, observed=8), Enforcement("leaf02", held=9, observed=6)]

    assert enforced_up_to(ROCE, leaves) == 6
    assert enforced_up_to(ROCE, [*leaves, Enforcement("leaf03", held=9, observed=None)]) is None


def test_untargeted_leaves_are_those_no_target_is_named_after():
    assert untargeted(["leaf03", "leaf01", "leaf03"], ["leaf01", "leaf02"]) == ("leaf03",)
    assert untargeted([], ["leaf01"]) == ()


def test_a_roce_drain_names_the_hosts_leaves_without_a_target_and_the_way_out():
    leaves = [Enforcement("leaf01", held=9, observed=9), Enforcement("leaf02", held=9, observed=4)]

    wait = drain_wait(ROCE, leaves, 5, host_leaves=["leaf01", "leaf03"])

    assert (wait.waiting_for, wait.untargeted) == (("leaf02",), ("leaf03",))
    assert wait.reason.startswith("leaf leaf03 carries the host's ports and has no deploy target")
    assert "force-drain" in wait.reason and "waiting for leaf02 to read back" in wait.reason


def test_an_infiniband_drain_waits_for_holders_and_a_masters_read_back():
    targets = [Enforcement("sm-a", held=5, observed=4), Enforcement("sm-b", held=3, observed=None)]

    wait = drain_wait(IB, targets, 5, host_leaves=["ignored"])

    assert (wait.waiting_for, wait.untargeted) == (("sm-b",), ())
    assert wait.reason == (
        "waiting for sm-b to hold a snapshot without the node's previous owner; waiting for a "
        "master's read-back to match a snapshot without the node's previous owner"
    )


def test_a_drain_whose_removal_is_enforced_says_so_and_an_unstamped_one_waits_for_all():
    leaves = [Enforcement("leaf01", held=5, observed=5)]

    assert drain_wait(ROCE, leaves, 5, ["leaf01"]).reason.startswith("every target enforces")
    assert drain_wait(ROCE, leaves, None, ["leaf01"]).waiting_for == ("leaf01",)
    plural = drain_wait(ROCE, [], 5, ["leaf02", "leaf01"])
    assert plural.reason.startswith("leaves leaf01, leaf02 carry the host's ports and have no")
