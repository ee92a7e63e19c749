"""A tenant's additional partitions as rows: their P_Keys, their members, and their end.

An additional partition holds a P_Key segment of purpose ``partition`` (the pool is the fabric's
P_Key range, shared with default partitions, services and peerings). Deleting it, or
offboarding its tenant, deletes its member rows and the row and releases the P_Key into
quarantine (tenancy/record/quarantine.py); its virtual GUIDs that are in no partition any more
start draining (tenancy/record/virtual_guids.py). A node leaving its tenant leaves the tenant's
partitions with its ports. Usage records of fabric capacity on InfiniBand name the partition
of the tenant's nodes, ``default`` (`usage_partitions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy import bindparam, delete, update
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from policies import usage
from policies.errors import ConflictError
from policies.infiniband.model import format_pkey
from policies.model import FabricKind
from tenancy import models as m
from tenancy.models.partitions import DEFAULT_PARTITION
from tenancy.record import virtual_guids
from tenancy.record.pool_shares import check_share
from tenancy.record.pools import Pool, take
from tenancy.record.quarantine import note_taken, release_segment
from tenancy.store.db import expire_loaded
from tenancy.store.uow import Tx

PARTITION_PURPOSE = "partition"


def partition_pool(fabric: m.Fabric) -> Pool:
    """The fabric's P_Key range as the pool additional partitions take from."""
    return Pool("pkey", PARTITION_PURPOSE, fabric.pkey_first, fabric.pkey_last, "P_Key")


def take_partition_key(tx: Tx, fabric: m.Fabric, tenant: m.Tenant, pkey: int | None) -> m.Segment:
    """Take `pkey` (or the lowest free P_Key) for a new partition of `tenant`; its segment.

    Raises:
        ConflictError: the requested P_Key is held or quarantined for another owner.
        PoolExhaustedError, PoolShareExceededError: as `tenancy.record.pools.take`.
    """
    pool = partition_pool(fabric)
    if pkey is None:
        pkey = take(tx, fabric, pool, tenant_id=m.pk(tenant))
    else:
        _take_chosen(tx, fabric, pool, tenant, pkey)
    tx.session.flush()
    return tx.session.exec(
        select(m.Segment).where(
            m.Segment.fabric_id == fabric.id, m.Segment.kind == "pkey", m.Segment.value == pkey
        )
    ).one()


def _take_chosen(tx: Tx, fabric: m.Fabric, pool: Pool, tenant: m.Tenant, pkey: int) -> None:
    if not pool.first <= pkey <= pool.last:
        raise ConflictError(
            f"P_Key {format_pkey(pkey)} is outside fabric '{fabric.name}''s range "
            f"{format_pkey(pool.first)}-{format_pkey(pool.last)}",
            pkey=format_pkey(pkey),
        )
    tx.session.flush()
    # Not named after columns: an UPDATE reserves those for its SET clause.
    values = {"in_fabric": m.pk(fabric), "chosen": pkey, "owner": m.pk(tenant)}
    row = tx.session.connection().execute(_TAKE_OWN_BACK, values).first()
    if row is not None:
        expire_loaded(tx.session, m.Segment, [row[0]])
    else:
        _insert_chosen(tx, fabric, pool, tenant, pkey)
    note_taken(tx.session, m.pk(fabric))


def _insert_chosen(tx: Tx, fabric: m.Fabric, pool: Pool, tenant: m.Tenant, pkey: int) -> None:
    owner = {"tenant_id": m.pk(tenant), "service_id": None, "peering_id": None}
    check_share(tx, fabric, pool, owner)
    taken = tx.session.exec(
        select(m.Segment).where(
            m.Segment.fabric_id == fabric.id, m.Segment.kind == "pkey", m.Segment.value == pkey
        )
    ).first()
    if taken is not None:
        state = "held" if taken.state == "active" else "quarantined"
        raise ConflictError(
            f"P_Key {format_pkey(pkey)} is {state} on fabric '{fabric.name}'",
            pkey=format_pkey(pkey),
        )
    segment = m.Segment(fabric_id=m.pk(fabric), kind="pkey", value=pkey, purpose=pool.purpose)
    segment.tenant_id, segment.created_at = m.pk(tenant), tx.now
    tx.session.add(segment)


