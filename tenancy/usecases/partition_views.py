"""How a tenant's partitions read: the default one (derived) and the additional ones (rows)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement
from sqlmodel import Session, col, select

from policies.errors import ConflictError, InvalidValueError, NotFoundError
from policies.infiniband.model import format_pkey
from policies.model import FabricKind
from tenancy import models as m
from tenancy.models.partitions import DEFAULT_PARTITION
from tenancy.record import partitions as rows
from tenancy.schemas import MemberView, PartitionView
from tenancy.store.lookups import fabric_named


def partition_views(session: Session, fabric: m.Fabric, tenant: m.Tenant) -> list[PartitionView]:
    """The tenant's partitions on the fabric: its default one (if it has nodes) first."""
    if fabric.kind != FabricKind.INFINIBAND:
        return []
    views = []
    if default_segment(session, fabric, tenant) is not None:
        views.append(partition_view(session, fabric, tenant, DEFAULT_PARTITION))
    for partition in rows.tenant_partitions(session, m.pk(fabric), m.pk(tenant)):
        views.append(_additional_view(session, fabric, tenant, partition))
    return views


def partition_view(
    session: Session, fabric: m.Fabric, tenant: m.Tenant, name: str
) -> PartitionView:
    """One partition of the tenant on the fabric; `NotFoundError` if it has none of that name."""
    if name == DEFAULT_PARTITION:
        segment = default_segment(session, fabric, tenant)
        if segment is not None:
            return _default_view(session, fabric, tenant, segment)
    else:
        for partition in rows.tenant_partitions(session, m.pk(fabric), m.pk(tenant)):
            if partition.name == name:
                return _additional_view(session, fabric, tenant, partition)
    raise _no_partition(fabric, tenant, name)


def _has_partition(session: Session, fabric: m.Fabric, tenant: m.Tenant, name: str) -> bool:
    """Whether `partition_view` finds the partition (without reading its members)."""
    if name == DEFAULT_PARTITION:
        return default_segment(session, fabric, tenant) is not None
    return any(p.name == name for p in rows.tenant_partitions(session, m.pk(fabric), m.pk(tenant)))


def _no_partition(fabric: m.Fabric, tenant: m.Tenant, name: str) -> NotFoundError:
    return NotFoundError(
        f"tenant '{tenant.name}' has no partition '{name}' on fabric '{fabric.name}'",
        resource="partition",
    )


def find_partition(session: Session, tenant: m.Tenant, name: str, fabric: str | None) -> m.Fabric:
    """The fabric of the tenant's partition `name` (on `fabric` when given).

    Raises:
        NotFoundError: no such partition; InvalidValueError: the name is on several fabrics
        and `fabric` names none; ConflictError: `fabric` is RoCE.
    """
    if fabric is not None:
        found = fabric_named(session, fabric)
        if found.kind != FabricKind.INFINIBAND:
            raise ConflictError(f"fabric '{fabric}' is RoCE: a tenant has one VRF there")
        if not _has_partition(session, found, tenant, name):
            raise _no_partition(found, tenant, name)
        return found
    fabrics = _fabrics_with(session, tenant, name)
    if not fabrics:
        raise NotFoundError(
            f"tenant '{tenant.name}' has no partition '{name}'", resource="partition"
        )
    if len(fabrics) > 1:
        names = ", ".join(f.name for f in fabrics)
        raise InvalidValueError(
            f"tenant '{tenant.name}' has a partition '{name}' on several fabrics ({names}): "
            "name one with ?fabric= (the command line's --fabric)"
        )
    return fabrics[0]


def _fabrics_with(session: Session, tenant: m.Tenant, name: str) -> list[m.Fabric]:
    if name == DEFAULT_PARTITION:
        query = select(m.Fabric).join(m.Segment, col(m.Segment.fabric_id) == col(m.Fabric.id))
        query = query.where(*_default_of(tenant))
    else:
        query = select(m.Fabric).join(m.Partition, col(m.Partition.fabric_id) == col(m.Fabric.id))
        query = query.where(m.Partition.tenant_id == tenant.id, m.Partition.name == name)
    return list(session.exec(query.order_by(col(m.Fabric.name))))


