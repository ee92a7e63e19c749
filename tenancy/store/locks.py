"""Serialise the mutations of one fabric, of one tenant's lifecycle and of token lineage.

Verify-before-commit checks a global property of the whole fabric (isolation, per-port key
budgets), so two transactions that each verify their own change could both commit and together
break it (write skew under READ COMMITTED). Every mutating use case therefore takes the fabric's
lock before it reads the state it decides on: a PostgreSQL transaction-scoped advisory lock (the
pattern NetBox uses for its available-ID endpoints); SQLite already serialises writers with
BEGIN IMMEDIATE (tenancy/store/db.py).

The same write skew exists between a tenant's offboarding and whatever gives that tenant
something (an allocation, a grant, a token, a proof): each checked the tenant's status in its
own snapshot, so an allocation could commit after an offboarding that never saw it. Those use
cases lock the tenant's row (`lock_tenant`) and re-read its status under it.

Lock order, the same in every transaction so that none waits in a cycle: the tenant row (several:
by name), then its quota lock (several: by tenant id), then the token lineage lock, then fabric
locks in id order, then the audit log's lock (taken by the first audit record, so every other lock
is taken before anything is recorded). A change set, whose operations each take their own,
takes them all ahead in this order (tenancy/usecases/changesets.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import bindparam, text
from sqlmodel import Session, select
from sqlmodel.sql.expression import SelectOfScalar

from policies.errors import ConflictError
from tenancy import models as m
from tenancy.store.lookups import known_tenant, tenant_not_found
from tenancy.store.tx_memo import memo

# First key of pg_advisory_xact_lock(int, int): the lock class for fabrics ("IF" in ASCII).
FABRIC_LOCK_CLASS = 0x4946
# First key of a tenant's node quota lock ("QT"; the second is the tenant's id).
TENANT_QUOTA_LOCK_CLASS = 0x5154
# The one lock over the parent/child graph of API tokens ("TK"): minting a child and revoking
# an ancestor must not interleave, or the child outlives its revoked parent.
TOKEN_LINEAGE_LOCK = (0x544B, 0)
# The policy document's lock ("PL"): a policy change and a fabric's creation do not interleave,
# so two changes never take one version number and no new fabric misses a version.
POLICY_LOCK = (0x504C, 0)
# The migration lock ("MG"), a session lock held while a server migrates and seeds at start:
# replicas started together otherwise both create `alembic_version` and one fails.
MIGRATION_LOCK = (0x4D47, 0)


def _postgresql(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def lock_fabrics(session: Session, fabrics: Iterable[m.Fabric]) -> None:
    """Block until this transaction holds the mutation lock of each fabric (in id order)."""
    if not _postgresql(session):
        return
    # A lock this transaction took stays held until it ends (the memo is dropped with it, and
    # on a rollback to a savepoint, which may have released it): no second round trip.
    held = memo(session, "fabric_locks")
    for fabric_id in sorted({m.pk(f) for f in fabrics} - held.keys()):
        session.connection().execute(
            text("SELECT pg_advisory_xact_lock(:cls, :fabric)"),
            {"cls": FABRIC_LOCK_CLASS, "fabric": fabric_id},
        )
        held[fabric_id] = True
        # A policy change holds every fabric's lock: one read before this lock may be stale.
        memo(session, "policy").clear()


def lock_fabric(session: Session, fabric: m.Fabric) -> m.Fabric:
    """`lock_fabrics` for one fabric; returns it for chaining."""
    lock_fabrics(session, [fabric])
    return fabric


def lock_tenant(session: Session, name: str, *, exclusive: bool = False) -> m.Tenant:
    """Lock the named tenant's row until commit and return it as last committed.

    Use cases that give the tenant something take the lock shared (``FOR SHARE``), so they run
    side by side; offboarding takes it exclusive, so it waits until they have committed (and then
    sees what they gave) and they, once it has committed, read the tenant as offboarded.
    Exclusive is ``FOR NO KEY UPDATE``: unlike ``FOR UPDATE`` it does not wait for the key-share
    locks that inserting rows with a foreign key to the tenant takes. SQLite needs no row lock
    (BEGIN IMMEDIATE), where this is a plain re-read.

    Raises:
        NotFoundError: no tenant has this name.
    """
    created = memo(session, "created_tenants")
    if not exclusive and name in created:
        # Inserted by this transaction: nobody else sees the row, nothing changed it since.
        return created[name]  # type: ignore[no-any-return]
    created.pop(name, None)  # offboarding changes it: read it from now on
    locked = _TENANT_EXCLUSIVE if exclusive else _TENANT_SHARED
    tenant = session.exec(locked, params={"name": name}).first()
    if tenant is None:
        raise tenant_not_found(name)
    return known_tenant(session, tenant)


def _tenant_lock(exclusive: bool) -> SelectOfScalar[m.Tenant]:
    """The tenant's locking read, built once (statements are costly to build per call).

    One statement; populate_existing re-reads a row the session holds already (the status may
    have changed while this transaction waited for the lock).
    """
    query = select(m.Tenant).where(m.Tenant.name == bindparam("name"))
    locked = (
        query.with_for_update(key_share=True) if exclusive else query.with_for_update(read=True)
    )
    return locked.execution_options(populate_existing=True)


_TENANT_SHARED, _TENANT_EXCLUSIVE = _tenant_lock(False), _tenant_lock(True)


def created_tenant(session: Session, tenant: m.Tenant) -> None:
    """Say that this transaction inserted `tenant` (with its id): `lock_tenant` returns it."""
    memo(session, "created_tenants")[tenant.name] = known_tenant(session, tenant)


def lock_active_tenant(session: Session, name: str) -> m.Tenant:
    """`lock_tenant` shared, for a use case that gives the tenant something.

    Raises:
        NotFoundError: no tenant has this name.
        ConflictError: the tenant is offboarded (checked under the lock): it may acquire nothing.
    """
    tenant = lock_tenant(session, name)
    if tenant.status != "active":
        raise ConflictError(f"tenant '{tenant.name}' is {tenant.status}", tenant=tenant.name)
    return tenant


def lock_tenant_quota(session: Session, tenant: m.Tenant) -> None:
    """Block until this transaction holds `tenant`'s quota lock (after its row, before fabrics).

    A quota counts nodes across fabrics, whose locks do not serialise two changes of one tenant
    on two fabrics (tenancy/usecases/quotas.py).
    """
    if _postgresql(session):
        session.connection().execute(
            text("SELECT pg_advisory_xact_lock(:cls, :tenant)"),
            {"cls": TENANT_QUOTA_LOCK_CLASS, "tenant": m.pk(tenant)},
        )


def lock_token_lineage(session: Session) -> None:
    """Block until this transaction holds the lock over token parents and revocations."""
    if _postgresql(session):
        session.connection().execute(
            text("SELECT pg_advisory_xact_lock(:a, :b)"),
            {"a": TOKEN_LINEAGE_LOCK[0], "b": TOKEN_LINEAGE_LOCK[1]},
        )


def lock_policy(session: Session) -> None:
    """Block until this transaction holds the policy document's lock (before any fabric's).

    Taken by a policy change, and by a fabric's creation: with no fabric to lock, two policy
    changes would otherwise both write the same next version (one refused by its key), and a
    fabric created meanwhile would be verified under a policy that is no longer in force.
    """
    if _postgresql(session):
        session.connection().execute(
            text("SELECT pg_advisory_xact_lock(:a, :b)"),
            {"a": POLICY_LOCK[0], "b": POLICY_LOCK[1]},
        )
