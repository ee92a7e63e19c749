"""A tenant's InfiniBand partitions: its default one and the additional ones it creates.

Every change is verified before it commits (`commit_gate`, scoped to the tenant): a member
that is not the tenant's, a port over its P_Key budget or in two `index0` partitions refuses
the change with the counterexample. RoCE fabrics keep one VRF per tenant: 409.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlmodel import Session, col, select

from policies.errors import ConflictError, InvalidValueError, NotFoundError
from policies.model import FabricKind
from tenancy import models as m
from tenancy.gate.change_check import ChangeScope
from tenancy.gate.verification import commit_gate
from tenancy.models.partitions import DEFAULT_PARTITION
from tenancy.record import partitions as rows
from tenancy.record import virtual_guids
from tenancy.record.policy_store import current_policy
from tenancy.schemas import MemberSpec, Page, PartitionCreate, PartitionView
from tenancy.store.locks import lock_active_tenant, lock_fabric
from tenancy.store.lookups import fabric_named, qos_class_named, tenant_named
from tenancy.store.pagination import decode_cursor, next_cursor
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases.partition_views import (
    default_segment,
    find_partition,
    partition_view,
    partition_views,
)

__all__ = [
    "add_member",
    "create_partition",
    "create_partition_in",
    "delete_partition",
    "delete_partition_in",
    "get_partition",
    "list_partitions",
    "page_partitions",
    "remove_member",
    "replace_members_in",
    "set_members",
    "set_members_in",
]


def create_partition(uow: UnitOfWork, *, tenant_name: str, spec: PartitionCreate) -> PartitionView:
    """Create an additional partition; verified before commit."""
    with uow.transaction() as tx:
        return create_partition_in(tx, tenant_name=tenant_name, spec=spec)


def create_partition_in(tx: Tx, *, tenant_name: str, spec: PartitionCreate) -> PartitionView:
    """`create_partition` inside the caller's transaction (a change set's operation).

    Raises:
        ConflictError: a RoCE fabric, a name in use, the policy's `max_partitions` reached,
            a P_Key held or quarantined for another owner, a class the policy refuses.
    """
    tenant = lock_active_tenant(tx.session, tenant_name)
    fabric = _infiniband(lock_fabric(tx.session, fabric_named(tx.session, spec.fabric)))
    if spec.name == DEFAULT_PARTITION or _named(tx.session, fabric, tenant, spec.name):
        raise ConflictError(
            f"tenant '{tenant.name}' already has a partition '{spec.name}' on '{fabric.name}'"
        )
    _within_limit(tx, fabric, tenant)
    qos = _admitted_class(tx, tenant, spec.qos_class)
    segment = rows.take_partition_key(tx, fabric, tenant, _pkey(spec.pkey))
    partition = m.Partition(
        fabric_id=m.pk(fabric),
        tenant_id=m.pk(tenant),
        name=spec.name,
        segment_id=m.pk(segment),
        ipoib=spec.ipoib,
        index0=spec.index0,
        qos_class_id=None if qos is None else m.pk(qos),
        created_at=tx.now,
    )
    tx.session.add(partition)
    _commit(tx, fabric, tenant, "partition.create", spec.name)
    return partition_view(tx.session, fabric, tenant, spec.name)


def list_partitions(
    uow: UnitOfWork, *, tenant_name: str, fabric: str | None = None
) -> list[PartitionView]:
    """The tenant's partitions (on one fabric, or every InfiniBand fabric), default first."""
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        fabrics = [fabric_named(tx.session, fabric)] if fabric else _ib_fabrics(tx.session)
        return [view for f in fabrics for view in partition_views(tx.session, f, tenant)]


def page_partitions(
    uow: UnitOfWork, *, tenant_name: str, fabric: str | None, limit: int, cursor: str | None
) -> Page[PartitionView]:
    """A page of `list_partitions` in its order (by fabric; default first, then by name)."""
    after = decode_cursor(cursor)
    views = list_partitions(uow, tenant_name=tenant_name, fabric=fabric)
    remaining = [v for v in views if after is None or _listing_key(v) > after]
    page = remaining[:limit]
    keys = [_listing_key(v) for v in page]
    return Page(data=page, count=len(views), next=next_cursor(keys, limit, len(remaining) > limit))


def _listing_key(view: PartitionView) -> str:
    # Slugs hold no space, and a space sorts below every slug character: the text orders as
    # (fabric, default first, name) does.
    return f"{view.fabric} {int(view.name != DEFAULT_PARTITION)} {view.name}"