def tenant_partitions(session: Session, fabric_id: int, tenant_id: int) -> list[m.Partition]:
    """The tenant's additional partitions on the fabric, by name."""
    query = select(m.Partition).where(
        m.Partition.fabric_id == fabric_id, m.Partition.tenant_id == tenant_id
    )
    return list(session.exec(query.order_by(col(m.Partition.name))))


def members_of(session: Session, partition_id: int) -> list[m.PartitionMember]:
    """A partition's member rows by GUID."""
    query = select(m.PartitionMember).where(m.PartitionMember.partition_id == partition_id)
    return list(session.exec(query.order_by(col(m.PartitionMember.guid))))


def set_member_rows(tx: Tx, partition: m.Partition, members: dict[str, bool]) -> None:
    """Make the partition's members exactly `members` (GUID text -> full); settle GUIDs left."""
    before = {row.guid: row for row in members_of(tx.session, m.pk(partition))}
    for guid, row in before.items():
        if guid not in members:
            tx.session.delete(row)
        elif row.full != members[guid]:
            row.full = members[guid]
            tx.session.add(row)
    for guid, full in members.items():
        if guid not in before:
            tx.session.add(m.PartitionMember(partition_id=m.pk(partition), guid=guid, full=full))
    segment = tx.session.get(m.Segment, partition.segment_id)
    pkey = None if segment is None else segment.value
    virtual_guids.settle(tx, partition.fabric_id, set(before) - set(members), pkey)


def drop_partition(tx: Tx, partition: m.Partition) -> None:
    """Delete a partition, its members and release its P_Key into quarantine."""
    set_member_rows(tx, partition, {})
    segment = tx.session.get(m.Segment, partition.segment_id)
    tx.session.delete(partition)
    tx.session.flush()
    if segment is not None:
        release_segment(tx, segment)


def drop_tenant_partitions(tx: Tx, tenant_id: int) -> None:
    """Offboarding: every additional partition of the tenant goes, on every fabric."""
    query = select(m.Partition).where(m.Partition.tenant_id == tenant_id)
    for partition in list(tx.session.exec(query)):
        drop_partition(tx, partition)


def drop_node_memberships(tx: Tx, fabric_id: int, tenant_id: int, node_ids: Sequence[int]) -> None:
    """Ports of the fabric's nodes that left the tenant leave its partitions there."""
    if not node_ids:
        return
    tx.session.flush()
    values = {"fabric": fabric_id, "tenant": tenant_id, "nodes": list(node_ids)}
    tx.session.connection().execute(_DROP_NODE_MEMBERS, values)


def usage_partitions(session: Session, records: list[usage.UsageRecord]) -> list[usage.UsageRecord]:
    """Records of fabric capacity on InfiniBand name the partition of the tenant's nodes."""
    infiniband = set(
        session.exec(select(m.Fabric.name).where(m.Fabric.kind == FabricKind.INFINIBAND))
    )
    return [
        replace(r, partition=DEFAULT_PARTITION)
        if r.fabric in infiniband and r.resource_type == usage.FABRIC_CAPACITY
        else r
        for r in records
    ]


_TAKE_OWN_BACK = (
    update(m.Segment)
    .where(
        col(m.Segment.fabric_id) == bindparam("in_fabric"),
        col(m.Segment.kind) == "pkey",
        col(m.Segment.value) == bindparam("chosen"),
        col(m.Segment.state) == "quarantined",
        col(m.Segment.tenant_id) == bindparam("owner"),
    )
    .values(state="active", purpose=PARTITION_PURPOSE, released_at=None, drain_snapshot_id=None)
    .returning(col(m.Segment.id))
)
_PORTS_OF_NODES = core_select(col(m.Port.guid)).where(
    col(m.Port.node_id).in_(bindparam("nodes", expanding=True))
)
# The nodes' fabric's partitions only: another fabric may have ports of the same GUIDs.
_DROP_NODE_MEMBERS = delete(m.PartitionMember).where(
    col(m.PartitionMember.guid).in_(_PORTS_OF_NODES),
    col(m.PartitionMember.partition_id).in_(
        core_select(col(m.Partition.id)).where(
            col(m.Partition.tenant_id) == bindparam("tenant"),
            col(m.Partition.fabric_id) == bindparam("fabric"),
        )
    ),
)
