"""Rows -> the engine's additional partitions and bound virtual GUIDs of an InfiniBand fabric."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import bindparam, func, select
from sqlmodel import Session, col

from policies.infiniband.model import Member, Partition, VirtualGuid
from policies.model import Owner
from tenancy import models as m
from tenancy.record.snapshot.common import Context


def additional_partitions(
    session: Session, fabric: m.Fabric, context: Context | None
) -> tuple[Partition, ...]:
    """The tenants' additional partitions (the context's tenants' only), members by GUID."""
    values = _values(fabric, context)
    rows = session.connection().execute(_PARTITIONS[context is not None], values).all()
    if not rows:
        return ()
    members: dict[int, list[Member]] = defaultdict(list)
    for partition_id, guid, full in session.connection().execute(
        _MEMBERS, {"ids": [row[0] for row in rows]}
    ):
        members[partition_id].append(Member(int(guid, 16), bool(full)))
    return tuple(
        Partition(
            pkey,
            Owner.tenant(tenant),
            tuple(sorted(members[partition_id])),
            qos,
            label=name,
            ipoib=bool(ipoib),
            index0=bool(index0),
        )
        for partition_id, name, pkey, tenant, qos, ipoib, index0 in rows
    )


def bound_virtual_guids(
    session: Session, fabric: m.Fabric, context: Context | None
) -> tuple[VirtualGuid, ...]:
    """The virtual GUIDs bound to tenants (the context's tenants' only), by GUID."""
    values = _values(fabric, context)
    rows = session.connection().execute(_GUIDS[context is not None], values)
    return tuple(VirtualGuid(int(guid, 16), tenant) for guid, tenant in rows)


def _values(fabric: m.Fabric, context: Context | None) -> dict[str, object]:
    if context is None:
        return {"fabric": m.pk(fabric)}
    return {"fabric": m.pk(fabric), "tenant_ids": list(context.tenant_ids)}


def _partitions_query(scoped: bool):  # type: ignore[no-untyped-def]
    own_class = m.QosClass.__table__.alias("own_class")  # type: ignore[attr-defined]
    tenant_class = m.QosClass.__table__.alias("tenant_class")  # type: ignore[attr-defined]
    query = (
        select(
            col(m.Partition.id),
            col(m.Partition.name),
            col(m.Segment.value),
            col(m.Tenant.name),
            func.coalesce(own_class.c.name, tenant_class.c.name),
            col(m.Partition.ipoib),
            col(m.Partition.index0),
        )
        .join(m.Segment, col(m.Segment.id) == col(m.Partition.segment_id))
        .join(m.Tenant, col(m.Tenant.id) == col(m.Partition.tenant_id))
        .outerjoin(own_class, own_class.c.id == col(m.Partition.qos_class_id))
        .outerjoin(tenant_class, tenant_class.c.id == col(m.Tenant.qos_class_id))
        .where(col(m.Partition.fabric_id) == bindparam("fabric"))
        .order_by(col(m.Segment.value))
    )
    if scoped:
        query = query.where(col(m.Partition.tenant_id).in_(bindparam("tenant_ids", expanding=True)))
    return query


def _guids_query(scoped: bool):  # type: ignore[no-untyped-def]
    query = (
        select(col(m.VirtualGuid.guid), col(m.Tenant.name))
        .join(m.Tenant, col(m.Tenant.id) == col(m.VirtualGuid.tenant_id))
        .where(
            col(m.VirtualGuid.fabric_id) == bindparam("fabric"), col(m.VirtualGuid.state) == "bound"
        )
        .order_by(col(m.VirtualGuid.guid))
    )
    if scoped:
        query = query.where(
            col(m.VirtualGuid.tenant_id).in_(bindparam("tenant_ids", expanding=True))
        )
    return query


# Built once: a scoped snapshot runs prepared statements only.
_PARTITIONS = {scoped: _partitions_query(scoped) for scoped in (False, True)}
_GUIDS = {scoped: _guids_query(scoped) for scoped in (False, True)}
_MEMBERS = select(
    col(m.PartitionMember.partition_id), col(m.PartitionMember.guid), col(m.PartitionMember.full)
).where(col(m.PartitionMember.partition_id).in_(bindparam("ids", expanding=True)))