def get_partition(
    uow: UnitOfWork, *, tenant_name: str, name: str, fabric: str | None = None
) -> PartitionView:
    """One partition of the tenant; `fabric` is needed when the name is on several fabrics."""
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        found = find_partition(tx.session, tenant, name, fabric)
        return partition_view(tx.session, found, tenant, name)


def delete_partition(
    uow: UnitOfWork, *, tenant_name: str, name: str, fabric: str | None = None
) -> None:
    """Delete an additional partition: members leave, its P_Key goes into quarantine."""
    with uow.transaction() as tx:
        delete_partition_in(tx, tenant_name=tenant_name, name=name, fabric=fabric)


def delete_partition_in(tx: Tx, *, tenant_name: str, name: str, fabric: str | None) -> None:
    """`delete_partition` inside the caller's transaction (a change set's operation)."""
    tenant, found, partition = _locked_additional(tx, tenant_name, name, fabric)
    rows.drop_partition(tx, partition)
    _commit(tx, found, tenant, "partition.delete", name)


def set_members(
    uow: UnitOfWork,
    *,
    tenant_name: str,
    name: str,
    members: list[MemberSpec],
    fabric: str | None = None,
) -> PartitionView:
    """Make the partition's members exactly `members`; verified before commit."""
    with uow.transaction() as tx:
        return set_members_in(
            tx, tenant_name=tenant_name, name=name, members=members, fabric=fabric
        )


def set_members_in(
    tx: Tx, *, tenant_name: str, name: str, members: list[MemberSpec], fabric: str | None
) -> PartitionView:
    """`set_members` inside the caller's transaction (a change set's operation)."""
    wanted = {member.guid: member.membership == "full" for member in members}
    tenant, found = replace_members_in(
        tx, tenant_name=tenant_name, name=name, members=wanted, fabric=fabric
    )
    return partition_view(tx.session, found, tenant, name)


def replace_members_in(
    tx: Tx,
    *,
    tenant_name: str,
    name: str,
    members: dict[str, bool],
    fabric: str | None,
    joining: Collection[str] | None = None,
) -> tuple[m.Tenant, m.Fabric]:
    """Make the partition's members exactly `members` (GUID text -> full), verified; no view.

    `joining`: the GUIDs that are not members yet, for a caller that read the members in this
    transaction under the tenant's lock: only they are admitted (the tenant's ports, virtual
    GUIDs bound to it), as `add_member` admits only the one it adds. None admits every member.
    A partition's members were admitted when they joined and leave with the tenant's nodes
    (`rows.drop_node_memberships`); the commit gate verifies the whole scope either way. The
    UFM-compatible API adds one GUID at a time to partitions of thousands.
    """
    tenant, found, partition = _locked_additional(tx, tenant_name, name, fabric)
    admitted = members if joining is None else {g: members[g] for g in joining}
    _admit_members(tx, found, tenant, admitted)
    rows.set_member_rows(tx, partition, members)
    _commit(tx, found, tenant, "partition.members", name)
    return tenant, found


def add_member(
    uow: UnitOfWork,
    *,
    tenant_name: str,
    name: str,
    member: MemberSpec,
    fabric: str | None = None,
) -> PartitionView:
    """Add one member (or change its membership); the others stay."""
    with uow.transaction() as tx:
        tenant, found, partition = _locked_additional(tx, tenant_name, name, fabric)
        wanted = {row.guid: row.full for row in rows.members_of(tx.session, m.pk(partition))}
        wanted[member.guid] = member.membership == "full"
        _admit_members(tx, found, tenant, {member.guid: wanted[member.guid]})
        rows.set_member_rows(tx, partition, wanted)
        _commit(tx, found, tenant, "partition.members", name)
        return partition_view(tx.session, found, tenant, name)


def remove_member(
    uow: UnitOfWork, *, tenant_name: str, name: str, guid: str, fabric: str | None = None
) -> PartitionView:
    """Remove one member; `NotFoundError` if it is not one."""
    with uow.transaction() as tx:
        tenant, found, partition = _locked_additional(tx, tenant_name, name, fabric)
        wanted = {row.guid: row.full for row in rows.members_of(tx.session, m.pk(partition))}
        if wanted.pop(guid, None) is None:
            raise NotFoundError(f"{guid} is not a member of partition '{name}'", resource="member")
        rows.set_member_rows(tx, partition, wanted)
        _commit(tx, found, tenant, "partition.members", name)
        return partition_view(tx.session, found, tenant, name)


