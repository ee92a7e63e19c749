"""A file's bytes change only when its own content does: no artifact carries the snapshot digest.

Every SM sweep and every leaf reload is triggered by a changed file, so a change confined to one
tenant (InfiniBand) or one leaf (RoCE) must leave every other file byte-identical.
"""

from __future__ import annotations

import dataclasses
from ipaddress import IPv4Network

from policies.artifacts import Artifact
from policies.infiniband.render import SubnetManagerKeys, render_opensm_artifacts
from policies.model import Node, NodeRole, Owner
from policies.roce.bundle import render_roce_artifacts
from policies.roce.model import RoceSnapshot, VrfSegment
from tests.policies import roce_snapshots
from tests.policies.snapshots import two_tenant_nodes, two_tenant_snapshot

KEYS = SubnetManagerKeys(m_key=0x11, sm_key=0x22, sa_key=0x33)


def by_path(files: tuple[Artifact, ...]) -> dict[str, bytes]:
    return {f.path: f.content for f in files}


def digest_hex(digest: str) -> bytes:
    return digest.removeprefix("v2:").encode()


def test_no_opensm_file_carries_the_snapshot_digest():
    snapshot = two_tenant_snapshot()

    for path, content in by_path(render_opensm_artifacts(snapshot, KEYS)).items():
        assert digest_hex(snapshot.digest) not in content, path
        assert b"snapshot" not in content, path


def test_no_roce_file_carries_the_snapshot_digest():
    snapshot = roce_snapshots.roce_snapshot()

    for path, content in by_path(render_roce_artifacts(snapshot)).items():
        assert digest_hex(snapshot.digest) not in content, path
        assert b"snapshot" not in content, path


def test_a_change_to_one_tenants_partition_rewrites_partitions_conf_only():
    # globex is allocated the free gpu0004: its partition gains two ports, nothing else changes.
    before = two_tenant_snapshot()
    nodes = tuple(
        Node(n.name, n.role, (Owner.tenant("globex"),)) if n.name == "gpu0004" else n
        for n in two_tenant_nodes()
    )
    after = two_tenant_snapshot(nodes=nodes)
    changed = {p.pkey for p in set(after.partitions) ^ set(before.partitions)}
    assert changed == {0x0102} and before.digest != after.digest

    old, new = (by_path(render_opensm_artifacts(s, KEYS)) for s in (before, after))

    assert new["opensm/opensm.conf"] == old["opensm/opensm.conf"]
    assert new["opensm/qos-policy.conf"] == old["opensm/qos-policy.conf"]
    assert new["opensm/partitions.conf"] != old["opensm/partitions.conf"]


def single_homed(snapshot: RoceSnapshot, host: str, leaf: str) -> RoceSnapshot:
    """`snapshot` with `host` wired to `leaf` only (its NICs on other leaves removed)."""
    nics = tuple(n for n in snapshot.nics if n.node != host or n.switch == leaf)
    return dataclasses.replace(snapshot, nics=nics)


def owned_by(snapshot: RoceSnapshot, host: str, owner: Owner) -> RoceSnapshot:
    nodes = tuple(
        Node(n.name, NodeRole.COMPUTE, (owner,)) if n.name == host else n for n in snapshot.nodes
    )
    return dataclasses.replace(snapshot, nodes=nodes)


def files_of(snapshot: RoceSnapshot, leaf: str) -> dict[str, bytes]:
    return {
        path: content
        for path, content in by_path(render_roce_artifacts(snapshot)).items()
        if f"/{leaf}/" in path
    }


def test_a_node_allocated_on_one_leaf_leaves_the_other_leafs_files_byte_identical():
    # gpu0004 is wired to leaf01 only; allocating it to globex (present on both leaves already)
    # adds a VLAN member on leaf01 and changes nothing on leaf02.
    before = single_homed(roce_snapshots.roce_snapshot(), "gpu0004", "leaf01")
    after = owned_by(before, "gpu0004", Owner.tenant("globex"))
    assert before.digest != after.digest

    assert files_of(after, "leaf02") == files_of(before, "leaf02")
    assert (
        files_of(after, "leaf01")["sonic/leaf01/config_db.json"]
        != files_of(before, "leaf01")["sonic/leaf01/config_db.json"]
    )


def test_a_new_tenant_on_one_leaf_leaves_the_other_leafs_files_byte_identical():
    # A new tenant whose only node sits on leaf01: a new VRF, VLANs and BGP instance on leaf01.
    base = single_homed(roce_snapshots.roce_snapshot(), "gpu0004", "leaf01")
    segment = VrfSegment(
        Owner.tenant("initech"),
        "Vrf50003",
        50003,
        3003,
        103,
        10003,
        IPv4Network("10.64.3.0/24"),
        4,
        "silver",
    )
    after = owned_by(
        dataclasses.replace(base, segments=(*base.segments, segment)),
        "gpu0004",
        Owner.tenant("initech"),
    )

    assert files_of(after, "leaf02") == files_of(base, "leaf02")
    before01, after01 = files_of(base, "leaf01"), files_of(after, "leaf01")
    ownership = "sonic/leaf01/ownership.json"  # the pools and cabled ports: not the tenants
    assert after01[ownership] == before01[ownership]
    assert all(after01[path] != before01[path] for path in before01 if path != ownership)
    assert b"Vrf50003" in after01["frr/leaf01/frr.conf"]
