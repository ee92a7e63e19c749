"""Allocations without HTTP: named and counted nodes, the tenant's one partition, refusals that
name what is wrong, release, and the shape rules of an allocation request."""

from __future__ import annotations

import pydantic
import pytest

from policies.errors import ConflictError, NotFoundError, PoolExhaustedError
from tenancy.schemas import AllocationCreate, AllocationView, SegmentView, TenantCreate
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, nodes, tenants
from tests.builders import PORT_GUIDS, partition_members, uow_create_fabric, uow_partitions_conf


def ib_east(*names: str, count: int | None = None, fabric: str = "ib-east") -> AllocationCreate:
    if count is not None:
        return AllocationCreate(fabric=fabric, count=count)
    return AllocationCreate(fabric=fabric, nodes=list(names))


def new_tenant(uow: UnitOfWork, name: str = "initech") -> None:
    tenants.create_tenant(uow, spec=TenantCreate(name=name, kind="external"))


def pkey(view: AllocationView) -> str:
    assert isinstance(view.segment, SegmentView)
    return view.segment.pkey


def free_compute_nodes(uow: UnitOfWork) -> list[str]:
    page = nodes.list_nodes(uow, fabric_name="ib-east", free=True, role="compute")
    return [node.name for node in page.data]


def test_named_nodes_are_allocated_in_name_order_with_a_new_partition(uow, onboarded, clock):
    new_tenant(uow)

    view = allocations.allocate(uow, tenant_name="initech", spec=ib_east("gpu0008", "gpu0007"))

    assert (view.tenant, view.fabric, view.nodes) == ("initech", "ib-east", ["gpu0007", "gpu0008"])
    assert view.segment == SegmentView(kind="ib_partition", pkey="0x0104")
    assert (view.created_at, view.released_at) == (clock.now, None)


def test_a_count_picks_the_free_compute_nodes_in_name_order(uow, onboarded):
    new_tenant(uow)

    view = allocations.allocate(uow, tenant_name="initech", spec=ib_east(count=2))

    assert (view.nodes, pkey(view)) == (["gpu0007", "gpu0008"], "0x0104")


def test_a_tenants_second_allocation_reuses_its_partition(uow, onboarded):
    view = allocations.allocate(uow, tenant_name="acme", spec=ib_east("gpu0007"))

    text = uow_partitions_conf(uow)
    assert pkey(view) == "0x0101"
    assert text.count("tenant_acme=") == 1
    assert f"{PORT_GUIDS['gpu0007'][0]}=full" in partition_members(text, "tenant_acme")


def test_allocated_nodes_show_their_tenant_and_are_no_longer_free(uow, onboarded):
    allocations.allocate(uow, tenant_name="acme", spec=ib_east("gpu0007"))

    assert free_compute_nodes(uow) == ["gpu0008"]
    assert nodes.get_node(uow, fabric_name="ib-east", node_name="gpu0007").tenant == "acme"


def test_an_allocation_reads_back_by_its_id(uow, onboarded):
    allocation_id = onboarded.allocation_ids["research"]

    view = allocations.get_allocation(uow, tenant_name="research", allocation_id=allocation_id)

    assert (view.id, view.nodes, pkey(view)) == (allocation_id, ["gpu0003", "gpu0004"], "0x0102")


def test_an_allocation_is_not_found_under_another_tenant(uow, onboarded):
    with pytest.raises(NotFoundError):
        allocations.get_allocation(
            uow, tenant_name="acme", allocation_id=onboarded.allocation_ids["research"]
        )


def test_the_allocations_of_a_tenant_are_listed_with_their_count(uow, onboarded):
    allocations.allocate(uow, tenant_name="acme", spec=ib_east("gpu0008"))

    page = allocations.list_allocations(uow, tenant_name="acme", limit=10, cursor=None)

    assert (page.count, page.next) == (2, None)
    assert sorted(a.nodes for a in page.data) == [["gpu0001", "gpu0002"], ["gpu0008"]]
    assert {pkey(a) for a in page.data} == {"0x0101"}


def test_the_allocations_of_a_tenant_are_filtered_by_fabric(uow, onboarded):
    uow_create_fabric(uow, "ib-west")
    allocations.allocate(uow, tenant_name="acme", spec=ib_east("gpu0001", fabric="ib-west"))

    west = allocations.list_allocations(
        uow, tenant_name="acme", limit=10, cursor=None, fabric="ib-west"
    )
    everywhere = allocations.list_allocations(uow, tenant_name="acme", limit=10, cursor=None)

    assert [(a.fabric, a.nodes) for a in west.data] == [("ib-west", ["gpu0001"])]
    assert sorted(a.fabric for a in everywhere.data) == ["ib-east", "ib-west"]


# --- refusals ----------------------------------------------------------------------------------


def test_a_node_already_allocated_is_a_conflict_naming_it(uow, onboarded, db_dump):
    before = db_dump()

    with pytest.raises(ConflictError, match="gpu0001"):
        allocations.allocate(uow, tenant_name="globex", spec=ib_east("gpu0008", "gpu0001"))

    assert db_dump() == before


def test_a_new_tenant_asking_for_an_allocated_node_gets_no_partition(uow, onboarded, db_dump):
    new_tenant(uow)
    before = db_dump()

    with pytest.raises(ConflictError):
        allocations.allocate(uow, tenant_name="initech", spec=ib_east("gpu0003"))

    assert db_dump() == before
    assert "tenant_initech" not in uow_partitions_conf(uow)


