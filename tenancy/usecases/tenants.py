"""Use cases for QoS classes and tenants (onboarding, listing, offboarding)."""

from __future__ import annotations

from sqlalchemy import bindparam
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql.dml import ReturningInsert
from sqlmodel import Session, col, select

from policies.errors import ConflictError, NotFoundError
from tenancy import models as m
from tenancy.gate.verification import commit_gate, digest_changed
from tenancy.record import audit_log
from tenancy.record.pools import holds_nothing
from tenancy.schemas import Page, QosClassCreate, QosClassView, TenantCreate, TenantView
from tenancy.store.locks import created_tenant, lock_fabrics, lock_tenant, lock_token_lineage
from tenancy.store.lookups import qos_class_named, tenant_named
from tenancy.store.pagination import page_rows
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases.releases import release_tenant_everywhere
from tenancy.usecases.tokens import revoke_tenant_tokens

# Seeded classes: SL 0 stays the default (unclassified and IPoIB-on-0x7fff traffic); each class
# gets its own SL, hence its own VL, weighted in the low-priority VL arbitration table.
# On RoCE: gold DSCP 26 -> TC 3 and silver DSCP 28 -> TC 4 lossless (PFC + ECN), bronze DSCP 10 ->
# TC 1 lossy; ETS weights sum to 100 (docs/facts/roce.md §2).
SEEDED_QOS_CLASSES = (
    QosClassCreate(
        name="gold",
        ib_sl=3,
        ib_rate=3,
        ib_mtu=4,
        vlarb_weight=128,
        roce_dscp=26,
        roce_tc=3,
        lossless=True,
        ets_weight=50,
    ),
    QosClassCreate(
        name="silver",
        ib_sl=2,
        ib_rate=3,
        ib_mtu=4,
        vlarb_weight=64,
        roce_dscp=28,
        roce_tc=4,
        lossless=True,
        ets_weight=30,
    ),
    QosClassCreate(
        name="bronze",
        ib_sl=1,
        ib_rate=3,
        ib_mtu=4,
        vlarb_weight=16,
        roce_dscp=10,
        roce_tc=1,
        lossless=False,
        ets_weight=20,
    ),
)


def seed_qos_classes(session: Session) -> None:
    """Create the seeded classes that do not exist yet (idempotent)."""
    existing = set(session.exec(select(m.QosClass.name)).all())
    for spec in SEEDED_QOS_CLASSES:
        if spec.name not in existing:
            session.add(m.QosClass(**spec.model_dump()))


def qos_view(row: m.QosClass) -> QosClassView:
    """The API shape of a QoS class: every column but the id."""
    return QosClassView.model_validate(row, from_attributes=True)


def create_qos_class(uow: UnitOfWork, *, spec: QosClassCreate) -> QosClassView:
    """Add a QoS class, audited; `ConflictError` if the name is taken.

    Every fabric's snapshot holds the classes (InfiniBand's VL arbitration is derived from all
    of them), so the class changes each fabric's verified state: each fabric whose digest
    changes gets its own verified, audited entry and history row, as any change does; with no
    such fabric, one entry records the class.
    """
    with uow.transaction() as tx:
        if tx.session.exec(select(m.QosClass).where(m.QosClass.name == spec.name)).first():
            raise ConflictError(f"QoS class '{spec.name}' already exists", name=spec.name)
        fabrics = list(tx.session.exec(select(m.Fabric).order_by(col(m.Fabric.id))))
        lock_fabrics(tx.session, fabrics)
        row = m.QosClass(**spec.model_dump())
        tx.session.add(row)
        tx.session.flush()
        target = f"qos-classes/{row.name}"
        changed = [f for f in fabrics if digest_changed(tx, f)]
        for fabric in changed:
            commit_gate(tx, fabric, "qos-class.create", target)
        if not changed:
            audit_log.record(tx, "qos-class.create", target)
        return qos_view(row)


def list_qos_classes(uow: UnitOfWork, *, limit: int, cursor: str | None) -> Page[QosClassView]:
    """A page of QoS classes (seeded and operator-created) in name order."""
    with uow.transaction(read_only=True) as tx:
        rows, total, after = page_rows(
            tx.session, select(m.QosClass), col(m.QosClass.name), limit, cursor
        )
        return Page(data=[qos_view(r) for r in rows], count=total, next=after)


def tenant_view(tenant: m.Tenant, qos_name: str) -> TenantView:
    """The API shape of a tenant; an empty billing account shows as the tenant's name."""
    return TenantView(
        name=tenant.name,
        kind=tenant.kind,
        status=tenant.status,
        qos_class=qos_name,
        created_at=tenant.created_at,
        offboarded_at=tenant.offboarded_at,
        billing_account=tenant.billing_account or tenant.name,
        max_nodes=tenant.max_nodes,
    )


def _qos_names(session: Session) -> dict[int | None, str]:
    return {q.id: q.name for q in session.exec(select(m.QosClass))}


