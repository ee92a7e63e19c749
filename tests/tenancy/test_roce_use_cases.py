"""RoCE use cases without HTTP: VRF segment claims are all or nothing, VLAN IDs are fabric-wide
and L2/L3 VNIs never collide."""

from __future__ import annotations

from typing import Any

import pytest

from policies.errors import InvalidValueError, PoolExhaustedError
from tenancy.schemas import (
    AllocationCreate,
    AllocationView,
    RoceFabricCreate,
    RoceInventory,
    RoceSegmentView,
    ServiceCreate,
    TenantCreate,
)
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, fabrics, shared_services, tenants, topology
from tests.builders import ROCE_FABRIC_SPEC, roce_inventory, rows


def create_roce_fabric(uow: UnitOfWork, name: str = "roce-west", **overrides: Any) -> None:
    spec = RoceFabricCreate.model_validate({**ROCE_FABRIC_SPEC, "name": name, **overrides})
    fabrics.create_fabric(uow, spec=spec)
    topology.import_roce_topology(
        uow, fabric_name=name, inventory=RoceInventory.model_validate(roce_inventory())
    )


def allocate(uow: UnitOfWork, tenant: str, fabric: str = "roce-west") -> AllocationView:
    tenants.create_tenant(uow, spec=TenantCreate(name=tenant, kind="external"))
    return allocations.allocate(
        uow, tenant_name=tenant, spec=AllocationCreate(fabric=fabric, count=1)
    )


def roce_segment(view: AllocationView) -> RoceSegmentView:
    assert isinstance(view.segment, RoceSegmentView)
    return view.segment


def test_a_segment_whose_fourth_identifier_is_exhausted_leaves_nothing_claimed(uow, engine):
    # Claim order: L3VNI, VLAN, L3VNI VLAN, L2VNI, subnet, RD. One L2VNI: the service takes it.
    create_roce_fabric(uow, l2vni_range={"first": 10000, "last": 10000})
    shared_services.create_service(
        uow, fabric_name="roce-west", spec=ServiceCreate(name="storage", nodes=["stor01"])
    )
    before = rows(engine, "SELECT * FROM segment ORDER BY id")

    with pytest.raises(PoolExhaustedError, match="L2VNI"):
        allocate(uow, "acme")

    assert rows(engine, "SELECT * FROM segment ORDER BY id") == before
    assert len(before) == 6
    assert rows(engine, "SELECT count(*) FROM allocation") == [(0,)]
    assert rows(engine, "SELECT count(*) FROM node_assignment") == [(1,)]


def test_vlan_ids_are_fabric_wide_across_l2_and_l3vni_vlans_of_every_segment(uow):
    # Four VLAN IDs are two segments: each takes one L2 VLAN and one L3VNI transit VLAN.
    create_roce_fabric(uow, vlan_range={"first": 100, "last": 103})
    first, second = roce_segment(allocate(uow, "acme")), roce_segment(allocate(uow, "research"))

    with pytest.raises(PoolExhaustedError, match="VLAN"):
        allocate(uow, "globex")

    assert sorted([first.vlan, first.l3vni_vlan, second.vlan, second.l3vni_vlan]) == [
        100,
        101,
        102,
        103,
    ]


def test_vlan_ids_are_per_fabric_so_another_fabric_hands_out_the_same_ids(uow):
    create_roce_fabric(uow)
    create_roce_fabric(uow, "roce-east")

    west = roce_segment(allocate(uow, "acme"))
    east = roce_segment(allocate(uow, "research", "roce-east"))

    assert (west.vlan, west.l3vni_vlan, west.l3vni) == (east.vlan, east.l3vni_vlan, east.l3vni)


def test_l2_and_l3_vnis_of_all_segments_are_distinct(uow):
    create_roce_fabric(uow)
    segments = [roce_segment(allocate(uow, name)) for name in ("acme", "research", "globex")]

    vnis = [vni for s in segments for vni in (s.l3vni, s.l2vni)]

    assert len(set(vnis)) == len(vnis) == 6
    assert all(10000 <= s.l2vni <= 19999 and 50000 <= s.l3vni <= 59999 for s in segments)


@pytest.mark.parametrize(
    ("l2vni", "l3vni"),
    [
        pytest.param((10, 12), (12, 20), id="sharing-one-vni"),
        pytest.param((10, 30), (12, 20), id="l3-inside-l2"),
        pytest.param((12, 20), (10, 30), id="l2-inside-l3"),
    ],
)
def test_overlapping_l2vni_and_l3vni_ranges_are_refused_at_fabric_creation(
    uow, engine, l2vni, l3vni
):
    spec = RoceFabricCreate.model_validate(
        {
            **ROCE_FABRIC_SPEC,
            "l2vni_range": {"first": l2vni[0], "last": l2vni[1]},
            "l3vni_range": {"first": l3vni[0], "last": l3vni[1]},
        }
    )

    with pytest.raises(InvalidValueError, match="overlap"):
        fabrics.create_fabric(uow, spec=spec)

    assert rows(engine, "SELECT count(*) FROM fabric") == [(0,)]


def test_adjacent_l2vni_and_l3vni_ranges_are_accepted(uow):
    spec = RoceFabricCreate.model_validate(
        {
            **ROCE_FABRIC_SPEC,
            "l2vni_range": {"first": 10, "last": 11},
            "l3vni_range": {"first": 12, "last": 13},
        }
    )

    view = fabrics.create_fabric(uow, spec=spec)

    assert view.l2vni_range is not None and view.l3vni_range is not None
    assert (view.l2vni_range.last, view.l3vni_range.first) == (11, 12)