def _default_of(tenant: m.Tenant) -> tuple[ColumnElement[bool], ...]:
    return (
        col(m.Segment.tenant_id) == tenant.id,
        col(m.Segment.kind) == "pkey",
        col(m.Segment.purpose) == "pkey",
        col(m.Segment.state) == "active",
    )


def default_segment(session: Session, fabric: m.Fabric, tenant: m.Tenant) -> m.Segment | None:
    """The tenant's default partition's P_Key segment on the fabric (None: it holds no node)."""
    query = select(m.Segment).where(m.Segment.fabric_id == fabric.id, *_default_of(tenant))
    return session.exec(query).first()


def _default_view(
    session: Session, fabric: m.Fabric, tenant: m.Tenant, segment: m.Segment
) -> PartitionView:
    query = (
        select(m.Port.guid, m.Node.name)
        .join(m.Node, col(m.Node.id) == col(m.Port.node_id))
        .join(m.NodeAssignment, col(m.NodeAssignment.node_id) == col(m.Node.id))
        .join(m.Allocation, col(m.Allocation.id) == col(m.NodeAssignment.allocation_id))
        .where(m.Allocation.tenant_id == tenant.id, m.Node.fabric_id == fabric.id)
        .order_by(col(m.Port.guid))
    )
    members = [
        MemberView(guid=guid, membership="full", kind="port", node=node)
        for guid, node in session.exec(query)
    ]
    return _view(
        fabric,
        tenant,
        DEFAULT_PARTITION,
        segment.value,
        _class_name(session, tenant.qos_class_id),
        (True, False),
        members,
        segment.created_at,
    )


def _additional_view(
    session: Session, fabric: m.Fabric, tenant: m.Tenant, partition: m.Partition
) -> PartitionView:
    segment = session.get(m.Segment, partition.segment_id)
    assert segment is not None  # a foreign key guarantees it
    member_rows = rows.members_of(session, m.pk(partition))
    nodes = _nodes_of(session, fabric, [row.guid for row in member_rows])
    members = [
        MemberView(
            guid=row.guid,
            membership="full" if row.full else "limited",
            kind="port" if row.guid in nodes else "virtual",
            node=nodes.get(row.guid),
        )
        for row in member_rows
    ]
    qos = _class_name(session, partition.qos_class_id or tenant.qos_class_id)
    flags = (partition.ipoib, partition.index0)
    return _view(
        fabric, tenant, partition.name, segment.value, qos, flags, members, partition.created_at
    )


def _view(
    fabric: m.Fabric,
    tenant: m.Tenant,
    name: str,
    pkey: int,
    qos: str,
    flags: tuple[bool, bool],
    members: list[MemberView],
    created_at: datetime,
) -> PartitionView:
    return PartitionView(
        tenant=tenant.name,
        fabric=fabric.name,
        name=name,
        pkey=format_pkey(pkey),
        qos_class=qos,
        ipoib=flags[0],
        index0=flags[1],
        members=members,
        created_at=created_at,
    )


def _nodes_of(session: Session, fabric: m.Fabric, guids: list[str]) -> dict[str, str]:
    if not guids:
        return {}
    query = select(m.Port.guid, m.Node.name).join(m.Node, col(m.Node.id) == col(m.Port.node_id))
    query = query.where(col(m.Port.fabric_id) == fabric.id, col(m.Port.guid).in_(guids))
    return dict(session.exec(query).all())


def _class_name(session: Session, qos_class_id: int) -> str:
    qos = session.get(m.QosClass, qos_class_id)
    assert qos is not None  # a foreign key guarantees it
    return qos.name
