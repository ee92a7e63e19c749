"""Drain before reuse: a released node turns free only once every deploy target enforces it.

A node a tenant released stays ``draining`` until the files without it are enforced: the
reports of its fabric's targets say so (tenancy/usecases/deploy.py stores them), or an operator
forces it with a reason (audited). On RoCE that includes the host's own leaves: one without a
target keeps the drain waiting, whatever the other leaves read back. `drain_waits` says what each
drain still waits for (the node view's `drain`).
A quarantined identifier (a P_Key, a VLAN, a VNI) waits for the same read-backs
(tenancy/record/quarantine.py).
"""

from __future__ import annotations

from collections.abc import Collection

from sqlmodel import Session, col, select

from policies.enforcement import (
    DrainWait,
    Enforcement,
    drain_wait,
    enforced_up_to,
    untargeted,
)
from policies.model import FabricKind
from policies.node_state import NodeState
from tenancy import models as m
from tenancy.record import audit_log, virtual_guids
from tenancy.record.node_states import finish_drains, free_drained
from tenancy.record.quarantine import end_read_back
from tenancy.record.roce_leaves import host_leaves
from tenancy.schemas import ForceDrain
from tenancy.store.locks import lock_fabric
from tenancy.store.lookups import fabric_named, node_named
from tenancy.store.uow import Tx, UnitOfWork


def fabric_targets(session: Session, fabric_id: int) -> list[m.DeployTarget]:
    """The fabric's deploy targets by name."""
    query = select(m.DeployTarget).where(m.DeployTarget.fabric_id == fabric_id)
    return list(session.exec(query.order_by(col(m.DeployTarget.name))))


# Where no target is left, nothing enforces the files: every drain ends.
EVERY_SNAPSHOT = 2**31 - 1  # an INTEGER column: above any snapshot id


def finish_target_drains(tx: Tx, fabric: m.Fabric) -> list[str]:
    """Free the draining nodes whose removal the targets enforce, as `policies.enforcement` says.

    What the fabric enforces is observed, never assumed from files alone: an OpenSM master's
    read-back, every RoCE leaf's. On RoCE a host cabled to a leaf without a target stays
    draining whatever the other leaves report (nothing reads that leaf back); an operator's
    force-drain ends it. When the fabric's last target is gone, every drain ends: nothing
    enforces its files any more, as on a fabric that never had a target.
    """
    targets = fabric_targets(tx.session, m.pk(fabric))
    ready = enforced_up_to(FabricKind(fabric.kind), _enforcement_of(targets))
    uncovered = _on_untargeted_leaves(tx.session, fabric, targets, ready)
    end_read_back(tx.session, m.pk(fabric), ready)
    virtual_guids.end_read_back(tx.session, m.pk(fabric), ready if targets else EVERY_SNAPSHOT)
    freed = finish_drains(tx.session, m.pk(fabric), applied_everywhere=ready, waiting=uncovered)
    if not targets:
        freed = free_drained(tx.session, _draining(tx.session, m.pk(fabric)))
    for name in freed:
        audit_log.record(tx, "node.drained", f"fabrics/{fabric.name}/nodes/{name}")
    return freed


def _enforcement_of(targets: list[m.DeployTarget]) -> list[Enforcement]:
    """What each target enforces, as the engine's rule reads it."""
    return [Enforcement(t.name, t.applied_snapshot_id, t.observed_snapshot_id) for t in targets]


def _on_untargeted_leaves(
    session: Session, fabric: m.Fabric, targets: list[m.DeployTarget], ready: int | None
) -> list[int]:
    """RoCE: the draining nodes `ready` would free that are cabled to a leaf without a target."""
    if ready is None or fabric.kind != FabricKind.ROCE:
        return []
    names = [t.name for t in targets]
    nodes = [m.pk(n) for n in _draining(session, m.pk(fabric), up_to=ready)]
    leaves = host_leaves(session, nodes)
    return [n for n in nodes if untargeted(leaves.get(n, ()), names)]


def _draining(session: Session, fabric_id: int, up_to: int | None = None) -> list[m.Node]:
    """The fabric's draining nodes (those waiting for snapshot `up_to` or an older one)."""
    query = select(m.Node).where(
        m.Node.fabric_id == fabric_id, m.Node.state == NodeState.DRAINING.value
    )
    if up_to is not None:
        query = query.where(col(m.Node.drain_snapshot_id) <= up_to)
    return list(session.exec(query))


def drain_waits(session: Session, fabric: m.Fabric, nodes: Collection[int]) -> dict[int, DrainWait]:
    """What each of the fabric's draining `nodes` (ids) still waits for, by node id."""
    if not nodes:
        return {}
    kind = FabricKind(fabric.kind)
    targets = _enforcement_of(fabric_targets(session, m.pk(fabric)))
    leaves = host_leaves(session, nodes) if kind == FabricKind.ROCE else {}
    query = select(m.Node.id, m.Node.drain_snapshot_id).where(col(m.Node.id).in_(nodes))
    stamps = {int(node or 0): snapshot for node, snapshot in session.exec(query)}
    return {n: drain_wait(kind, targets, stamps.get(n), leaves.get(n, ())) for n in nodes}


def force_drain(uow: UnitOfWork, *, fabric_name: str, node_name: str, spec: ForceDrain) -> str:
    """Free a draining node without waiting for the targets (audited with the reason).

    Raises:
        ConflictError: the node is not draining.
    """
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        node = node_named(tx.session, fabric, node_name)
        free_drained(tx.session, [node])
        reason = " ".join(spec.reason.split())[:200]
        target = f"fabrics/{fabric.name}/nodes/{node.name}: {reason}"
        audit_log.record(tx, "node.force_drain", target)
        return NodeState(node.state).value
