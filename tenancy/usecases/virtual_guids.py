"""A fabric's virtual GUIDs: the setting that admits them and the ledger of who holds which."""

from __future__ import annotations

from collections import defaultdict

from sqlmodel import Session, col, select

from policies.errors import ConflictError
from policies.model import FabricKind
from tenancy import models as m
from tenancy.gate.verification import commit_gate
from tenancy.record import virtual_guids as ledger
from tenancy.schemas import FabricPatch, FabricView, Page, VirtualGuidView
from tenancy.store.locks import lock_fabric, lock_policy
from tenancy.store.lookups import fabric_named
from tenancy.store.pagination import decode_cursor, next_cursor
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.fabrics import fabric_view


def update_fabric(uow: UnitOfWork, *, name: str, patch: FabricPatch) -> FabricView:
    """Change the fabric's virtual GUID setting; the whole fabric is verified before commit.

    Raises:
        ConflictError: a RoCE fabric, or a virtual GUID of the ledger that the new setting
            would no longer admit (disabled, or outside every range).
    """
    with uow.transaction() as tx:
        lock_policy(tx.session)
        fabric = lock_fabric(tx.session, fabric_named(tx.session, name))
        if fabric.kind != FabricKind.INFINIBAND:
            raise ConflictError(f"fabric '{name}' is RoCE: it has no virtual GUIDs")
        fabric.virtual_guids = ledger.stored_setting(patch.virtual_guids)
        tx.session.add(fabric)
        _still_admitted(tx.session, fabric)
        _no_port_in_ranges(tx.session, fabric)
        commit_gate(tx, fabric, "fabric.update", f"fabrics/{fabric.name}")
        return fabric_view(tx.session, fabric)


def _still_admitted(session: Session, fabric: m.Fabric) -> None:
    query = select(m.VirtualGuid.guid).where(m.VirtualGuid.fabric_id == fabric.id)
    for guid in session.exec(query.order_by(col(m.VirtualGuid.guid))):
        if not ledger.in_ranges(fabric, int(guid, 16)):
            raise ConflictError(
                f"virtual GUID {guid} is in the ledger (bound or draining) and the new setting "
                "would not admit it: remove it from its partitions and let it drain first",
                guid=guid,
            )


def _no_port_in_ranges(session: Session, fabric: m.Fabric) -> None:
    """Refuse ranges that hold a port of the fabric: a GUID must be a port or virtual, not both."""
    for text in ledger.setting_of(fabric)["ranges"]:  # type: ignore[attr-defined]
        first, _, last = str(text).partition("-")
        query = select(m.Port.guid).where(
            m.Port.fabric_id == fabric.id, col(m.Port.guid).between(first, last)
        )
        port = session.exec(query.limit(1)).first()
        if port is not None:
            raise ConflictError(
                f"the range {text} holds port {port} of fabric '{fabric.name}': virtual GUID "
                "ranges must hold no port GUID",
                guid=port,
            )


def list_virtual_guids(
    uow: UnitOfWork, *, fabric: str, limit: int, cursor: str | None
) -> Page[VirtualGuidView]:
    """A page of the fabric's virtual GUID ledger in GUID order."""
    after = decode_cursor(cursor)
    with uow.transaction(read_only=True) as tx:
        found = fabric_named(tx.session, fabric)
        query = (
            select(m.VirtualGuid, m.Tenant.name)
            .join(m.Tenant, col(m.Tenant.id) == col(m.VirtualGuid.tenant_id))
            .where(m.VirtualGuid.fabric_id == found.id)
        )
        total = len(tx.session.exec(query).all())
        if after is not None:
            query = query.where(col(m.VirtualGuid.guid) > after)
        rows = list(tx.session.exec(query.order_by(col(m.VirtualGuid.guid)).limit(limit + 1)))
        page = rows[:limit]
        partitions = _partitions_of(tx.session, found, [row.guid for row, _ in page])
        data = [_view(row, tenant, partitions[row.guid]) for row, tenant in page]
        more = len(rows) > limit
        return Page(data=data, count=total, next=next_cursor([v.guid for v in data], limit, more))


def _partitions_of(session: Session, fabric: m.Fabric, guids: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    if not guids:
        return found
    query = (
        select(m.PartitionMember.guid, m.Partition.name)
        .join(m.Partition, col(m.Partition.id) == col(m.PartitionMember.partition_id))
        .where(m.Partition.fabric_id == fabric.id, col(m.PartitionMember.guid).in_(guids))
        .order_by(col(m.Partition.name))
    )
    for guid, name in session.exec(query):
        found[guid].append(name)
    return found


def _view(row: m.VirtualGuid, tenant: str, partitions: list[str]) -> VirtualGuidView:
    return VirtualGuidView(
        guid=row.guid,
        tenant=tenant,
        state="bound" if row.state == ledger.BOUND else "draining",
        partitions=partitions,
        bound_at=row.bound_at,
        released_at=row.released_at,
    )
