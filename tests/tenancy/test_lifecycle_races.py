"""Offboarding races whatever gives the tenant something (issue 10, item 3), with real concurrency.

Allocations, grants, tenant tokens and proofs checked that the tenant was active in their own
snapshot, before they took any lock, and offboarding locked only the fabrics the tenant already
held something on: on PostgreSQL an allocation or a grant could commit after an offboarding that
never saw it, and the offboarded tenant kept its nodes, its P_Key, its grant and an open usage
interval. Whatever the interleaving, no offboarded tenant may hold anything afterwards.

The same tests run on a shared SQLite file, where BEGIN IMMEDIATE serialises the writers: there
they pin the sequential rules (an offboarded tenant acquires nothing, its tokens stop working).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine

from policies.errors import ConflictError
from tenancy.gate import verification
from tenancy.schemas import (
    AllocationCreate,
    GrantCreate,
    NodePatch,
    ServiceCreate,
    TenantCreate,
    TokenCreate,
)
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, fabrics, nodes, proofs, shared_services, tenants, tokens
from tenancy.usecases import topology as topology_use_cases
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import fabric_spec, generated_topology, rows
from tests.tenancy.test_races import race

FABRIC = "ib-life"
STORAGE = ("st01", "st02")
COMPUTE = tuple(f"cn{number:03d}" for number in range(1, 41))
TENANTS = tuple(f"t{number:02d}" for number in range(20))
WORKERS = 12  # connections at once: below the engine's pool (5 + 10 overflow) and the server's
UseCase = Callable[[UnitOfWork], Any]

# Everything an offboarded tenant could still hold, one row per leftover: (tenant, what, which).
LEFTOVERS = """
SELECT t.name, 'allocation', a.id FROM allocation a JOIN tenant t ON t.id = a.tenant_id
 WHERE t.status = 'offboarded' AND a.released_at IS NULL
UNION ALL
SELECT t.name, 'node', n.name FROM node_assignment na JOIN node n ON n.id = na.node_id
  JOIN allocation a ON a.id = na.allocation_id JOIN tenant t ON t.id = a.tenant_id
 WHERE t.status = 'offboarded'
UNION ALL
SELECT t.name, 'grant', g.id FROM "grant" g JOIN tenant t ON t.id = g.tenant_id
 WHERE t.status = 'offboarded' AND g.revoked_at IS NULL
UNION ALL
SELECT t.name, 'segment', CAST(s.value AS VARCHAR(16)) FROM segment s
  JOIN tenant t ON t.id = s.tenant_id WHERE t.status = 'offboarded' AND s.state = 'active'
UNION ALL
SELECT t.name, 'usage', u.resource FROM usage_interval u JOIN tenant t ON t.id = u.tenant_id
 WHERE t.status = 'offboarded' AND u.ended_at IS NULL
UNION ALL
SELECT t.name, 'token', k.id FROM api_token k JOIN tenant t ON t.name = k.tenant
 WHERE t.status = 'offboarded' AND k.revoked_at IS NULL
