"""Identifier pools: the lowest free value of a range, taken race-free, with quarantine.

A taken value is a `segment` row; the unique (fabric, kind, value) constraint is the backstop.
Two processes that pick the same free key both INSERT it: the database lets one win, the loser's
insert does nothing and it retries with a fresh view of the taken keys (PostgreSQL READ
COMMITTED sees the winner's row once it commits). Released keys stay held as ``quarantined``
until no deploy target may still hold them (tenancy/record/quarantine.py), so a key is never
handed to a new owner while old configs may still use it; its own owner takes it back first.
A tenant role's take is bounded by the policy's share of the pool (tenancy/record/pool_shares.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Integer,
    Select,
    String,
    Update,
    bindparam,
    case,
    func,
    literal,
    update,
)
from sqlalchemy import select as core_select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql.dml import ReturningInsert
from sqlmodel import Session, col

from policies.errors import ConflictError, PoolExhaustedError
from policies.infiniband.model import format_pkey
from tenancy import models as m
from tenancy.models.columns import UtcDateTime
from tenancy.record.pool_shares import check_share
from tenancy.record.quarantine import expire_by_time, note_taken
from tenancy.store.db import expire_loaded
from tenancy.store.tx_memo import memo
from tenancy.store.uow import Tx

MAX_TAKE_ATTEMPTS = 20
# An owner as the segment columns name it: ``tenant_id``, ``service_id``, ``peering_id``.
Owner = Mapping[str, int | str | None]


@dataclass(frozen=True, slots=True)
class Pool:
    """An identifier pool of a fabric: `kind` names the uniqueness scope, `purpose` the use."""

    kind: str
    purpose: str
    first: int
    last: int
    label: str

    def show(self, value: int) -> str:
        """A value as messages write it: P_Keys in hex (``0x0101``), the rest in decimal."""
        return format_pkey(value) if self.kind == "pkey" else str(value)


def pkey_pool(fabric: m.Fabric) -> Pool:
    """The InfiniBand fabric's P_Key range as a pool (one P_Key per tenant or service)."""
    return Pool("pkey", "pkey", fabric.pkey_first, fabric.pkey_last, "P_Key")


def take_pkey(
    tx: Tx, fabric: m.Fabric, *, tenant_id: int | None = None, service_id: int | None = None
) -> int:
    """Take a key of the fabric's range for a tenant or a service (see `take`); the key.

    Raises:
        PoolExhaustedError: every key of the range is active or still quarantined.
    """
    return take(tx, fabric, pkey_pool(fabric), tenant_id=tenant_id, service_id=service_id)


def take(
    tx: Tx,
    fabric: m.Fabric,
    pool: Pool,
    *,
    tenant_id: int | None = None,
    service_id: int | None = None,
) -> int:
    """Take a value of `pool` on the fabric for a tenant or a service.

    The owner's own quarantined value if it has one, else the lowest free value. Returns the
    value taken. Within one transaction, takes of the same pool resume after the
    previous take instead of rescanning the pool (the memo's ``pool_hints``); the value is
    still the lowest free one.

    Raises:
        PoolExhaustedError: every value of the pool is active or still quarantined.
        PoolShareExceededError: a tenant role takes, and the tenant holds its share.
        ConflictError: concurrent requests took every value tried (retry the request).
    """
    owner = {"tenant_id": tenant_id, "service_id": service_id, "peering_id": None}
    return _take(tx, fabric, pool, owner)


def take_for_peering(tx: Tx, fabric: m.Fabric, pool: Pool, *, peering_id: str) -> int:
    """`take` for an accepted peering (its own partition's P_Key on InfiniBand).

    Raises:
        PoolShareExceededError: a tenant role accepts, and either tenant holds its share.
    """
    return _take(
        tx, fabric, pool, {"tenant_id": None, "service_id": None, "peering_id": peering_id}
    )


def _take(tx: Tx, fabric: m.Fabric, pool: Pool, owner: Owner) -> int:
    """`take` for the owner's columns (``tenant_id``, ``service_id``, ``peering_id``).

    The owner's own quarantined value of the pool comes first: quarantine keeps a value from
    other owners only, and taking it back spends nothing of the pool. Otherwise the lowest free
    value, within the tenants' shares when a tenant role takes (`check_share`).
    """
    fabric_id = m.pk(fabric)
    tx.session.flush()  # the statements below bypass the ORM: pending releases must be rows
    expire_by_time(tx, fabric_id)
    value = _take_back(tx, fabric_id, pool, owner)
    if value is None:
        check_share(tx, fabric, pool, owner)
        value = _take_lowest_free(tx, fabric, pool, owner)
    tenant_id = owner["tenant_id"]
    if isinstance(tenant_id, int):
        _note_taken(tx, fabric_id, tenant_id, pool.purpose, value)
    note_taken(tx.session, fabric_id)
    return value