def _locked_additional(
    tx: Tx, tenant_name: str, name: str, fabric: str | None
) -> tuple[m.Tenant, m.Fabric, m.Partition]:
    tenant = lock_active_tenant(tx.session, tenant_name)
    found = lock_fabric(tx.session, find_partition(tx.session, tenant, name, fabric))
    if name == DEFAULT_PARTITION:
        raise ConflictError(
            "the default partition's members are the ports of the tenant's nodes: they follow "
            "its allocations, and it ends with its last one"
        )
    partition = _named(tx.session, found, tenant, name)
    if partition is None:  # deleted while we waited for the lock
        raise NotFoundError(f"tenant '{tenant.name}' has no partition '{name}'")
    return tenant, found, partition


def _admit_members(tx: Tx, fabric: m.Fabric, tenant: m.Tenant, wanted: dict[str, bool]) -> None:
    """Refuse members that are not the tenant's; bind new virtual GUIDs to it."""
    held = _held_ports(tx.session, fabric, list(wanted))
    virtual = []
    for guid in wanted:
        if guid in held:
            if held[guid] != tenant.id:
                raise ConflictError(
                    f"port {guid} is on a node tenant '{tenant.name}' does not hold", guid=guid
                )
        elif virtual_guids.in_ranges(fabric, int(guid, 16)):
            virtual.append(int(guid, 16))
        else:
            raise InvalidValueError(
                f"{guid} is neither a port of fabric '{fabric.name}' nor in its virtual GUID ranges"
            )
    virtual_guids.bind(tx, fabric, tenant, virtual)


def _held_ports(session: Session, fabric: m.Fabric, guids: list[str]) -> dict[str, int | None]:
    """The fabric's port GUID -> the id of the tenant holding its node (None: nobody).

    On the partition's fabric only: a capture imported twice gives two fabrics the same GUIDs.
    """
    if not guids:
        return {}
    query = (
        select(m.Port.guid, m.Allocation.tenant_id)
        .join(m.NodeAssignment, col(m.NodeAssignment.node_id) == col(m.Port.node_id), isouter=True)
        .join(
            m.Allocation,
            col(m.Allocation.id) == col(m.NodeAssignment.allocation_id),
            isouter=True,
        )
        .where(col(m.Port.fabric_id) == fabric.id, col(m.Port.guid).in_(guids))
    )
    return dict(session.exec(query).all())


def _within_limit(tx: Tx, fabric: m.Fabric, tenant: m.Tenant) -> None:
    limit = current_policy(tx.session).for_tenant_kind(tenant.kind).max_partitions
    held = len(rows.tenant_partitions(tx.session, m.pk(fabric), m.pk(tenant)))
    held += 1 if default_segment(tx.session, fabric, tenant) is not None else 0
    if held >= limit:
        raise ConflictError(
            f"tenant '{tenant.name}' holds {held} partitions on '{fabric.name}': the policy's "
            f"max_partitions for {tenant.kind} tenants is {limit}",
            limit=limit,
        )


def _admitted_class(tx: Tx, tenant: m.Tenant, name: str | None) -> m.QosClass | None:
    if name is None:
        return None
    qos = qos_class_named(tx.session, name)
    if not current_policy(tx.session).for_tenant_kind(tenant.kind).admits_class(name):
        raise ConflictError(
            f"the policy does not admit QoS class '{name}' for {tenant.kind} tenants"
        )
    return qos


def _named(session: Session, fabric: m.Fabric, tenant: m.Tenant, name: str) -> m.Partition | None:
    query = select(m.Partition).where(
        m.Partition.fabric_id == fabric.id,
        m.Partition.tenant_id == tenant.id,
        m.Partition.name == name,
    )
    return session.exec(query).first()


def _infiniband(fabric: m.Fabric) -> m.Fabric:
    if fabric.kind != FabricKind.INFINIBAND:
        raise ConflictError(
            f"fabric '{fabric.name}' is RoCE: a tenant has one VRF there, no partitions",
            fabric=fabric.name,
        )
    return fabric


def _ib_fabrics(session: Session) -> list[m.Fabric]:
    query = select(m.Fabric).where(m.Fabric.kind == FabricKind.INFINIBAND)
    return list(session.exec(query.order_by(col(m.Fabric.name))))


def _pkey(text: str | None) -> int | None:
    return None if text is None else int(text, 16)


def _commit(tx: Tx, fabric: m.Fabric, tenant: m.Tenant, action: str, name: str) -> None:
    target = f"tenants/{tenant.name}/partitions/{name}"
    commit_gate(tx, fabric, action, target, ChangeScope.tenant(tenant.name))
