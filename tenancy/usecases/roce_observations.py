"""Observed state of a RoCE leaf against the record: drift and the violations it allows.

Read-only, as InfiniBand's observations (tenancy/usecases/config_audits.py): load the fabric's
current snapshot and its draining nodes, hand them with the posted leaf state to the pure engine
(policies/roce/observations.py for drift, policies/config_audit.py for violations) and shape
the report. Nothing is stored and nothing is audit-logged.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from policies.config_audit import observed_counterexamples
from policies.errors import InvalidValueError
from policies.model import FabricKind
from policies.node_state import NodeState
from policies.roce.model import RoceSnapshot
from policies.roce.observations import LeafDrift, compare_leaf
from policies.roce.observed import EvpnVni, FrrState, LeafState, TunnelMap
from tenancy import models as m
from tenancy.gate.verification import counterexample_view
from tenancy.record.snapshot import load_snapshot
from tenancy.schemas import LeafDriftView, RoceObservationCreate, RoceObservationView
from tenancy.store.lookups import fabric_named
from tenancy.store.uow import UnitOfWork
from tenancy.technology import require_technology


def observe_leaf(
    uow: UnitOfWork, *, fabric_name: str, document: RoceObservationCreate
) -> RoceObservationView:
    """Drift of one RoCE leaf's observed CONFIG_DB and FRR state from intent, and violations.

    A draining node's port still in a tenant VLAN is reported on that node (drain before
    reuse).

    Raises:
        NotFoundError: no such fabric.
        InvalidValueError: an InfiniBand fabric, or `document.leaf` is not a leaf switch with
            a VTEP of the fabric.
    """
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        require_technology(fabric, FabricKind.ROCE, "RoCE observations apply to RoCE fabrics")
        snapshot = load_snapshot(tx.session, fabric)
        draining = _draining(tx.session, m.pk(fabric))
    assert isinstance(snapshot, RoceSnapshot)
    leaf = _leaf(snapshot, document.leaf)
    observed, frr = leaf_state_of(document), frr_state_of(document)
    drift = compare_leaf(snapshot, leaf, observed, frr, draining)
    imports = frr.vrf_imports if frr is not None else {}
    found = observed_counterexamples(snapshot, leaf, observed.members_by_vlan(), imports)
    return RoceObservationView(
        fabric=fabric_name,
        leaf=leaf,
        snapshot_digest=snapshot.digest,
        holds=not found,
        in_sync=not drift,
        frr_observed=frr is not None,
        drift=[_drift_view(d) for d in drift],
        counterexamples=[counterexample_view(c, FabricKind.ROCE) for c in found],
    )


def _draining(session: Session, fabric_id: int) -> frozenset[str]:
    query = select(m.Node.name).where(
        m.Node.fabric_id == fabric_id, col(m.Node.state) == NodeState.DRAINING.value
    )
    return frozenset(session.exec(query))


def _leaf(snapshot: RoceSnapshot, name: str) -> str:
    leaves = {s.name for s in snapshot.leaves() if s.vtep is not None}
    if name not in leaves:
        raise InvalidValueError(
            f"'leaf' must name a leaf switch of fabric '{snapshot.fabric.name}' "
            f"({', '.join(sorted(leaves))})",
            leaf=name,
        )
    return name


def leaf_state_of(document: RoceObservationCreate) -> LeafState:
    """The engine's shape of the posted CONFIG_DB state."""
    maps = frozenset(TunnelMap(t.tunnel, t.name, t.vni, t.vlan) for t in document.tunnel_maps)
    return LeafState(
        {port: frozenset(vlans) for port, vlans in document.vlan_members.items()},
        dict(document.vrfs),
        maps,
        {port: dict(fields) for port, fields in document.port_qos_maps.items()},
    )


def frr_state_of(document: RoceObservationCreate) -> FrrState | None:
    """The engine's shape of the posted FRR state; None when FRR was not observed.

    A VNI listed twice keeps its last listing (bgpd lists each once).
    """
    if document.frr is None:
        return None
    vnis = {
        v.vni: EvpnVni(v.vni, v.layer, frozenset(v.import_rts), frozenset(v.export_rts))
        for v in document.frr.vnis
    }
    imports = {vrf: frozenset(rts) for vrf, rts in document.frr.vrf_imports.items()}
    return FrrState(vnis, imports)


def _drift_view(drift: LeafDrift) -> LeafDriftView:
    return LeafDriftView(
        code=drift.code,
        subject=drift.subject,
        node=drift.node,
        owner=str(drift.owner) if drift.owner is not None else None,
        expected=list(drift.expected),
        observed=list(drift.observed),
        message=drift.message,
    )