def _take_lowest_free(tx: Tx, fabric: m.Fabric, pool: Pool, owner: Owner) -> int:
    """Insert the lowest free value of the pool for the owner; the value."""
    fabric_id = m.pk(fabric)
    hints = memo(tx.session, "pool_hints")
    key = (fabric_id, pool.kind, pool.first, pool.last)
    values = {"fabric": fabric_id, "kind": pool.kind, "last": pool.last, "purpose": pool.purpose}
    values |= {**owner, "created_at": tx.now}
    for _ in range(MAX_TAKE_ATTEMPTS):
        start = hints.get(key, pool.first)
        statement = _TAKE[_postgresql(tx)]
        taken = tx.session.connection().execute(statement, values | {"start": start}).scalar()
        if taken is not None:
            hints[key] = taken + 1  # every value up to it is held now
            return int(taken)
        # Nothing was inserted: the pool is exhausted, or a concurrent take took the value
        # (or this owner's slot) first, and the next attempt sees it taken.
        free = lowest_free(tx.session, fabric_id, pool, start)
        if free is None:
            raise _exhausted(tx, fabric, pool)
        hints[key] = free
    raise ConflictError(f"could not take a {pool.label} under contention; retry the request")


def _exhausted(tx: Tx, fabric: m.Fabric, pool: Pool) -> PoolExhaustedError:
    return PoolExhaustedError(
        f"no free {pool.label} left in {pool.show(pool.first)}-{pool.show(pool.last)} "
        f"on fabric '{fabric.name}' (released values stay quarantined until every deploy "
        "target has read back their release; on a fabric without targets for "
        f"{tx.settings.pkey_quarantine_seconds} s)",
        fabric=fabric.name,
    )


def _take_back(tx: Tx, fabric_id: int, pool: Pool, owner: Owner) -> int | None:
    """The owner's lowest quarantined value of the pool, active again; None if it has none.

    A tenant or a service only: a peering is a new owner each time. The value keeps its first
    snapshot, so that a later release still counts its earlier deployments.
    """
    tenant_id, service_id = owner["tenant_id"], owner["service_id"]
    if tenant_id is None and service_id is None:
        return None
    statement = _TAKE_BACK_FOR_TENANT if tenant_id is not None else _TAKE_BACK_FOR_SERVICE
    values = {"in_fabric": fabric_id, "in_kind": pool.kind, "for_purpose": pool.purpose}
    values |= {"from_value": pool.first, "to_value": pool.last}
    values |= {"owner": tenant_id if tenant_id is not None else service_id}
    row = tx.session.connection().execute(statement, values).first()
    if row is None:
        return None
    expire_loaded(tx.session, m.Segment, [row[0]])
    return int(row[1])


def _postgresql(tx: Tx) -> bool:
    return tx.session.get_bind().dialect.name == "postgresql"


def _take_statement(postgresql: bool) -> ReturningInsert[int]:
    """`take`'s one statement for a dialect, built once: insert the lowest free value.

    ``INSERT ... SELECT`` of `lowest_free`'s value with ``ON CONFLICT DO NOTHING`` (no savepoint
    around a failing insert): it inserts nothing when the pool is exhausted or a unique key
    refuses the value, and on PostgreSQL it waits for a concurrent take of the same value to
    commit or roll back. Returns the value taken.
    """
    free = _LOWEST_FREE.subquery("free").c[0]
    row = core_select(
        bindparam("fabric", type_=Integer()),
        bindparam("kind", type_=String()),
        free,
        bindparam("purpose", type_=String()),
        literal("active"),
        bindparam("tenant_id", type_=Integer()),
        bindparam("service_id", type_=Integer()),
        bindparam("peering_id", type_=String()),
        bindparam("created_at", type_=UtcDateTime()),
    ).where(free.is_not(None), free <= bindparam("last"))
    columns = ["fabric_id", "kind", "value", "purpose", "state", "tenant_id", "service_id"]
    columns.append("peering_id")
    insert = postgresql_insert if postgresql else sqlite_insert
    statement = insert(m.Segment).from_select([*columns, "created_at"], row)
    return statement.on_conflict_do_nothing().returning(col(m.Segment.value))


def lowest_free(session: Session, fabric_id: int, pool: Pool, start: int) -> int | None:
    """The pool's lowest value from `start` on that no segment of the fabric holds, or None.

    One ordered pass over the taken values from `start` on the (fabric, kind, value) unique
    index: the first gap before a taken value, else the value after the last taken one.
    The caller knows that every value below `start` is held (`start` is the pool's first
    value, or one past an earlier take of this transaction).
    """
    row = session.connection().execute(_LOWEST_FREE, _bounds(fabric_id, pool, start)).first()
    value = None if row is None or row[0] is None else int(row[0])
    return value if value is not None and value <= pool.last else None


def _bounds(fabric_id: int, pool: Pool, start: int) -> dict[str, object]:
    return {"fabric": fabric_id, "kind": pool.kind, "start": start, "last": pool.last}