"""


@dataclass(frozen=True)
class Lifecycle:
    url: str
    engine: Engine

    def uow(self) -> UnitOfWork:
        return UnitOfWork(self.engine, Settings(database_url=self.url))


@pytest.fixture
def lifecycle(shared_url: str) -> Iterator[Lifecycle]:
    """One fabric with 40 free compute nodes and a storage service; 20 tenants holding nothing."""
    engine = make_engine(shared_url)
    prepare_database(engine)
    setup = Lifecycle(shared_url, engine)
    uow = setup.uow()
    fabrics.create_fabric(uow, spec=fabric_spec(FABRIC))
    topology_use_cases.import_topology(
        uow, fabric_name=FABRIC, text=generated_topology(STORAGE + COMPUTE)
    )
    for node in STORAGE:
        nodes.set_node_role(
            uow, fabric_name=FABRIC, node_name=node, patch=NodePatch(role="storage")
        )
    shared_services.create_service(
        uow, fabric_name=FABRIC, spec=ServiceCreate(name="storage", nodes=list(STORAGE))
    )
    for name in TENANTS:
        tenants.create_tenant(uow, spec=TenantCreate(name=name, kind="external"))
    try:
        yield setup
    finally:
        engine.dispose()


def allocate(tenant: str) -> UseCase:
    spec = AllocationCreate(fabric=FABRIC, count=1)
    return lambda uow: allocations.allocate(uow, tenant_name=tenant, spec=spec)


def grant(tenant: str) -> UseCase:
    spec = GrantCreate(fabric=FABRIC, service="storage")
    return lambda uow: shared_services.grant_service(uow, tenant_name=tenant, spec=spec)


def mint(tenant: str) -> UseCase:
    spec = TokenCreate(name=f"{tenant}-ci", role="tenant-admin", tenant=tenant)
    return lambda uow: tokens.create_token(uow, spec=spec)


def offboard(tenant: str) -> UseCase:
    return lambda uow: tenants.offboard_tenant(uow, name=tenant)


def prove(tenant: str) -> UseCase:
    return lambda uow: proofs.issue(uow, tenant_name=tenant, fabric_name=FABRIC)


def leftovers(engine: Engine) -> list[tuple[Any, ...]]:
    return sorted(rows(engine, LEFTOVERS))


def still_authenticating(setup: Lifecycle, secrets: list[str]) -> list[str]:
    return [s for s in secrets if tokens.authenticate(setup.uow(), secret=s) is not None]


# --- the interleavings, pinned down (tests/tenancy/test_races.py) ------------------------------

GIVERS = {"allocate": allocate, "grant": grant, "mint-token": mint}


@pytest.mark.parametrize("giver", list(GIVERS))
def test_whatever_commits_after_the_offboarding_is_refused(lifecycle, giver):
    winner, loser = race(lifecycle.url, offboard("t00"), GIVERS[giver]("t00"))

    assert winner.error is None, repr(winner.error)
    assert isinstance(loser.error, ConflictError), repr(loser.error)
    assert "offboarded" in str(loser.error)
    assert leftovers(lifecycle.engine) == []


@pytest.mark.parametrize("giver", list(GIVERS))
def test_an_offboarding_waits_for_what_was_given_and_takes_it_back(lifecycle, giver):
    given, offboarded = race(lifecycle.url, GIVERS[giver]("t00"), offboard("t00"))

    assert given.error is None, repr(given.error)
    assert offboarded.error is None, repr(offboarded.error)
    assert leftovers(lifecycle.engine) == []
    secrets = [given.value.token] if giver == "mint-token" else []
    assert still_authenticating(lifecycle, secrets) == []


def test_no_isolation_proof_is_issued_to_a_tenant_offboarded_meanwhile(lifecycle):
    winner, loser = race(lifecycle.url, offboard("t00"), prove("t00"))

    assert winner.error is None, repr(winner.error)
    assert isinstance(loser.error, ConflictError), repr(loser.error)
    assert rows(lifecycle.engine, "SELECT count(*) FROM proof") == [(0,)]


# --- many tenants at once ----------------------------------------------------------------------


@dataclass
class Attempt:
    tenant: str
    request: str
    value: Any = None
    refusal: str | None = None
    crash: str | None = None


def attempt(setup: Lifecycle, tenant: str, request: str, use_case: UseCase) -> Attempt:
    outcome = Attempt(tenant, request)
    try:
        outcome.value = use_case(setup.uow())
    except ConflictError as error:
        outcome.refusal = str(error)
    except Exception as error:  # a deadlock or a constraint escaping as a 500: fails the test
        outcome.crash = "".join(traceback.format_exception(error))
    return outcome


def requests_of(index: int, tenant: str) -> list[tuple[str, str, UseCase]]:
    """The tenant's four requests, rotated per tenant so every order is submitted."""
    requests = [
        (tenant, "allocate", allocate(tenant)),
        (tenant, "grant", grant(tenant)),
        (tenant, "mint-token", mint(tenant)),
        (tenant, "offboard", offboard(tenant)),
    ]
    turn = index % len(requests)
    return requests[turn:] + requests[:turn]


def test_tenants_allocating_granted_and_offboarded_at_once_keep_nothing(lifecycle):
    requests = [r for i, tenant in enumerate(TENANTS) for r in requests_of(i, tenant)]

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outcomes = list(pool.map(lambda r: attempt(lifecycle, *r), requests))

    assert [o.crash for o in outcomes if o.crash] == []
    offboardings = [o for o in outcomes if o.request == "offboard"]
    assert [o.refusal for o in offboardings if o.refusal] == []
    assert rows(lifecycle.engine, "SELECT DISTINCT status FROM tenant") == [("offboarded",)]
    # Refused only because the tenant was offboarded first, never for anything else.
    assert all("offboarded" in o.refusal for o in outcomes if o.refusal), outcomes
    assert leftovers(lifecycle.engine) == []
    minted = [o.value.token for o in outcomes if o.request == "mint-token" and o.value]
    assert still_authenticating(lifecycle, minted) == []
    assert rows(lifecycle.engine, "SELECT count(*) FROM node_assignment") == [(len(STORAGE),)]
    assert verification.verify_fabric(lifecycle.uow(), fabric_name=FABRIC).holds