def create_tenant(uow: UnitOfWork, *, spec: TenantCreate) -> TenantView:
    """Onboard a tenant; names are unique forever (offboarded tenants keep theirs for history)."""
    with uow.transaction() as tx:
        return create_tenant_in(tx, spec=spec)


def create_tenant_in(tx: Tx, *, spec: TenantCreate) -> TenantView:
    """`create_tenant` inside the caller's transaction (a change set's operation)."""
    qos = _qos_class(tx, spec)
    tenant = m.Tenant(
        name=spec.name,
        kind=spec.kind,
        status="active",
        qos_class_id=m.pk(qos),
        created_at=tx.now,
        billing_account=spec.billing_account or spec.name,
    )
    # One Core insert, which the name's unique key refuses for a taken name (a concurrent twin
    # included): use cases read the tenant back by name, the session need not track the row.
    inserted = tx.session.connection().execute(
        _INSERT_TENANT[tx.session.get_bind().dialect.name == "postgresql"],
        tenant.model_dump(exclude={"id"}),
    )
    tenant.id = inserted.scalar()
    if tenant.id is None:
        raise ConflictError(f"tenant '{spec.name}' already exists", name=spec.name)
    created_tenant(tx.session, tenant)
    holds_nothing(tx.session, tenant_id=tenant.id)
    audit_log.record(tx, "tenant.create", f"tenants/{tenant.name}")
    return tenant_view(tenant, qos.name)


def _qos_class(tx: Tx, spec: TenantCreate) -> m.QosClass:
    """The new tenant's QoS class; a taken name is the conflict even with an unknown class."""
    try:
        return qos_class_named(tx.session, spec.qos_class)
    except NotFoundError:
        if tx.session.connection().execute(_TENANT_ID, {"name": spec.name}).first() is not None:
            raise ConflictError(f"tenant '{spec.name}' already exists", name=spec.name) from None
        raise


def _insert_tenant(postgresql: bool) -> ReturningInsert[int | None]:
    insert = postgresql_insert if postgresql else sqlite_insert
    return insert(m.Tenant).on_conflict_do_nothing().returning(col(m.Tenant.id))


# Built once: a change set onboards a thousand tenants.
_TENANT_ID = select(col(m.Tenant.id)).where(col(m.Tenant.name) == bindparam("name"))
_INSERT_TENANT = {flag: _insert_tenant(flag) for flag in (False, True)}


def list_tenants(
    uow: UnitOfWork,
    *,
    limit: int,
    cursor: str | None,
    status: str | None = None,
    kind: str | None = None,
    only: str | None = None,
) -> Page[TenantView]:
    """Tenants by name, filtered by status and kind.

    `only` restricts the list to one tenant: what a tenant-scoped caller may see.
    """
    with uow.transaction(read_only=True) as tx:
        query = select(m.Tenant)
        if only is not None:
            query = query.where(m.Tenant.name == only)
        if status is not None:
            query = query.where(m.Tenant.status == status)
        if kind is not None:
            query = query.where(m.Tenant.kind == kind)
        rows, total, after = page_rows(tx.session, query, col(m.Tenant.name), limit, cursor)
        names = _qos_names(tx.session)
        return Page(
            data=[tenant_view(t, names[t.qos_class_id]) for t in rows], count=total, next=after
        )


def get_tenant(uow: UnitOfWork, *, name: str) -> TenantView:
    """One tenant, offboarded ones included; `NotFoundError` if the name is unknown."""
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, name)
        return tenant_view(tenant, _qos_names(tx.session)[tenant.qos_class_id])


def offboard_tenant(uow: UnitOfWork, *, name: str) -> TenantView:
    """Release all the tenant holds, revoke its tokens and mark it offboarded.

    Its allocations, grants and partitions go. The record stays (status ``offboarded``) for
    audit and billing history. Released P_Keys are quarantined before reuse.

    Raises:
        NotFoundError: no tenant has this name.
        ConflictError: the tenant is already offboarded.
    """
    with uow.transaction() as tx:
        return offboard_tenant_in(tx, name=name)


def offboard_tenant_in(tx: Tx, *, name: str) -> TenantView:
    """`offboard_tenant` inside the caller's transaction (a change set's operation)."""
    # Exclusive: allocations, grants and tenant tokens in flight (they hold the lock shared)
    # commit first and are released below; later ones see the tenant offboarded. Without it
    # they checked the status in their own snapshot and committed after this.
    tenant = lock_tenant(tx.session, name, exclusive=True)
    if tenant.status == "offboarded":
        raise ConflictError(f"tenant '{name}' is already offboarded", name=name)
    lock_token_lineage(tx.session)  # before the fabrics' locks: the lock order
    release_tenant_everywhere(tx, tenant)
    revoke_tenant_tokens(tx, tenant.name)  # its tokens stop working
    tenant.status = "offboarded"
    tenant.offboarded_at = tx.now
    tx.session.add(tenant)
    tx.session.flush()
    audit_log.record(tx, "tenant.offboard", f"tenants/{tenant.name}")
    return tenant_view(tenant, _qos_names(tx.session)[tenant.qos_class_id])
