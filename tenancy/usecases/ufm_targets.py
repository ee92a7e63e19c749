"""What a P_Key is to a scope of the UFM-compatible API, resolved under the right locks.

A tenant's default partition, one of its additional partitions, a shared service's partition,
or free (then, for a write that may create, a new partition of the scope's tenant). A key the
scope may not use (another tenant's, a peering's, outside the pool, 0x7fff, quarantined for
another owner) is one refusal that does not say which (`unavailable`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlmodel import Session, col, select

from policies.errors import ConflictError, InvalidValueError
from tenancy import models as m
from tenancy.schemas import PartitionCreate
from tenancy.schemas.ufm import MANAGEMENT_PKEY, PkeyBody, pkey_text
from tenancy.store.locks import lock_active_tenant, lock_fabric
from tenancy.store.uow import Tx
from tenancy.usecases import partitions
from tenancy.usecases.ufm_nodes import ORIGIN
from tenancy.usecases.ufm_views import FacadeScope, infiniband_fabric


@dataclass(frozen=True, slots=True)
class Target:
    """What a P_Key is to the scope: a tenant's partition, a shared service's, or free."""

    pkey: int
    tenant: m.Tenant | None = None
    partition: m.Partition | None = None
    service: m.Service | None = None
    created: bool = False  # by this request

    @property
    def is_default(self) -> bool:
        """The tenant's default partition (its nodes' ports)."""
        return self.tenant is not None and self.partition is None


def unavailable(pkey: int) -> InvalidValueError:
    """The one refusal for a key the scope may not use: it does not say why."""
    return InvalidValueError(
        f"pkey {pkey_text(pkey)} is not available: it is outside the fabric's pool, reserved, or "
        "not a partition of this token's tenants",
        reason="pkey-unavailable",
    )


def locked_target(
    tx: Tx, scope: FacadeScope, pkey: int, *, create: PkeyBody | None, lock: bool = True
) -> Target:
    """What `pkey` is to the scope, under the tenant's and the fabric's locks (lock order).

    With `create`, an unknown key free in the pool becomes a partition of the scope's tenant.
    """
    fabric = infiniband_fabric(tx.session, scope.fabric)
    target = _target(tx.session, fabric, scope, pkey)
    if lock:
        name = target.tenant.name if target.tenant else scope.tenant
        if name is not None:
            lock_active_tenant(tx.session, name)
        lock_fabric(tx.session, fabric)
        target = _target(tx.session, fabric, scope, pkey)  # as it is under the locks
    if target.tenant is None and target.service is None and create is not None:
        target = _create(tx, fabric, scope, pkey, create)
    return target


def _target(session: Session, fabric: m.Fabric, scope: FacadeScope, pkey: int) -> Target:
    if pkey == MANAGEMENT_PKEY:
        raise unavailable(pkey)
    segment = session.exec(
        select(m.Segment).where(
            m.Segment.fabric_id == fabric.id,
            m.Segment.kind == "pkey",
            m.Segment.value == pkey,
            m.Segment.state == "active",
        )
    ).first()
    if segment is None:
        return Target(pkey)
    if segment.service_id is not None:
        return Target(pkey, service=session.get(m.Service, segment.service_id))
    tenant = session.get(m.Tenant, segment.tenant_id) if segment.tenant_id else None
    if tenant is None or segment.peering_id is not None or not _in_scope(scope, tenant):
        raise unavailable(pkey)
    if segment.purpose == "pkey":
        return Target(pkey, tenant)
    partition = session.exec(
        select(m.Partition).where(m.Partition.segment_id == segment.id)
    ).first()
    if partition is None:
        raise unavailable(pkey)
    return Target(pkey, tenant, partition)


def _in_scope(scope: FacadeScope, tenant: m.Tenant) -> bool:
    return scope.tenant is None or tenant.name == scope.tenant


def _create(tx: Tx, fabric: m.Fabric, scope: FacadeScope, pkey: int, body: PkeyBody) -> Target:
    """A new partition of the scope's tenant holding `pkey` (free in the pool, or its own)."""
    if scope.tenant is None:
        raise InvalidValueError(
            f"pkey {pkey_text(pkey)} is not a partition yet, and a fabric-wide token cannot "
            "create one: it does not say for which tenant (use a tenant's orchestrator token)",
            reason="pkey-unavailable",
        )
    if not fabric.pkey_first <= pkey <= fabric.pkey_last:
        raise unavailable(pkey)
    spec = PartitionCreate(
        fabric=fabric.name,
        name=f"pkey-0x{pkey:x}",
        pkey=f"0x{pkey:x}",
        ipoib=True if body.ip_over_ib is None else body.ip_over_ib,
        index0=bool(body.index0),
    )
    try:
        partitions.create_partition_in(tx, tenant_name=scope.tenant, spec=spec)
    except ConflictError as error:
        # Held or quarantined for another owner (tenancy/record/partitions.py names the key):
        # one refusal that does not say which. The tenant's own limits pass through.
        if "pkey" in error.extensions:
            raise unavailable(pkey) from error
        raise
    found = _target(tx.session, fabric, scope, pkey)
    if found.partition is not None:
        found.partition.label = body.partition_name or body.pkey_name_prefix
        found.partition.origin = ORIGIN
        tx.session.add(found.partition)
    return replace(found, created=True)


def deleted_before(session: Session, scope: FacadeScope, pkey: int) -> bool:
    """Whether `pkey` may be one the scope deleted: free in the pool, or quarantined for it.

    A deleted key no deploy target enforced is free at once; saying that a key of the pool is
    free tells nothing `pkeys/add` would not (it creates a partition on a free key only).
    """
    fabric = infiniband_fabric(session, scope.fabric)
    if not fabric.pkey_first <= pkey <= fabric.pkey_last:
        return False
    held = session.exec(
        select(m.Segment.id).where(
            m.Segment.fabric_id == fabric.id, m.Segment.kind == "pkey", m.Segment.value == pkey
        )
    ).first()
    return held is None or own_quarantined(session, scope, pkey)


def own_quarantined(session: Session, scope: FacadeScope, pkey: int) -> bool:
    """Whether `pkey` is quarantined for the scope's tenant (any tenant: a fabric-wide scope)."""
    query = (
        select(m.Segment.id)
        .join(m.Tenant, col(m.Tenant.id) == col(m.Segment.tenant_id))
        .join(m.Fabric, col(m.Fabric.id) == col(m.Segment.fabric_id))
        .where(
            m.Fabric.name == scope.fabric,
            m.Segment.kind == "pkey",
            m.Segment.value == pkey,
            m.Segment.state != "active",
        )
    )
    if scope.tenant is not None:
        query = query.where(m.Tenant.name == scope.tenant)
    return session.exec(query).first() is not None


def default_refusal(target: Target) -> InvalidValueError:
    """The refusal of a member change the default partition cannot take."""
    return InvalidValueError(
        f"pkey {pkey_text(target.pkey)} is a tenant's default partition: its members are the "
        "ports of the tenant's nodes, which join with an allocation and leave with its "
        "release; use another P_Key for virtual GUIDs and explicit members",
        reason="default-partition",
    )