def _lowest_free_statement() -> Select[Any]:
    """`lowest_free`'s query, built once (its parameters are bound per call).

    First the count and the greatest of the taken values in [start, last]: when they fill
    [start, greatest] (the usual case: values are taken lowest first) the answer is the one
    after the greatest, from one pass over the index that only counts. Only when there is a gap
    does a second pass look for the first one (the CASE evaluates it then only): the taken
    values in order, each with its predecessor (``start - 1`` for the first), a value more than
    one above its predecessor having a gap below it. A window function rather than a NOT
    EXISTS anti-join: its cost does not depend on the planner's statistics (a freshly
    bulk-loaded table made PostgreSQL rescan the index per row).
    """
    value = col(m.Segment.value)
    in_pool = (
        col(m.Segment.fabric_id) == bindparam("fabric"),
        col(m.Segment.kind) == bindparam("kind"),
        value.between(bindparam("start"), bindparam("last")),
    )
    previous = func.lag(value, 1, bindparam("start") - 1).over(order_by=value)
    ordered = core_select(value.label("value"), previous.label("previous")).where(*in_pool)
    runs = ordered.subquery()
    first_gap = core_select(func.min(runs.c.previous + 1)).where(runs.c.value > runs.c.previous + 1)
    held = core_select(func.count(value).label("n"), func.max(value).label("top"))
    counted = held.where(*in_pool).subquery()
    free = case(
        (counted.c.n == 0, bindparam("start")),
        (counted.c.top - bindparam("start") + 1 == counted.c.n, counted.c.top + 1),
        else_=first_gap.scalar_subquery(),
    )
    return core_select(free).select_from(counted)


_LOWEST_FREE = _lowest_free_statement()
_TAKE = {flag: _take_statement(flag) for flag in (False, True)}


def held_values(
    session: Session, fabric_id: int, *, tenant_id: int | None = None, service_id: int | None = None
) -> dict[str, int]:
    """The active identifiers an owner (a tenant or a service: one id) holds on a fabric.

    By purpose: on InfiniBand that is ``{"pkey": <P_Key>}`` once the owner holds its partition.
    """
    if tenant_id is not None and tenant_id in memo(session, "new_owners"):
        return dict(memo(session, "held_by_new").get((fabric_id, tenant_id), {}))
    session.flush()  # a Core read: this transaction's pending takes and releases first
    statement, owner = (
        (_HELD_BY_SERVICE, service_id) if tenant_id is None else (_HELD_BY_TENANT, tenant_id)
    )
    rows = session.connection().execute(statement, {"fabric": fabric_id, "owner": owner})
    return {purpose: int(value) for purpose, value in rows}


def holds_nothing(session: Session, *, tenant_id: int) -> None:
    """Say that this transaction created the tenant: it holds what this transaction takes.

    `held_values` then answers from memory until any identifier is released in this
    transaction (tenancy/record/quarantine.py `forget_pool_memos`).
    """
    memo(session, "new_owners")[tenant_id] = True


def _note_taken(tx: Tx, fabric_id: int, tenant_id: int | None, purpose: str, value: int) -> None:
    if tenant_id is not None and tenant_id in memo(tx.session, "new_owners"):
        memo(tx.session, "held_by_new").setdefault((fabric_id, tenant_id), {})[purpose] = value


def _held_statement(owner: Any) -> Select[str, int]:
    """`held_values`'s statement for one owner column, built once."""
    return core_select(col(m.Segment.purpose), col(m.Segment.value)).where(
        col(m.Segment.fabric_id) == bindparam("fabric"),
        col(m.Segment.state) == "active",
        col(owner) == bindparam("owner"),
    )


_HELD_BY_TENANT = _held_statement(m.Segment.tenant_id)
_HELD_BY_SERVICE = _held_statement(m.Segment.service_id)


def _take_back_statement(owner: Any) -> Update:
    """`_take_back`'s statement for one owner column, built once.

    Its parameters are not named after columns: an UPDATE reserves those for its SET clause.
    """
    own = (
        core_select(col(m.Segment.id))
        .where(
            col(m.Segment.fabric_id) == bindparam("in_fabric"),
            col(m.Segment.kind) == bindparam("in_kind"),
            col(m.Segment.purpose) == bindparam("for_purpose"),
            col(m.Segment.state) == "quarantined",
            col(m.Segment.value).between(bindparam("from_value"), bindparam("to_value")),
            col(owner) == bindparam("owner"),
        )
        .order_by(col(m.Segment.value))
        .limit(1)
        .scalar_subquery()
    )
    return (
        update(m.Segment)
        .where(col(m.Segment.id) == own)
        .values(state="active", released_at=None, drain_snapshot_id=None)
        .returning(col(m.Segment.id), col(m.Segment.value))
    )


_TAKE_BACK_FOR_TENANT = _take_back_statement(m.Segment.tenant_id)
_TAKE_BACK_FOR_SERVICE = _take_back_statement(m.Segment.service_id)
