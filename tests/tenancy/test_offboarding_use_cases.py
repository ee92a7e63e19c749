"""Offboarding without HTTP: everything the tenant held is released, the record stays, its keys
are quarantined for the configured period (InfiniBand and RoCE)."""

from __future__ import annotations

import dataclasses

import pytest

from policies.errors import ConflictError, PoolExhaustedError
from tenancy.gate import verification
from tenancy.schemas import AllocationCreate, GrantCreate, SegmentView, TenantCreate
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, nodes, shared_services, tenants
from tests.builders import (
    PORT_GUIDS,
    QUARANTINE_SECONDS,
    rows,
    uow_create_fabric,
    uow_partitions_conf,
)


def onboard_and_allocate(uow: UnitOfWork, name: str, fabric: str = "ib-east") -> str:
    """A new external tenant with one node on `fabric`; returns its P_Key."""
    tenants.create_tenant(uow, spec=TenantCreate(name=name, kind="external"))
    view = allocations.allocate(
        uow, tenant_name=name, spec=AllocationCreate(fabric=fabric, count=1)
    )
    assert isinstance(view.segment, SegmentView)
    return view.segment.pkey


def test_offboarding_returns_the_tenant_as_offboarded_at_the_clock_time(uow, onboarded, clock):
    clock.advance(3600)

    view = tenants.offboard_tenant(uow, name="acme")

    assert view.model_dump(exclude={"created_at"}) == {
        "name": "acme",
        "kind": "external",
        "status": "offboarded",
        "qos_class": "gold",
        "offboarded_at": clock.now,
        "billing_account": "acme",
        "max_nodes": None,
    }


def test_an_offboarded_tenant_keeps_its_record_and_lists_as_offboarded(uow, onboarded):
    tenants.offboard_tenant(uow, name="acme")

    offboarded = tenants.list_tenants(uow, limit=10, cursor=None, status="offboarded")
    active = tenants.list_tenants(uow, limit=10, cursor=None, status="active")

    assert tenants.get_tenant(uow, name="acme").status == "offboarded"
    assert [t.name for t in offboarded.data] == ["acme"]
    assert [t.name for t in active.data] == ["globex", "research"]


def test_offboarding_frees_the_nodes_and_drops_the_allocations_and_grants(uow, onboarded):
    tenants.offboard_tenant(uow, name="acme")

    held = nodes.list_nodes(uow, fabric_name="ib-east", tenant="acme")
    free = nodes.list_nodes(uow, fabric_name="ib-east", free=True, role="compute")
    assert held.count == 0
    assert [n.name for n in free.data] == ["gpu0001", "gpu0002", "gpu0007", "gpu0008"]
    assert allocations.list_allocations(uow, tenant_name="acme", limit=10, cursor=None).count == 0
    assert shared_services.list_grants(uow, tenant_name="acme", limit=10, cursor=None).count == 0


def test_offboarding_removes_the_tenant_and_its_ports_from_partitions_conf(uow, onboarded):
    tenants.offboard_tenant(uow, name="acme")

    text = uow_partitions_conf(uow)

    assert "tenant_acme" not in text
    assert "=0x0101" not in text
    assert PORT_GUIDS["gpu0001"][0] not in text  # a limited member of storage before
    assert "tenant_research=0x0102," in text
    assert verification.verify_fabric(uow, fabric_name="ib-east").reachability == []


def test_offboarding_twice_is_a_conflict_and_changes_nothing(uow, onboarded, db_dump):
    tenants.offboard_tenant(uow, name="acme")
    before = db_dump()

    with pytest.raises(ConflictError, match="already offboarded"):
        tenants.offboard_tenant(uow, name="acme")

    assert db_dump() == before


@pytest.mark.parametrize(
    "use_case",
    [
        lambda uow: allocations.allocate(
            uow, tenant_name="acme", spec=AllocationCreate(fabric="ib-east", count=1)
        ),
        lambda uow: shared_services.grant_service(
            uow, tenant_name="acme", spec=GrantCreate(fabric="ib-east", service="storage")
        ),
        lambda uow: tenants.create_tenant(uow, spec=TenantCreate(name="acme", kind="external")),
    ],
    ids=["allocate", "grant", "recreate"],
)
def test_an_offboarded_tenant_can_neither_allocate_nor_be_granted_nor_be_recreated(
    uow, onboarded, db_dump, use_case
):
    tenants.offboard_tenant(uow, name="acme")
    before = db_dump()

    with pytest.raises(ConflictError, match="acme"):
        use_case(uow)

    assert db_dump() == before


