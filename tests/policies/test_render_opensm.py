"""OpenSM renderers: golden files (reviewed by hand) and the hazards they must never produce."""

from __future__ import annotations

import dataclasses
import re

import pytest

from policies.errors import ArtifactHazardError, InvalidValueError
from policies.infiniband.model import Member, Partition
from policies.infiniband.parse_partitions import MAX_LINE_BYTES
from policies.infiniband.render import (
    DEFAULT_STATEMENT,
    SubnetManagerKeys,
    render_opensm_artifacts,
    render_opensm_options,
    render_partitions_conf,
    render_qos_policy,
)
from policies.model import Owner
from tests.golden import assert_golden
from tests.policies.snapshots import two_tenant_snapshot, with_partitions

KEYS = SubnetManagerKeys(
    m_key=0x1122334455667788, sm_key=0x0A0B0C0D0E0F1011, sa_key=0x2122232425262728
)


def test_partitions_conf_matches_the_reviewed_golden_file():
    assert_golden("partitions.conf", render_partitions_conf(two_tenant_snapshot()))


def test_qos_policy_matches_the_reviewed_golden_file():
    assert_golden("qos-policy.conf", render_qos_policy(two_tenant_snapshot()))


def test_opensm_options_match_the_reviewed_golden_file():
    assert_golden("opensm.conf", render_opensm_options(two_tenant_snapshot(), KEYS))


def test_rendering_is_byte_identical_for_equal_state():
    first = render_opensm_artifacts(two_tenant_snapshot(), KEYS)
    again = render_opensm_artifacts(two_tenant_snapshot(), KEYS)

    assert [a.content for a in first] == [a.content for a in again]
    assert [a.path for a in first] == [
        "opensm/opensm.conf",
        "opensm/partitions.conf",
        "opensm/qos-policy.conf",
    ]


def test_member_order_in_the_snapshot_does_not_change_the_file():
    snapshot = two_tenant_snapshot()
    shuffled = dataclasses.replace(
        snapshot,
        partitions=tuple(
            dataclasses.replace(p, members=tuple(reversed(p.members)))
            for p in reversed(snapshot.partitions)
        ),
    )

    assert render_partitions_conf(shuffled) == render_partitions_conf(snapshot)


def test_partitions_conf_has_the_explicit_default_and_one_member_per_line():
    text = render_partitions_conf(two_tenant_snapshot())

    assert DEFAULT_STATEMENT in text.splitlines()
    member_lines = [line for line in text.splitlines() if line.startswith("    ")]
    assert len(member_lines) == 12
    pattern = re.compile(r"    0x[0-9a-f]{16}=(full|limited)( ;|,)")
    assert all(pattern.fullmatch(line) for line in member_lines)


def test_partition_without_members_is_left_out():
    empty = Partition(0x0110, Owner.tenant("idle"), ())

    assert "0x0110" not in render_partitions_conf(with_partitions(two_tenant_snapshot(), empty))


def test_a_thousand_member_partition_keeps_every_line_under_the_opensm_limit():
    big = Partition(
        0x0120,
        Owner.tenant("big"),
        tuple(Member(0x0002C90300100000 + i, True) for i in range(1000)),
    )

    text = render_partitions_conf(with_partitions(two_tenant_snapshot(), big))

    assert max(len(line.encode()) for line in text.splitlines()) < MAX_LINE_BYTES
    assert text.count("=full") >= 1000


def test_qos_policy_never_uses_ipoib_pkey_rules():
    # OpenSM drops the whole policy if an 'ipoib, pkey' partition has < 2 full members (§3.4).
    text = render_qos_policy(two_tenant_snapshot())

    assert "ipoib" not in text
    assert "    any, pkey 0x0101 : 3" in text.splitlines()
    assert "    default : 0" in text.splitlines()


