"""Change sets: up to 10,000 operations, applied and verified as one unit.

The operations run in order in one transaction, each through the same tenancy function as its
own route (`*_in`), with the commit gate deferred (tenancy/gate/change_batch.py): every operation
appends its audit entry, and each touched fabric is verified once at the end over all the
owners the operations touched. Any failure, an operation's or the verification's, rolls the
whole change set back; the problem names the failing operation's index. This is how an operator
onboards a thousand tenants in one request.

Before the first operation runs, the change set takes every lock its operations will take, in
the order of tenancy/store/locks.py: the named tenants' rows (by name), their quota locks, then
the fabrics. Taken operation by operation instead, operation 0's audit entry would hold the
audit log's lock while operation 1 waits for a fabric that another change set holds while it
waits for the audit log: a deadlock on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel
from sqlalchemy import or_
from sqlmodel import col, select

from policies.errors import IsofabricError, NotFoundError
from tenancy import models as m
from tenancy.gate.change_batch import ChangeBatch, deferred_gate
from tenancy.gate.verification import close_batch
from tenancy.gate.what_if import DryRunDone, committing, preview
from tenancy.schemas import (
    AllocationCreate,
    AllocationView,
    GrantCreate,
    GrantView,
    PartitionCreate,
    PartitionView,
    TenantCreate,
    TenantView,
)
from tenancy.schemas.changesets import (
    AllocateOp,
    ChangeSetCreate,
    ChangeSetView,
    CreatePartitionOp,
    CreateTenantOp,
    DeletePartitionOp,
    FabricOutcome,
    GrantOp,
    OffboardOp,
    Operation,
    OperationResult,
    PartitionOps,
    ReleaseOp,
    RevokeOp,
    SetMembersOp,
)
from tenancy.store.locks import lock_fabrics, lock_tenant, lock_tenant_quota
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.usecases.allocations import allocate_in, release_allocation_in
from tenancy.usecases.partitions import create_partition_in, delete_partition_in, set_members_in
from tenancy.usecases.shared_services import grant_service_in, revoke_grant_in
from tenancy.usecases.tenants import create_tenant_in, offboard_tenant_in

# What an operation's own route answers (OperationResult.result).
Outcome = TenantView | AllocationView | GrantView | PartitionView


def apply_changeset(uow: UnitOfWork, *, spec: ChangeSetCreate) -> ChangeSetView:
    """Apply every operation in order, verify each touched fabric once, commit all or nothing.

    Raises:
        IsofabricError: the first operation that fails (its `operation` extension is its
            index), or `IsolationViolationError` from the final verification; nothing changed.
    """
    if spec.dry_run or uow.dry_run:  # the body's flag, or ?dry_run=true
        return _dry_run(committing(uow), spec)
    with uow.transaction() as tx:
        lock_ahead(tx, spec.operations)
        with deferred_gate(tx, close_batch) as batch:
            results = [run_operation(tx, index, op) for index, op in enumerate(spec.operations)]
        return ChangeSetView(dry_run=False, results=results, fabrics=outcomes(batch))


def lock_ahead(tx: Tx, operations: Sequence[Operation]) -> None:
    """Take the locks `operations` will take, in the documented order (tenancy/store/locks.py).

    Operations take them again as they run, which waits for nothing. A tenant the change set
    creates, or that does not exist, is left to its operation (which reports it).
    """
    if tx.session.get_bind().dialect.name != "postgresql":
        return  # SQLite serialises writers: a transaction holds the whole database
    tenants = _lock_tenants(tx, operations)
    allocating = {op.tenant for op in operations if isinstance(op, AllocateOp)}
    for tenant in sorted(tenants, key=m.pk):
        if tenant.name in allocating:
            lock_tenant_quota(tx.session, tenant)
    lock_fabrics(tx.session, _fabrics_touched(tx, operations, tenants))


def _lock_tenants(tx: Tx, operations: Sequence[Operation]) -> list[m.Tenant]:
    named = {op.tenant for op in operations if not isinstance(op, CreateTenantOp)}
    offboarded = {op.tenant for op in operations if isinstance(op, OffboardOp)}
    locked = []
    for name in sorted(named):
        try:
            locked.append(lock_tenant(tx.session, name, exclusive=name in offboarded))
        except NotFoundError:
            continue
    return locked


def _fabrics_touched(
    tx: Tx, operations: Sequence[Operation], tenants: Sequence[m.Tenant]
) -> list[m.Fabric]:
    """The fabrics the operations may change: those named by allocations and grants.

    And every fabric where a tenant whose allocation, grant or tenancy ends holds a segment: a
    superset (the lock of a fabric the operation then leaves alone costs a round trip).
    """
    named = {
        op.fabric
        for op in operations
        if isinstance(op, AllocateOp | GrantOp | PartitionOps) and op.fabric is not None
    }
    ending = {
        op.tenant
        for op in operations
        if isinstance(op, ReleaseOp | RevokeOp | OffboardOp | SetMembersOp | DeletePartitionOp)
    }
    ids = [m.pk(t) for t in tenants if t.name in ending]
    query = select(m.Fabric).where(
        or_(
            col(m.Fabric.name).in_(named),
            col(m.Fabric.id).in_(
                select(m.Segment.fabric_id).where(col(m.Segment.tenant_id).in_(ids))
            ),
        )
    )
    return list(tx.session.exec(query))


def _dry_run(uow: UnitOfWork, spec: ChangeSetCreate) -> ChangeSetView:
    """Run the operations, report what they would do, and roll everything back."""
    try:
        with uow.transaction() as tx:
            results, what_if = preview(
                tx, lambda: [run_operation(tx, i, op) for i, op in enumerate(spec.operations)]
            )
            fabrics = [
                FabricOutcome(
                    fabric=f.fabric, holds=f.holds, snapshot_digest=f.snapshot_digest_after
                )
                for f in what_if
            ]
            view = ChangeSetView(dry_run=True, results=results, fabrics=fabrics, what_if=what_if)
            raise DryRunDone(view)
    except DryRunDone as done:
        assert isinstance(done.answer, ChangeSetView)
        return done.answer


def run_operation(tx: Tx, index: int, op: Operation) -> OperationResult:
    """Run one operation in the change set's transaction; a failure names its index."""
    try:
        view = _RUNNERS[type(op)](tx, op)
    except IsofabricError as error:
        error.detail = f"operation {index} ({op.op}): {error.detail}"
        error.extensions["operation"] = index
        raise
    return OperationResult(index=index, op=op.op, result=view)


