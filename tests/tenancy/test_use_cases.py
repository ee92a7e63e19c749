"""Tenancy use cases without HTTP: onboarding, verify-before-commit, all-or-nothing failures,
quarantine on the injected clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlmodel import select

from policies.errors import (
    ConflictError,
    InputFormatError,
    IsolationViolationError,
    NotFoundError,
    PoolExhaustedError,
)
from tenancy import models
from tenancy.gate import verification
from tenancy.schemas import (
    AllocationCreate,
    AllocationView,
    GrantCreate,
    NodePatch,
    SegmentView,
    ServiceCreate,
    TenantCreate,
)
from tenancy.usecases import allocations, fabrics, nodes, shared_services, tenants, topology
from tests.builders import (
    DEFAULT_PARTITION_LINE,
    QUARANTINE_SECONDS,
    example_topology,
    fabric_spec,
    replace_line,
    rows,
    uow_create_fabric,
    uow_onboard,
)

STORAGE = GrantCreate(fabric="ib-east", service="storage")


def pkey_of(view: AllocationView) -> str:
    """The P_Key of an InfiniBand allocation (its segment is an ib_partition)."""
    assert isinstance(view.segment, SegmentView)
    return view.segment.pkey


def ib_east_nodes(*names: str) -> AllocationCreate:
    return AllocationCreate(fabric="ib-east", nodes=list(names))


def test_onboarding_through_the_use_cases_verifies_with_only_the_granted_edge(uow):
    uow_onboard(uow)

    verdict = verification.verify_fabric(uow, fabric_name="ib-east")

    assert verdict.holds
    assert verdict.counterexamples == []
    assert [(e.source, e.target, e.segment, e.allowed) for e in verdict.reachability] == [
        ("tenant:acme", "service:storage", "0x0100", True)
    ]


def test_onboarding_through_the_use_cases_renders_every_tenant_partition(uow):
    uow_onboard(uow)

    artifact, digest = verification.get_artifact(
        uow, fabric_name="ib-east", path="opensm/partitions.conf"
    )

    assert DEFAULT_PARTITION_LINE in artifact.content.decode().splitlines()
    for line in ("tenant_acme=0x0101,", "tenant_research=0x0102,", "tenant_globex=0x0103,"):
        assert line in artifact.content.decode()
    assert digest == verification.verify_fabric(uow, fabric_name="ib-east").snapshot_digest


def test_timestamps_read_back_as_the_aware_instant_of_the_injected_clock(uow, clock):
    clock.advance(90)
    uow_create_fabric(uow)

    assert fabrics.get_fabric(uow, name="ib-east").created_at == datetime(
        2026, 3, 1, 12, 1, 30, tzinfo=UTC
    )


def test_keys_are_claimed_lowest_first_from_the_fabric_range(uow):
    uow_create_fabric(uow, first="0x0a00", last="0x0a0f")
    for name in ("acme", "globex"):
        tenants.create_tenant(uow, spec=TenantCreate(name=name, kind="external"))

    first = allocations.allocate(uow, tenant_name="acme", spec=ib_east_nodes("gpu0001"))
    second = allocations.allocate(uow, tenant_name="globex", spec=ib_east_nodes("gpu0002"))

    assert (pkey_of(first), pkey_of(second)) == ("0x0a00", "0x0a01")


# --- all or nothing ----------------------------------------------------------------------------


@pytest.fixture
def tight(uow):
    """ib-east with 3 keys per port, services storage and scratch, acme granted both, no nodes."""
    uow_create_fabric(uow, pkeys_per_port=3)
    shared_services.create_service(
        uow, fabric_name="ib-east", spec=ServiceCreate(name="storage", nodes=["stor01"])
    )
    shared_services.create_service(
        uow, fabric_name="ib-east", spec=ServiceCreate(name="scratch", nodes=["stor02"])
    )
    tenants.create_tenant(uow, spec=TenantCreate(name="acme", kind="external", qos_class="gold"))
    for service in ("storage", "scratch"):
        shared_services.grant_service(
            uow, tenant_name="acme", spec=GrantCreate(fabric="ib-east", service=service)
        )
    return uow


def test_an_allocation_refused_by_verification_leaves_no_segment_allocation_or_assignment(
    tight, db_dump, engine
):
    before = db_dump()

    # gpu0001's ports would hold 0x7fff, acme's key, storage and scratch: 4 > 3.
    with pytest.raises(IsolationViolationError) as refused:
        allocations.allocate(tight, tenant_name="acme", spec=ib_east_nodes("gpu0001"))

    assert {c["rule"] for c in refused.value.extensions["counterexamples"]} == {
        "pkey-budget-exceeded"
    }
    assert db_dump() == before
    assert rows(engine, "SELECT count(*) FROM segment WHERE tenant_id IS NOT NULL") == [(0,)]


def test_a_use_case_that_fails_after_writing_rolls_back_every_row(
    uow, onboarded, db_dump, monkeypatch
):
    tenants.create_tenant(uow, spec=TenantCreate(name="initech", kind="internal"))
    before = db_dump()

    def explode(tx, fabric, action, target, scope=None):
        raise RuntimeError("the verifier crashed")

    monkeypatch.setattr(allocations, "commit_gate", explode)

    # By then the key is claimed, the allocation inserted and both nodes assigned (flushed).
    with pytest.raises(RuntimeError):
        allocations.allocate(uow, tenant_name="initech", spec=ib_east_nodes("gpu0007", "gpu0008"))

    assert db_dump() == before
    monkeypatch.undo()
    assert (
        pkey_of(allocations.allocate(uow, tenant_name="initech", spec=ib_east_nodes("gpu0007")))
        == "0x0104"
    )


FAILURES = [
    pytest.param(
        lambda uow: allocations.allocate(
            uow, tenant_name="globex", spec=ib_east_nodes("gpu0007", "gpu0001")
        ),
        ConflictError,
        id="second-node-already-allocated",
    ),
    pytest.param(
        lambda uow: allocations.allocate(
            uow, tenant_name="globex", spec=ib_east_nodes("gpu0007", "gpu0999")
        ),
        NotFoundError,
        id="second-node-unknown",
    ),
    pytest.param(
        lambda uow: allocations.allocate(
            uow, tenant_name="globex", spec=AllocationCreate(fabric="ib-east", count=3)
        ),
        ConflictError,
        id="too-few-free-nodes",
    ),
    pytest.param(
        lambda uow: shared_services.create_service(
            uow,
            fabric_name="ib-east",
            spec=ServiceCreate(name="scratch", nodes=["gpu0007", "sm01"]),
        ),
        ConflictError,
        id="service-on-management-node",
    ),
    pytest.param(
        lambda uow: shared_services.grant_service(uow, tenant_name="acme", spec=STORAGE),
        ConflictError,
        id="duplicate-grant",
    ),
    pytest.param(
        lambda uow: nodes.set_node_role(
            uow, fabric_name="ib-east", node_name="gpu0003", patch=NodePatch(role="storage")
        ),
        ConflictError,
        id="allocated-node-to-storage",
    ),
    pytest.param(
        lambda uow: topology.import_topology(
            uow, fabric_name="ib-east", text=replace_line(example_topology(), 20, "[9]\tgarbage")
        ),
        InputFormatError,
        id="malformed-topology",
    ),
    pytest.param(
        lambda uow: tenants.create_tenant(
            uow, spec=TenantCreate(name="initech", kind="internal", qos_class="platinum")
        ),
        NotFoundError,
        id="unknown-qos-class",
    ),
    pytest.param(
        lambda uow: tenants.offboard_tenant(uow, name="initech"),
        NotFoundError,
        id="offboard-unknown-tenant",
    ),
]


@pytest.mark.parametrize(("use_case", "error"), FAILURES)
def test_a_failed_use_case_leaves_nothing_behind(uow, onboarded, db_dump, use_case, error):
    before = db_dump()

    with pytest.raises(error):
        use_case(uow)

    assert db_dump() == before


def test_a_malformed_topology_names_its_line_in_the_error(uow, onboarded):
    with pytest.raises(InputFormatError) as refused:
        topology.import_topology(
            uow, fabric_name="ib-east", text=replace_line(example_topology(), 20, "[9]\tgarbage")
        )

    assert refused.value.line == 20
    assert refused.value.detail.startswith("line 20: ")


def test_an_exhausted_range_raises_pool_exhausted_and_claims_nothing(uow, db_dump):
    uow_create_fabric(uow, first="0x0100", last="0x0100")
    for name in ("acme", "globex"):
        tenants.create_tenant(uow, spec=TenantCreate(name=name, kind="external"))
    allocations.allocate(uow, tenant_name="acme", spec=ib_east_nodes("gpu0001"))
    before = db_dump()

    with pytest.raises(PoolExhaustedError):
        allocations.allocate(uow, tenant_name="globex", spec=ib_east_nodes("gpu0002"))

    assert db_dump() == before


# --- release, offboarding, quarantine ----------------------------------------------------------


def test_offboarding_quarantines_the_tenants_key_at_the_clock_time(uow, onboarded, clock, engine):
    clock.advance(7200)

    view = tenants.offboard_tenant(uow, name="acme")

    assert (view.status, view.offboarded_at) == ("offboarded", clock.now)
    with uow.transaction() as tx:
        segment = tx.session.exec(
            select(models.Segment).where(models.Segment.value == 0x0101)
        ).one()
        assert segment.state == "quarantined"
        assert segment.released_at is not None
        released = segment.released_at
        assert (released if released.tzinfo else released.replace(tzinfo=UTC)) == clock.now
    assert rows(engine, "SELECT count(*) FROM node_assignment WHERE allocation_id IS NOT NULL") == [
        (4,)
    ]


def test_releasing_the_last_allocation_quarantines_the_key_until_the_period_has_passed(
    uow, onboarded, clock
):
    allocations.release_allocation(
        uow, tenant_name="globex", allocation_id=onboarded.allocation_ids["globex"]
    )
    tenants.create_tenant(uow, spec=TenantCreate(name="initech", kind="internal"))
    tenants.create_tenant(uow, spec=TenantCreate(name="hooli", kind="internal"))

    clock.advance(QUARANTINE_SECONDS - 1)
    during = allocations.allocate(uow, tenant_name="initech", spec=ib_east_nodes("gpu0007"))
    clock.advance(2)
    after = allocations.allocate(uow, tenant_name="hooli", spec=ib_east_nodes("gpu0008"))

    assert (pkey_of(during), pkey_of(after)) == ("0x0104", "0x0103")


def test_releasing_one_of_two_allocations_keeps_the_tenants_key(uow, onboarded):
    second = allocations.allocate(uow, tenant_name="acme", spec=ib_east_nodes("gpu0007"))

    allocations.release_allocation(
        uow, tenant_name="acme", allocation_id=onboarded.allocation_ids["acme"]
    )

    assert (
        pkey_of(allocations.get_allocation(uow, tenant_name="acme", allocation_id=second.id))
        == "0x0101"
    )
    artifact, _ = verification.get_artifact(
        uow, fabric_name="ib-east", path="opensm/partitions.conf"
    )
    assert "tenant_acme=0x0101," in artifact.content.decode()


def test_creating_a_fabric_twice_raises_conflict(uow, db_dump):
    fabrics.create_fabric(uow, spec=fabric_spec())
    before = db_dump()

    with pytest.raises(ConflictError):
        fabrics.create_fabric(uow, spec=fabric_spec(first="0x0001", last="0x0002"))

    assert db_dump() == before
