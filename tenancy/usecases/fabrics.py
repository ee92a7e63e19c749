"""Use cases for fabrics and their nodes."""

from __future__ import annotations

from sqlalchemy import func
from sqlalchemy import select as core_select
from sqlmodel import Session, SQLModel, col, select

from policies.errors import ConflictError
from policies.infiniband.model import format_pkey
from policies.model import FabricKind
from tenancy import models as m
from tenancy.gate.verification import commit_gate
from tenancy.record import vrf_segments as roce
from tenancy.record.virtual_guids import setting_of, stored_setting
from tenancy.schemas import (
    FabricCreate,
    FabricView,
    Page,
    PKeyRange,
    RoceFabricCreate,
    VirtualGuidSetting,
)
from tenancy.store.db import fetch_all
from tenancy.store.locks import lock_policy
from tenancy.store.lookups import fabric_named
from tenancy.store.pagination import decode_cursor, next_cursor
from tenancy.store.uow import Tx, UnitOfWork


def fabric_view(session: Session, fabric: m.Fabric) -> FabricView:
    """The API shape of a fabric: its P_Key fields on InfiniBand, its RoCE settings on RoCE."""
    if fabric.kind == FabricKind.ROCE:
        settings = roce.settings_row(session, fabric)
        return FabricView(
            name=fabric.name,
            kind=fabric.kind,
            created_at=fabric.created_at,
            **roce.settings_view(settings).model_dump(),
        )
    return FabricView(
        name=fabric.name,
        kind=fabric.kind,
        pkey_range=PKeyRange(
            first=format_pkey(fabric.pkey_first), last=format_pkey(fabric.pkey_last)
        ),
        pkeys_per_port=fabric.pkeys_per_port,
        virtual_guids=VirtualGuidSetting.model_validate(setting_of(fabric)),
        created_at=fabric.created_at,
    )


def create_fabric(uow: UnitOfWork, *, spec: FabricCreate | RoceFabricCreate) -> FabricView:
    """Register a fabric; its name is unique and its pools are fixed at creation."""
    with uow.transaction() as tx:
        lock_policy(tx.session)  # verified under the policy in force when it commits
        if tx.session.exec(select(m.Fabric).where(m.Fabric.name == spec.name)).first():
            raise ConflictError(f"fabric '{spec.name}' already exists", name=spec.name)
        if isinstance(spec, RoceFabricCreate):
            fabric = roce.create_fabric_rows(tx, spec)
        else:
            fabric = _create_ib_fabric(tx, spec)
        commit_gate(tx, fabric, "fabric.create", f"fabrics/{fabric.name}")
        return fabric_view(tx.session, fabric)


def _create_ib_fabric(tx: Tx, spec: FabricCreate) -> m.Fabric:
    fabric = m.Fabric(
        name=spec.name,
        kind=spec.kind,
        pkey_first=int(spec.pkey_range.first, 16),
        pkey_last=int(spec.pkey_range.last, 16),
        pkeys_per_port=spec.pkeys_per_port,
        virtual_guids=stored_setting(spec.virtual_guids),
        created_at=tx.now,
    )
    tx.session.add(fabric)
    tx.session.flush()
    return fabric


def count_rows(session: Session, model: type[SQLModel]) -> int:
    """Number of rows in `model`'s table, on every fabric (`count_where` counts one fabric's)."""
    return int(fetch_all(session, core_select(func.count()).select_from(model))[0][0])


def count_where(session: Session, model: type[SQLModel], fabric_id: int) -> int:
    """Number of rows of `model` (a table with a fabric_id column) on one fabric."""
    query = (
        core_select(func.count())
        .select_from(model)
        .where(
            model.fabric_id == fabric_id  # type: ignore[attr-defined]
        )
    )
    return int(fetch_all(session, query)[0][0])


def list_fabrics(uow: UnitOfWork, *, limit: int, cursor: str | None) -> Page[FabricView]:
    """A page of fabrics of both kinds in name order."""
    after = decode_cursor(cursor)
    with uow.transaction(read_only=True) as tx:
        query = select(m.Fabric).order_by(col(m.Fabric.name))
        if after is not None:
            query = query.where(col(m.Fabric.name) > after)
        rows = list(tx.session.exec(query.limit(limit + 1)))
        total = count_rows(tx.session, m.Fabric)
        page = rows[:limit]
        return Page(
            data=[fabric_view(tx.session, f) for f in page],
            count=total,
            next=next_cursor([f.name for f in page], limit, len(rows) > limit),
        )


def get_fabric(uow: UnitOfWork, *, name: str) -> FabricView:
    """One fabric with its pools and limits; `NotFoundError` if the name is unknown."""
    with uow.transaction(read_only=True) as tx:
        return fabric_view(tx.session, fabric_named(tx.session, name))
