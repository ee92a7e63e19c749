"""What the UFM-compatible API shows: a scope's P_Keys with their GUIDs, QoS and change time.

A scope is one fabric and one tenant (a tenant-bound orchestrator token) or every tenant of the
fabric (a fabric-wide orchestrator or an operator). It sees its tenants' partitions whole, and in
a service's or a peering's partition only its tenants' GUIDs; never a service's own members,
another tenant's partition nor the management partition's members. A GUID stays listed while the
fabric may still enforce it: a virtual GUID that left a partition is listed under that P_Key
until the deploy targets have read back its removal (tenancy/record/virtual_guids.py), so a
client that rebuilds its GUID pool from the list (ib-kubernetes at start) never hands it out
twice. UFM's shapes: UFM REST API Guide "PKey GUIDs REST API"; names ``api_pkey_0x2fb``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from policies.enforcement import Enforcement, enforced_up_to
from policies.errors import ConflictError
from policies.infiniband.model import IbSnapshot, Partition
from policies.model import FabricKind, Owner, OwnerKind
from tenancy import models as m
from tenancy.record import snapshot_log
from tenancy.record.snapshot import load_snapshot
from tenancy.record.snapshot.common import widen
from tenancy.schemas.ufm import PkeyBody, guid_text, pkey_text
from tenancy.store.lookups import fabric_named
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import drains

# The fields a client may send that the partition's own settings (or the operator's QoS
# policy) decide: a different value is ignored and reported.
_FLAG_OF = {"index0": "index0", "ip_over_ib": "ipoib"}
# Shown for a partition without a class: the defaults of UFM's own `pkeys/add`.
DEFAULT_QOS = {"mtu_limit": 2, "service_level": 0, "rate_limit": 2.5}
# OpenSM's rate codes (opensm/osm_base.h IB_PATH_RECORD_RATE_*) in Gb/s, as UFM shows them.
RATE_GBPS = {
    2: 2.5, 3: 10, 4: 30, 5: 5, 6: 20, 7: 40, 8: 60, 9: 80, 10: 120, 11: 14, 12: 56,
    13: 112, 14: 168, 15: 25, 16: 100, 17: 200, 18: 300, 19: 28, 20: 50, 21: 400, 22: 600,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class FacadeScope:
    """Who asks on the UFM-compatible API: a fabric, and a tenant or None (every tenant)."""

    fabric: str
    tenant: str | None = None

    def sees(self, owner: Owner) -> bool:
        """Whether a partition of `owner` is this scope's own (shown whole, writable)."""
        if owner.kind is not OwnerKind.TENANT:
            return False
        return self.tenant is None or owner.name == self.tenant


@dataclass(frozen=True, slots=True)
class PkeyListing:
    """The P_Keys a scope sees, in UFM's shape, and the snapshots they come from."""

    pkeys: dict[str, dict[str, Any]]
    intended: str | None
    enforced: str | None


def list_pkeys(
    uow: UnitOfWork, *, scope: FacadeScope, guids: bool, qos: bool, only: int | None = None
) -> PkeyListing:
    """The scope's P_Keys (`only`: that one, or none) with GUIDs and/or QoS, as UFM lists them.

    Intended members (the committed state) plus the virtual GUIDs the fabric may still enforce.
    """
    with uow.transaction(read_only=True) as tx:
        fabric = infiniband_fabric(tx.session, scope.fabric)
        snapshot = scoped_snapshot(tx.session, fabric, scope)
        shown = _shown_partitions(snapshot, scope, only)
        classes, labels = _classes(tx.session), client_labels(tx.session, fabric)
        pkeys = {
            pkey_text(p.pkey): _entry(p, members, (classes, labels), guids, qos)
            for p, members in shown
        }
        if guids:
            _add_draining(tx.session, fabric, scope, pkeys, only)
        newest = snapshot_log.latest(tx.session, m.pk(fabric))
        intended = None if newest is None else newest.digest
        return PkeyListing(pkeys, intended, enforced_digest(tx.session, fabric))


def infiniband_fabric(session: Session, name: str) -> m.Fabric:
    """The named fabric; the UFM-compatible API serves InfiniBand fabrics only."""
    fabric = fabric_named(session, name)
    if fabric.kind != FabricKind.INFINIBAND:
        raise ConflictError(f"fabric '{name}' is RoCE: it has no P_Keys", fabric=name)
    return fabric