def test_an_offboarded_key_is_not_reused_before_the_quarantine_has_passed(uow, onboarded, clock):
    tenants.offboard_tenant(uow, name="acme")

    first = onboard_and_allocate(uow, "initech")
    clock.advance(QUARANTINE_SECONDS - 1)
    second = onboard_and_allocate(uow, "hooli")

    assert (first, second) == ("0x0104", "0x0105")


def test_an_offboarded_key_is_reused_once_the_quarantine_has_passed(uow, onboarded, clock):
    tenants.offboard_tenant(uow, name="acme")
    clock.advance(QUARANTINE_SECONDS + 1)

    assert onboard_and_allocate(uow, "umbrella") == "0x0101"


def test_a_quarantined_key_keeps_a_full_range_exhausted_until_the_quarantine_has_passed(
    uow, clock, db_dump
):
    uow_create_fabric(uow, "ib-tiny", first="0x0100", last="0x0100")
    assert onboard_and_allocate(uow, "acme", "ib-tiny") == "0x0100"
    tenants.offboard_tenant(uow, name="acme")
    tenants.create_tenant(uow, spec=TenantCreate(name="globex", kind="external"))
    globex = AllocationCreate(fabric="ib-tiny", count=1)
    clock.advance(QUARANTINE_SECONDS - 1)
    before = db_dump()

    with pytest.raises(PoolExhaustedError):
        allocations.allocate(uow, tenant_name="globex", spec=globex)
    assert db_dump() == before

    clock.advance(2)
    view = allocations.allocate(uow, tenant_name="globex", spec=globex)
    assert view.segment == SegmentView(kind="ib_partition", pkey="0x0100")


def test_the_quarantine_follows_the_configured_period(engine, uow, clock):
    short = UnitOfWork(engine, dataclasses.replace(uow.settings, pkey_quarantine_seconds=60), clock)
    uow_create_fabric(short)
    assert onboard_and_allocate(short, "acme") == "0x0100"
    tenants.offboard_tenant(short, name="acme")

    clock.advance(59)
    during = onboard_and_allocate(short, "globex")
    clock.advance(2)
    after = onboard_and_allocate(short, "initech")

    assert (during, after) == ("0x0101", "0x0100")


def test_offboarding_leaves_the_other_tenants_untouched(uow, onboarded):
    research_before = tenants.get_tenant(uow, name="research")

    tenants.offboard_tenant(uow, name="acme")

    assert tenants.get_tenant(uow, name="research") == research_before
    assert [
        n.name for n in nodes.list_nodes(uow, fabric_name="ib-east", tenant="research").data
    ] == [
        "gpu0003",
        "gpu0004",
    ]


# --- RoCE --------------------------------------------------------------------------------------


def test_offboarding_a_roce_tenant_quarantines_all_six_of_its_identifiers(
    uow, roce_onboarded, engine
):
    tenants.offboard_tenant(uow, name="research")

    assert rows(
        engine,
        "SELECT s.purpose, s.value, s.state FROM segment s JOIN tenant t ON t.id = s.tenant_id "
        "WHERE t.name = 'research' ORDER BY s.purpose",
    ) == [
        ("l2vni", 10002, "quarantined"),
        ("l3vni", 50002, "quarantined"),
        ("l3vni_vlan", 105, "quarantined"),
        ("rd", 3, "quarantined"),
        ("subnet", 2, "quarantined"),
        ("vlan", 104, "quarantined"),
    ]


def test_a_roce_tenants_identifiers_are_skipped_in_quarantine_and_reused_after(
    uow, roce_onboarded, clock
):
    tenants.offboard_tenant(uow, name="research")

    tenants.create_tenant(uow, spec=TenantCreate(name="initech", kind="external"))
    during = allocations.allocate(
        uow, tenant_name="initech", spec=AllocationCreate(fabric="roce-west", count=1)
    )
    clock.advance(QUARANTINE_SECONDS + 1)
    tenants.create_tenant(uow, spec=TenantCreate(name="hooli", kind="external"))
    after = allocations.allocate(
        uow, tenant_name="hooli", spec=AllocationCreate(fabric="roce-west", count=1)
    )

    assert during.nodes == ["gpu0003"]
    assert during.segment is not None and after.segment is not None
    assert during.segment.model_dump(mode="json") == {
        "kind": "roce_vrf",
        "vrf": "Vrf50004",
        "l3vni": 50004,
        "l3vni_vlan": 109,
        "vlan": 108,
        "l2vni": 10004,
        "subnet": "10.64.4.0/24",
    }
    assert after.segment.model_dump(mode="json") == roce_onboarded.segments["research"]
