"""Usage intervals are recorded in the transaction of the change that causes them (issue 6)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlmodel import Session, col, select

from policies.errors import ConflictError, IsolationViolationError
from tenancy import models as m
from tenancy.schemas import AllocationCreate, GrantCreate, TenantCreate
from tenancy.usecases import allocations, grant_records, shared_services, tenants
from tests.builders import FABRIC, SERVICE, rows

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
INTERVALS = (
    "SELECT t.name, u.billing_account, u.qos_class, u.resource_type, u.resource, u.ports, "
    "u.started_at IS NOT NULL, u.ended_at IS NULL FROM usage_interval u "
    "JOIN tenant t ON t.id = u.tenant_id ORDER BY t.name, u.resource_type, u.resource"
)


def _intervals(uow, tenant: str | None = None) -> list[tuple[str, str, datetime, datetime | None]]:
    """(resource_type, resource, start, end) of a tenant's intervals, through the ORM."""
    with Session(uow.engine) as session:
        query = select(m.UsageInterval, m.Tenant).where(
            col(m.Tenant.id) == col(m.UsageInterval.tenant_id)
        )
        if tenant is not None:
            query = query.where(m.Tenant.name == tenant)
        return sorted(
            (i.resource_type, i.resource, i.started_at, i.ended_at) for i, _t in session.exec(query)
        )


def test_onboarding_opens_one_interval_per_node_with_its_ports_and_one_per_grant(
    uow, onboarded, engine
):
    assert rows(engine, INTERVALS) == [
        ("acme", "acme", "gold", "node", "gpu0001", 2, 1, 1),
        ("acme", "acme", "gold", "node", "gpu0002", 2, 1, 1),
        ("acme", "acme", "gold", "service", "storage", 0, 1, 1),
        ("globex", "globex", "bronze", "node", "gpu0005", 2, 1, 1),
        ("globex", "globex", "bronze", "node", "gpu0006", 2, 1, 1),
        ("research", "research", "silver", "node", "gpu0003", 2, 1, 1),
        ("research", "research", "silver", "node", "gpu0004", 2, 1, 1),
    ]


def test_the_billing_account_defaults_to_the_tenant_name_and_is_copied_into_intervals(
    uow, onboarded, engine, clock
):
    view = tenants.create_tenant(
        uow, spec=TenantCreate(name="initech", kind="external", billing_account="acct:INI-7")
    )
    allocations.allocate(
        uow, tenant_name="initech", spec=AllocationCreate(fabric=FABRIC, nodes=["gpu0007"])
    )

    assert view.billing_account == "acct:INI-7"
    assert rows(
        engine,
        "SELECT billing_account, qos_class FROM usage_interval WHERE resource = 'gpu0007'",
    ) == [("acct:INI-7", "bronze")]


def test_release_and_revoke_close_the_intervals_at_the_transaction_time(uow, onboarded, clock):
    clock.advance(90 * 60)
    allocations.release_allocation(
        uow, tenant_name="acme", allocation_id=onboarded.allocation_ids["acme"]
    )
    clock.advance(15 * 60)
    shared_services.revoke_grant(uow, tenant_name="acme", grant_id=onboarded.grant_ids["acme"])

    released, revoked = (
        datetime(2026, 3, 1, 13, 30, tzinfo=UTC),
        datetime(2026, 3, 1, 13, 45, tzinfo=UTC),
    )
    assert _intervals(uow, "acme") == [
        ("node", "gpu0001", T0, released),
        ("node", "gpu0002", T0, released),
        ("service", "storage", T0, revoked),
    ]
    assert all(end is None for *_rest, end in _intervals(uow, "globex"))


def test_a_new_grant_and_allocation_open_intervals_at_the_transaction_time(uow, onboarded, clock):
    clock.advance(3600)
    shared_services.grant_service(
        uow, tenant_name="globex", spec=GrantCreate(fabric=FABRIC, service=SERVICE)
    )
    allocations.allocate(uow, tenant_name="globex", spec=AllocationCreate(fabric=FABRIC, count=1))

    later = datetime(2026, 3, 1, 13, 0, tzinfo=UTC)
    assert _intervals(uow, "globex") == [
        ("node", "gpu0005", T0, None),
        ("node", "gpu0006", T0, None),
        ("node", "gpu0007", later, None),
        ("service", "storage", later, None),
    ]


def test_a_refused_allocation_records_no_interval(uow, onboarded, engine, monkeypatch, db_dump):
    before = db_dump()

    def refuse(tx, fabric, action, target, scope=None):
        raise IsolationViolationError("refused by the verifier", counterexamples=[])

    monkeypatch.setattr(allocations, "commit_gate", refuse)
    with pytest.raises(IsolationViolationError):
        allocations.allocate(
            uow, tenant_name="research", spec=AllocationCreate(fabric=FABRIC, nodes=["gpu0007"])
        )
    with pytest.raises(ConflictError):  # already held: refused before anything is written
        allocations.allocate(
            uow, tenant_name="research", spec=AllocationCreate(fabric=FABRIC, nodes=["gpu0001"])
        )

    assert db_dump() == before
    assert rows(engine, "SELECT count(*) FROM usage_interval WHERE resource = 'gpu0007'") == [(0,)]


def test_a_refused_grant_records_no_interval(uow, onboarded, engine, monkeypatch):
    def refuse(tx, fabric, action, target, scope=None):
        raise IsolationViolationError("refused by the verifier", counterexamples=[])

    monkeypatch.setattr(grant_records, "commit_gate", refuse)
    with pytest.raises(IsolationViolationError):
        shared_services.grant_service(
            uow, tenant_name="globex", spec=GrantCreate(fabric=FABRIC, service=SERVICE)
        )

    assert rows(engine, "SELECT count(*) FROM usage_interval WHERE resource_type = 'service'") == [
        (1,)
    ]


def test_offboarding_closes_everything_at_the_offboarding_time(uow, onboarded, clock):
    clock.advance(2 * 3600 + 17)
    tenants.offboard_tenant(uow, name="acme")

    gone = datetime(2026, 3, 1, 14, 0, 17, tzinfo=UTC)
    assert [end for *_rest, end in _intervals(uow, "acme")] == [gone, gone, gone]
    assert all(end is None for *_rest, end in _intervals(uow, "research"))