def outcomes(batch: ChangeBatch) -> list[FabricOutcome]:
    """Each touched fabric with the digest its one verification produced."""
    return [
        FabricOutcome(
            fabric=changes.fabric.name,
            holds=True,  # a fabric that did not hold raised before this
            snapshot_digest=changes.entries[-1].digest_after or "",
        )
        for changes in batch.fabrics.values()
    ]


def _fields(op: BaseModel, *drop: str) -> dict[str, Any]:
    return op.model_dump(exclude={"op", *drop}, exclude_unset=True)


def _create_tenant(tx: Tx, op: Any) -> Outcome:
    return create_tenant_in(tx, spec=TenantCreate.model_validate(_fields(op)))


def _allocate(tx: Tx, op: Any) -> Outcome:
    spec = AllocationCreate.model_validate(_fields(op, "tenant"))
    return allocate_in(tx, tenant_name=op.tenant, spec=spec)


def _release(tx: Tx, op: Any) -> None:
    release_allocation_in(tx, tenant_name=op.tenant, allocation_id=op.allocation_id)


def _grant(tx: Tx, op: Any) -> Outcome:
    spec = GrantCreate.model_validate(_fields(op, "tenant"))
    return grant_service_in(tx, tenant_name=op.tenant, spec=spec)


def _revoke(tx: Tx, op: Any) -> None:
    revoke_grant_in(tx, tenant_name=op.tenant, grant_id=op.grant_id)


def _offboard(tx: Tx, op: Any) -> Outcome:
    return offboard_tenant_in(tx, name=op.tenant)


def _create_partition(tx: Tx, op: Any) -> Outcome:
    spec = PartitionCreate.model_validate(_fields(op, "tenant"))
    return create_partition_in(tx, tenant_name=op.tenant, spec=spec)


def _set_members(tx: Tx, op: Any) -> Outcome:
    return set_members_in(
        tx, tenant_name=op.tenant, name=op.name, members=op.members, fabric=op.fabric
    )


def _delete_partition(tx: Tx, op: Any) -> None:
    delete_partition_in(tx, tenant_name=op.tenant, name=op.name, fabric=op.fabric)


_RUNNERS: dict[type, Callable[[Tx, Any], Outcome | None]] = {
    CreateTenantOp: _create_tenant,
    AllocateOp: _allocate,
    ReleaseOp: _release,
    GrantOp: _grant,
    RevokeOp: _revoke,
    OffboardOp: _offboard,
    CreatePartitionOp: _create_partition,
    SetMembersOp: _set_members,
    DeletePartitionOp: _delete_partition,
}
