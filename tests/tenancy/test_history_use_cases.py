"""Released allocations and revoked grants stay readable with a state filter (issue 10, item 24)."""

from __future__ import annotations

import pytest

from policies.errors import NotFoundError
from tenancy.store.history import AllocationState, GrantState
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, shared_services


def allocation_ids(uow: UnitOfWork, tenant: str, state: AllocationState) -> list[str]:
    page = allocations.list_allocations(
        uow, tenant_name=tenant, limit=100, cursor=None, state=state
    )
    return [view.id for view in page.data]


def grant_ids(uow: UnitOfWork, tenant: str, state: GrantState) -> list[str]:
    page = shared_services.list_grants(uow, tenant_name=tenant, limit=100, cursor=None, state=state)
    return [view.id for view in page.data]


def test_a_released_allocation_is_listed_by_state_with_its_nodes_and_end(uow, onboarded, clock):
    acme = onboarded.allocation_ids["acme"]
    before = allocations.get_allocation(uow, tenant_name="acme", allocation_id=acme)
    clock.advance(60)

    allocations.release_allocation(uow, tenant_name="acme", allocation_id=acme)

    assert allocation_ids(uow, "acme", "active") == []
    assert allocation_ids(uow, "acme", "released") == [acme]
    assert allocation_ids(uow, "acme", "all") == [acme]
    view = allocations.get_allocation(uow, tenant_name="acme", allocation_id=acme, state="released")
    assert (view.nodes, view.released_at, view.segment) == (before.nodes, clock.now, None)
    assert before.nodes  # the nodes come back from history, not from an empty list


def test_a_current_allocation_is_not_released(uow, onboarded):
    acme = onboarded.allocation_ids["acme"]

    assert allocation_ids(uow, "acme", "released") == []
    with pytest.raises(NotFoundError):
        allocations.get_allocation(uow, tenant_name="acme", allocation_id=acme, state="released")
    assert (
        allocations.get_allocation(uow, tenant_name="acme", allocation_id=acme, state="all").segment
        is not None
    )


def test_a_released_allocation_is_still_a_404_by_default_and_for_other_tenants(uow, onboarded):
    acme = onboarded.allocation_ids["acme"]
    allocations.release_allocation(uow, tenant_name="acme", allocation_id=acme)

    with pytest.raises(NotFoundError):
        allocations.get_allocation(uow, tenant_name="acme", allocation_id=acme)
    with pytest.raises(NotFoundError):
        allocations.get_allocation(uow, tenant_name="globex", allocation_id=acme, state="all")
    assert acme not in allocation_ids(uow, "globex", "all")


def test_a_revoked_grant_is_listed_by_state_with_its_revocation_time(uow, onboarded, clock):
    grant = onboarded.grant_ids["acme"]
    clock.advance(60)

    shared_services.revoke_grant(uow, tenant_name="acme", grant_id=grant)

    assert grant_ids(uow, "acme", "active") == []
    assert grant_ids(uow, "acme", "revoked") == grant_ids(uow, "acme", "all") == [grant]
    view = shared_services.get_grant(uow, tenant_name="acme", grant_id=grant, state="revoked")
    assert (view.service, view.revoked_at) == ("storage", clock.now)
    with pytest.raises(NotFoundError):
        shared_services.get_grant(uow, tenant_name="acme", grant_id=grant)
    with pytest.raises(NotFoundError):
        shared_services.get_grant(uow, tenant_name="globex", grant_id=grant, state="all")