def test_options_enable_qos_enforcement_key_protection_and_log_flushing():
    lines = render_opensm_options(two_tenant_snapshot(), KEYS).splitlines()

    for expected in (
        "qos TRUE",
        "part_enforce both",
        "m_key_protection_level 2",
        "m_key 0x1122334455667788",
        "sm_key 0x0a0b0c0d0e0f1011",
        "sa_key 0x2122232425262728",
        "max_op_vls 4",
        "force_log_flush TRUE",  # the deploy agent waits for SUBNET UP in the log
    ):
        assert expected in lines
    assert not any(line.startswith("qos_max_vls") for line in lines)  # no effect in OpenSM 3.3


def test_vlarb_low_weights_come_from_the_classes():
    lines = render_opensm_options(two_tenant_snapshot(), KEYS).splitlines()

    # gold SL 3 -> VL 3 weight 128, bronze SL 1 -> VL 1 weight 16, VL0 keeps the default share.
    assert "qos_vlarb_low 0:16,1:16,3:128" in lines


@pytest.mark.parametrize(
    "keys",
    [
        {"m_key": 0, "sm_key": 5, "sa_key": 5},
        {"m_key": 7, "sm_key": 1, "sa_key": 5},
        {"m_key": 7, "sm_key": 5, "sa_key": 0},
        {"m_key": 2**64, "sm_key": 5, "sa_key": 5},
    ],
)
def test_default_or_disabled_management_keys_are_refused(keys):
    with pytest.raises(InvalidValueError):
        SubnetManagerKeys(**keys)


def test_keys_never_show_in_repr():
    assert "1122334455667788" not in repr(KEYS) and "287454020" not in repr(KEYS)


def test_bundle_refuses_a_partitions_file_that_opensm_would_discard(monkeypatch):
    # Safety net: if a renderer defect ever produced a file OpenSM falls back from, emit nothing.
    import policies.infiniband.render as render

    monkeypatch.setattr(
        render, "render_partitions_conf", lambda _s: "Default=0x7fff : 0002c9=full ;\n"
    )

    with pytest.raises(ArtifactHazardError, match=r"guid-without-0x|bad-member"):
        render_opensm_artifacts(two_tenant_snapshot(), KEYS)


def _with_additional(*, ipoib: bool, index0: bool) -> str:
    extra = Partition(
        0x0104,
        Owner.tenant("acme"),
        (Member(0x0002C90300001000, True), Member(0x0000000000ABCDEF, False)),
        "gold",
        label="storage",
        ipoib=ipoib,
        index0=index0,
    )
    return render_partitions_conf(with_partitions(two_tenant_snapshot(), extra))


def test_an_additional_partition_has_its_name_and_flags_and_keeps_the_qos_flags():
    text = _with_additional(ipoib=False, index0=True)

    assert "part_acme_storage=0x0104, indx0, mtu=4, rate=3, sl=3 :" in text.splitlines()
    assert "    0x0000000000abcdef=limited," in text.splitlines()


def test_ipoib_and_indx0_together():
    text = _with_additional(ipoib=True, index0=True)

    assert "part_acme_storage=0x0104, ipoib, indx0, mtu=4, rate=3, sl=3 :" in text.splitlines()


def test_a_partition_without_any_flag_has_a_bare_definition():
    extra = Partition(0x0104, Owner.tenant("acme"), (Member(1, True),), label="x", ipoib=False)

    text = render_partitions_conf(with_partitions(two_tenant_snapshot(), extra))

    assert "part_acme_x=0x0104 :" in text.splitlines()


def test_options_enable_virtualization_only_when_the_fabric_has_virtual_guids():
    snapshot = two_tenant_snapshot()
    virtual = dataclasses.replace(
        snapshot, fabric=dataclasses.replace(snapshot.fabric, virtual_guids=True)
    )

    plain = render_opensm_options(snapshot, KEYS)
    enabled = render_opensm_options(virtual, KEYS)

    assert "virt_enabled" not in plain
    assert enabled == plain + "virt_enabled 2\n"