def scoped_snapshot(session: Session, fabric: m.Fabric, scope: FacadeScope) -> IbSnapshot:
    """The fabric's snapshot, or the scoped one of the scope's tenant and what it reaches."""
    context = None if scope.tenant is None else widen(session, fabric, [Owner.tenant(scope.tenant)])
    snapshot = load_snapshot(session, fabric, context)
    assert isinstance(snapshot, IbSnapshot)  # an InfiniBand fabric's
    return snapshot


def _shown_partitions(
    snapshot: IbSnapshot, scope: FacadeScope, only: int | None
) -> list[tuple[Partition, list[tuple[int, bool]]]]:
    """Each partition with a member the scope may see, and those members (GUID, full)."""
    scope_guids = _scope_guids(snapshot, scope)
    shown = []
    for partition in snapshot.partitions:
        if only is not None and partition.pkey != only:
            continue
        if scope.sees(partition.owner) and partition.peering is None:
            members = [(x.guid, x.full) for x in partition.members]
        else:
            members = [(x.guid, x.full) for x in partition.members if x.guid in scope_guids]
            if not members:
                continue
        shown.append((partition, members))
    return shown


def _scope_guids(snapshot: IbSnapshot, scope: FacadeScope) -> set[int]:
    """The port and virtual GUIDs of the scope's tenants."""
    tenants = {
        node.name for node in snapshot.nodes if any(scope.sees(owner) for owner in node.owners)
    }
    guids = {port.guid for port in snapshot.ports if port.node in tenants}
    guids.update(v.guid for v in snapshot.virtual_guids if scope.sees(Owner.tenant(v.tenant)))
    return guids


def _entry(
    partition: Partition,
    members: list[tuple[int, bool]],
    names: tuple[dict[str, m.QosClass], dict[int, str]],
    guids: bool,
    qos: bool,
) -> dict[str, Any]:
    classes, labels = names
    entry: dict[str, Any] = {
        "partition": labels.get(partition.pkey) or facade_name(partition.pkey),
        "ip_over_ib": partition.ipoib,
    }
    if qos:
        entry["qos_conf"] = qos_of(classes.get(partition.qos_class or ""))
    if guids:
        entry["guids"] = [
            {
                "guid": guid_text(guid),
                "index0": partition.index0,
                "membership": "full" if full else "limited",
            }
            for guid, full in sorted(members)
        ]
    return entry


def management_entry(*, guids: bool, qos: bool) -> dict[str, Any]:
    """The management partition, 0x7fff, as UFM shows it (``GET /resources/pkeys/0x7fff``).

    Every port is a limited member (partitions.conf's ``Default=0x7fff, ipoib : ALL=limited``):
    UFM 6.19 and later say so in ``membership``, which NVIDIA's infra-controller reads to tell
    whether the default partition is restricted. Its members are nobody's to list.
    """
    entry: dict[str, Any] = {"partition": "management", "ip_over_ib": True}
    if qos:
        entry["qos_conf"] = dict(DEFAULT_QOS)
    if guids:
        entry |= {"guids": [], "membership": "limited"}
    return entry


def facade_name(pkey: int) -> str:
    """UFM's name for a partition created through its API: ``api_pkey_0x<key>``."""
    return f"api_pkey_{pkey_text(pkey)}"


def client_labels(session: Session, fabric: m.Fabric) -> dict[int, str]:
    """P_Key -> the `partition_name` a UFM client gave the partition, where one did."""
    query = (
        select(m.Segment.value, m.Partition.label)
        .join(m.Segment, col(m.Segment.id) == col(m.Partition.segment_id))
        .where(m.Partition.fabric_id == fabric.id, col(m.Partition.label).is_not(None))
    )
    return {value: label for value, label in session.exec(query) if label}


def qos_of(qos_class: m.QosClass | None) -> dict[str, Any]:
    """A class as UFM's ``qos_conf``: MTU code, SL and rate in Gb/s."""
    if qos_class is None:
        return dict(DEFAULT_QOS)
    return {
        "mtu_limit": qos_class.ib_mtu,
        "service_level": qos_class.ib_sl,
        "rate_limit": RATE_GBPS.get(qos_class.ib_rate, DEFAULT_QOS["rate_limit"]),
    }


