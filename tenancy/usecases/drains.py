"""Drain before reuse: a released node turns free only once every deploy target enforces it.

A node a tenant released stays ``draining`` until the files without it are enforced: the
reports of its fabric's targets say so (tenancy/usecases/deploy.py stores them), or an operator
forces it with a reason (audited). A quarantined identifier (a P_Key, a VLAN, a VNI) waits for
the same (tenancy/record/quarantine.py).
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from policies.model import FabricKind
from policies.node_state import NodeState
from tenancy import models as m
from tenancy.record import audit_log
from tenancy.record.node_states import finish_drains, free_drained
from tenancy.record.quarantine import end_read_back
from tenancy.schemas import ForceDrain
from tenancy.store.locks import lock_fabric
from tenancy.store.lookups import fabric_named, node_named
from tenancy.store.uow import Tx, UnitOfWork


def fabric_targets(session: Session, fabric_id: int) -> list[m.DeployTarget]:
    """The fabric's deploy targets by name."""
    query = select(m.DeployTarget).where(m.DeployTarget.fabric_id == fabric_id)
    return list(session.exec(query.order_by(col(m.DeployTarget.name))))


def finish_target_drains(tx: Tx, fabric: m.Fabric) -> list[str]:
    """Free the draining nodes and quarantined identifiers whose release every target read back.

    InfiniBand: every target must hold a snapshot at or after the node's release (a standby
    that takes over must not bring the old key back), and a master's read-back must have
    matched one: what the fabric enforces is observed, never assumed from files alone. RoCE:
    every leaf enforces its own part, so every leaf's read-back must have matched one (the
    host's ports are in no tenant VLAN of the read-back CONFIG_DB). Returns the freed nodes'
    names. Without targets identifiers wait for their quarantine period instead.
    """
    targets = fabric_targets(tx.session, m.pk(fabric))
    if fabric.kind == FabricKind.ROCE:
        ready = _observed_everywhere(targets)
    else:
        ready = _held_and_observed(targets)
    end_read_back(tx.session, m.pk(fabric), ready)
    freed = finish_drains(tx.session, m.pk(fabric), applied_everywhere=ready)
    if not targets:  # the last target is gone: nothing enforces the old keys any more
        freed = free_drained(tx.session, _draining(tx.session, m.pk(fabric)))
    for name in freed:
        audit_log.record(tx, "node.drained", f"fabrics/{fabric.name}/nodes/{name}")
    return freed


def _held_and_observed(targets: list[m.DeployTarget]) -> int | None:
    held = [t.applied_snapshot_id for t in targets]
    observed = [t.observed_snapshot_id for t in targets if t.observed_snapshot_id is not None]
    if not targets or None in held or not observed:
        return None
    return min(min(h for h in held if h is not None), max(observed))


def _observed_everywhere(targets: list[m.DeployTarget]) -> int | None:
    observed = [t.observed_snapshot_id for t in targets]
    if not targets or None in observed:
        return None
    return min(o for o in observed if o is not None)


def _draining(session: Session, fabric_id: int) -> list[m.Node]:
    query = select(m.Node).where(
        m.Node.fabric_id == fabric_id, m.Node.state == NodeState.DRAINING.value
    )
    return list(session.exec(query))


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