@pytest.mark.parametrize("node", ["sm01", "stor01"], ids=["management", "storage"])
def test_a_management_or_storage_node_cannot_be_allocated(uow, onboarded, db_dump, node):
    before = db_dump()

    with pytest.raises(ConflictError, match=node):
        allocations.allocate(uow, tenant_name="acme", spec=ib_east(node))

    assert db_dump() == before


def test_asking_for_more_nodes_than_are_free_is_a_conflict_saying_how_many_are(
    uow, onboarded, db_dump
):
    before = db_dump()

    with pytest.raises(ConflictError) as refused:
        allocations.allocate(uow, tenant_name="acme", spec=ib_east(count=3))

    assert refused.value.extensions["available"] == 2
    assert db_dump() == before


@pytest.mark.parametrize(
    ("tenant", "spec", "named"),
    [
        ("initech", AllocationCreate(fabric="ib-east", count=1), "initech"),
        ("acme", AllocationCreate(fabric="ib-nowhere", count=1), "ib-nowhere"),
        ("acme", AllocationCreate(fabric="ib-east", nodes=["gpu0999"]), "gpu0999"),
    ],
    ids=["unknown-tenant", "unknown-fabric", "unknown-node"],
)
def test_allocating_with_an_unknown_name_is_not_found_naming_it(
    uow, onboarded, db_dump, tenant, spec, named
):
    before = db_dump()

    with pytest.raises(NotFoundError, match=named):
        allocations.allocate(uow, tenant_name=tenant, spec=spec)

    assert db_dump() == before


def test_an_exhausted_pkey_range_raises_pool_exhausted_naming_the_range_and_fabric(uow, db_dump):
    uow_create_fabric(uow, "ib-tiny", first="0x0100", last="0x0101")
    for name in ("acme", "research", "globex"):
        new_tenant(uow, name)
    first = allocations.allocate(uow, tenant_name="acme", spec=ib_east(count=1, fabric="ib-tiny"))
    second = allocations.allocate(
        uow, tenant_name="research", spec=ib_east(count=1, fabric="ib-tiny")
    )
    before = db_dump()

    with pytest.raises(PoolExhaustedError, match="0x0100-0x0101") as refused:
        allocations.allocate(uow, tenant_name="globex", spec=ib_east(count=1, fabric="ib-tiny"))

    assert (pkey(first), pkey(second)) == ("0x0100", "0x0101")
    assert refused.value.extensions == {"fabric": "ib-tiny"}
    assert db_dump() == before


# --- release -----------------------------------------------------------------------------------


def test_releasing_an_allocation_frees_its_nodes_and_unlists_it(uow, onboarded):
    allocations.release_allocation(
        uow, tenant_name="globex", allocation_id=onboarded.allocation_ids["globex"]
    )

    assert free_compute_nodes(uow) == ["gpu0005", "gpu0006", "gpu0007", "gpu0008"]
    page = allocations.list_allocations(uow, tenant_name="globex", limit=10, cursor=None)
    assert (page.data, page.count, page.next) == ([], 0, None)


def test_a_released_allocation_is_gone_and_releasing_it_again_is_not_found(uow, onboarded, db_dump):
    allocation_id = onboarded.allocation_ids["globex"]
    allocations.release_allocation(uow, tenant_name="globex", allocation_id=allocation_id)
    before = db_dump()

    with pytest.raises(NotFoundError):
        allocations.get_allocation(uow, tenant_name="globex", allocation_id=allocation_id)
    with pytest.raises(NotFoundError):
        allocations.release_allocation(uow, tenant_name="globex", allocation_id=allocation_id)

    assert db_dump() == before


def test_releasing_a_tenants_last_allocation_takes_its_key_out_of_partitions_conf(uow, onboarded):
    allocations.release_allocation(
        uow, tenant_name="globex", allocation_id=onboarded.allocation_ids["globex"]
    )

    text = uow_partitions_conf(uow)

    assert "tenant_globex" not in text
    assert "=0x0103" not in text


def test_releasing_another_tenants_allocation_is_not_found_and_changes_nothing(
    uow, onboarded, db_dump
):
    before = db_dump()

    with pytest.raises(NotFoundError):
        allocations.release_allocation(
            uow, tenant_name="acme", allocation_id=onboarded.allocation_ids["globex"]
        )

    assert db_dump() == before


def test_a_key_released_with_the_last_allocation_is_skipped_by_others_and_taken_back_by_its_owner(
    uow, onboarded
):
    allocations.release_allocation(
        uow, tenant_name="globex", allocation_id=onboarded.allocation_ids["globex"]
    )
    new_tenant(uow)

    first = allocations.allocate(uow, tenant_name="initech", spec=ib_east(count=1))
    again = allocations.allocate(uow, tenant_name="globex", spec=ib_east(count=1))

    # Quarantine keeps a key from other owners only: globex's own comes back, nothing new.
    assert (pkey(first), pkey(again)) == ("0x0104", "0x0103")


# --- the shape of a request --------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        {"nodes": ["gpu0007"], "count": 1},
        {},
        {"nodes": []},
        {"count": 0},
        {"nodes": ["gpu0007", "gpu0007"]},
        {"nodes": ["gpu0007;gpu0008"]},
        {"count": 1, "fabric": "ib east"},
        {"count": 1, "exclusive": True},
    ],
    ids=repr,
)
def test_an_allocation_request_names_distinct_nodes_or_a_positive_count(spec):
    with pytest.raises(pydantic.ValidationError):
        AllocationCreate.model_validate({"fabric": "ib-east", **spec})
