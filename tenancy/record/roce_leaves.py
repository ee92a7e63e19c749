"""The RoCE leaves hosts are cabled to: those that carry owners' ports, and each host's leaves.

A leaf carries an owner's ports when a node a tenant or a shared service holds has a NIC on it:
the leaf's rendered files put those ports in the owner's VLAN and its VRF on the leaf
(`policies.roce.sonic_leaf`). The rows are read in the caller's transaction, so they are the
snapshot its snapshot log's newest digest names. Every statement follows an index: held nodes by
fabric, NICs by node, switch ports and switches by id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from typing import Any

from sqlalchemy import Select, bindparam, select
from sqlmodel import Session, col

from policies.roce.model import SwitchRole
from tenancy import models as m


def carrying_leaves(session: Session, fabric_id: int | None = None) -> dict[int, list[str]]:
    """The leaves that carry held nodes' ports, sorted, by fabric id (`fabric_id`'s, or all).

    A fabric whose leaves carry no held node's port (or an InfiniBand fabric) is left out.
    """
    connection = session.connection()
    if fabric_id is None:
        rows = connection.execute(_CARRYING)
    else:
        rows = connection.execute(_CARRYING_ON_FABRIC, {"fabric": fabric_id})
    found: dict[int, list[str]] = defaultdict(list)
    for fabric, leaf in rows:
        found[int(fabric)].append(leaf)
    return {fabric: sorted(leaves) for fabric, leaves in found.items()}


def host_leaves(session: Session, node_ids: Collection[int]) -> dict[int, set[str]]:
    """The leaves each of the nodes has a NIC on, by node id (a node without NICs is left out)."""
    if not node_ids:
        return {}
    found: dict[int, set[str]] = defaultdict(set)
    for node_id, leaf in session.connection().execute(_HOST_LEAVES, {"ids": list(node_ids)}):
        found[int(node_id)].add(leaf)
    return dict(found)


def _on_leaves(query: Select[Any, str]) -> Select[Any, str]:
    """`query` (from NICs) joined to each NIC's switch port and switch, leaves only."""
    return (
        query.join(m.RoceSwitchPort, col(m.RoceSwitchPort.id) == col(m.Nic.switch_port_id))
        .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
        .where(col(m.RoceSwitch.role) == SwitchRole.LEAF.value)
    )


# Built once. Held nodes first (their assignment rows), then their NICs.
_CARRYING = _on_leaves(
    select(col(m.Node.fabric_id), col(m.RoceSwitch.name))
    .select_from(m.NodeAssignment)
    .join(m.Node, col(m.Node.id) == col(m.NodeAssignment.node_id))
    .join(m.Nic, col(m.Nic.node_id) == col(m.Node.id))
).distinct()
_CARRYING_ON_FABRIC = _CARRYING.where(col(m.Node.fabric_id) == bindparam("fabric"))
_HOST_LEAVES = _on_leaves(
    select(col(m.Nic.node_id), col(m.RoceSwitch.name))
    .select_from(m.Nic)
    .where(col(m.Nic.node_id).in_(bindparam("ids", expanding=True)))
)