def _classes(session: Session) -> dict[str, m.QosClass]:
    return {row.name: row for row in session.exec(select(m.QosClass))}


def _add_draining(
    session: Session,
    fabric: m.Fabric,
    scope: FacadeScope,
    pkeys: dict[str, dict[str, Any]],
    only: int | None,
) -> None:
    """Virtual GUIDs that left a partition and may still be enforced, under that P_Key."""
    query = (
        select(m.VirtualGuid.guid, m.VirtualGuid.pkey)
        .join(m.Tenant, col(m.Tenant.id) == col(m.VirtualGuid.tenant_id))
        .where(
            m.VirtualGuid.fabric_id == fabric.id,
            m.VirtualGuid.state == "draining",
            col(m.VirtualGuid.pkey).is_not(None),
        )
    )
    if scope.tenant is not None:
        query = query.where(m.Tenant.name == scope.tenant)
    for guid, pkey in session.exec(query):
        if pkey is None or (only is not None and pkey != only):
            continue
        entry = pkeys.setdefault(
            pkey_text(pkey), {"partition": facade_name(pkey), "ip_over_ib": True}
        )
        entry.setdefault("guids", []).append(
            {"guid": guid_text(int(guid, 16)), "index0": False, "membership": "full",
             "state": "draining"}
        )  # fmt: skip


def enforced_digest(session: Session, fabric: m.Fabric) -> str | None:
    """The digest the fabric is seen enforcing (None: none yet, or no target).

    The drains' rule (policies/enforcement.py `enforced_up_to`): every target holds it or a
    newer one, and a read-back saw it; a target that holds nothing yet holds it back.
    """
    targets = drains.fabric_targets(session, m.pk(fabric))
    enforcement = [
        Enforcement(t.name, t.applied_snapshot_id, t.observed_snapshot_id) for t in targets
    ]
    snapshot_id = enforced_up_to(FabricKind(fabric.kind), enforcement)
    row = session.get(m.SnapshotRecord, snapshot_id) if snapshot_id else None
    return None if row is None else row.digest


def last_updated(uow: UnitOfWork, *, fabric_name: str) -> datetime | None:
    """When the fabric's state last changed, rounded up to the second (None: never).

    The newest commit time in the fabric's snapshot log. UFM's format has whole seconds, and a
    client that serialises its writes waits until this is no older than its last request: a
    change must never look older than the request that made it, so it is rounded up.
    """
    with uow.transaction(read_only=True) as tx:
        fabric = infiniband_fabric(tx.session, fabric_name)
        query = select(func.max(m.SnapshotRecord.created_at)).where(
            m.SnapshotRecord.fabric_id == fabric.id
        )
        newest = tx.session.exec(query).first()
    if newest is None:
        return None
    if newest.tzinfo is None:
        newest = newest.replace(tzinfo=UTC)
    whole = math.ceil(newest.timestamp())
    return datetime.fromtimestamp(whole, UTC)


def ignored_flags(
    session: Session, partition: m.Partition | None, tenant: m.Tenant | None, body: PkeyBody
) -> dict[str, Any]:
    """Sent values that differ from the partition's own: the partition keeps its settings.

    Its flags are its own; its QoS is its class's (the operator's policy), shown as UFM's
    ``qos_conf``.
    """
    sent = body.sent_flags()
    ignored: dict[str, Any] = {}
    if partition is not None:
        for name, column in _FLAG_OF.items():
            if name in sent and sent[name] != getattr(partition, column):
                ignored[name] = sent[name]
    elif sent.get("index0"):
        ignored["index0"] = True  # a default partition is never an index0 partition
    own_qos = qos_of(_class_of(session, partition, tenant))
    ignored.update({k: v for k, v in sent.items() if k in own_qos and v != own_qos[k]})
    return ignored


def _class_of(
    session: Session, partition: m.Partition | None, tenant: m.Tenant | None
) -> m.QosClass | None:
    class_id = partition.qos_class_id if partition else None
    if class_id is None and tenant is not None:
        class_id = tenant.qos_class_id
    return None if class_id is None else session.get(m.QosClass, class_id)
