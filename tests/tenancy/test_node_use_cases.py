"""Nodes without HTTP: the listing with its holders and filters, paging, and the role rules."""

from __future__ import annotations

import re

import pytest

from policies.errors import ConflictError, NotFoundError
from tenancy.schemas import AllocationCreate, NodePatch, ServiceCreate
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, nodes, shared_services
from tests.builders import audit_trail

GUID = re.compile(r"^0x[0-9a-f]{16}$")


def names(
    uow: UnitOfWork, *, tenant: str | None = None, free: bool | None = None, role: str | None = None
) -> list[str]:
    page = nodes.list_nodes(uow, fabric_name="ib-east", tenant=tenant, free=free, role=role)
    return [n.name for n in page.data]


def set_role(uow: UnitOfWork, node: str, role: str):
    return nodes.set_node_role(
        uow, fabric_name="ib-east", node_name=node, patch=NodePatch.model_validate({"role": role})
    )


def test_every_node_is_listed_by_name_with_its_role_and_holder(uow, onboarded):
    page = nodes.list_nodes(uow, fabric_name="ib-east")

    assert (page.count, page.next) == (11, None)
    assert [(n.name, n.role, n.tenant, n.service) for n in page.data] == [
        ("gpu0001", "compute", "acme", None),
        ("gpu0002", "compute", "acme", None),
        ("gpu0003", "compute", "research", None),
        ("gpu0004", "compute", "research", None),
        ("gpu0005", "compute", "globex", None),
        ("gpu0006", "compute", "globex", None),
        ("gpu0007", "compute", None, None),
        ("gpu0008", "compute", None, None),
        ("sm01", "management", None, None),
        ("stor01", "storage", None, "storage"),
        ("stor02", "storage", None, "storage"),
    ]


def test_every_listed_port_guid_is_lower_case_hex(uow, onboarded):
    guids = [p.guid for n in nodes.list_nodes(uow, fabric_name="ib-east").data for p in n.ports]

    assert len(guids) == 19
    assert all(GUID.fullmatch(guid) for guid in guids), guids


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"tenant": "acme"}, ["gpu0001", "gpu0002"]),
        ({"tenant": "initech"}, []),
        ({"free": True}, ["gpu0007", "gpu0008", "sm01"]),
        (
            {"free": False},
            ["gpu0001", "gpu0002", "gpu0003", "gpu0004", "gpu0005", "gpu0006", "stor01", "stor02"],
        ),
        ({"role": "storage"}, ["stor01", "stor02"]),
        ({"role": "management"}, ["sm01"]),
        ({"free": True, "role": "compute"}, ["gpu0007", "gpu0008"]),
        ({"tenant": "acme", "free": True}, []),
    ],
    ids=repr,
)
def test_nodes_are_filtered_and_counted_by_tenant_freedom_and_role(
    uow, onboarded, filters, expected
):
    page = nodes.list_nodes(uow, fabric_name="ib-east", **filters)

    assert [n.name for n in page.data] == expected
    assert page.count == len(expected)


def test_the_listing_pages_by_name_with_the_total_on_every_page(uow, onboarded):
    first = nodes.list_nodes(uow, fabric_name="ib-east", limit=4)
    second = nodes.list_nodes(uow, fabric_name="ib-east", limit=4, cursor=first.next)
    third = nodes.list_nodes(uow, fabric_name="ib-east", limit=4, cursor=second.next)

    assert [len(p.data) for p in (first, second, third)] == [4, 4, 3]
    assert {p.count for p in (first, second, third)} == {11}
    assert third.next is None
    listed = [n.name for p in (first, second, third) for n in p.data]
    assert listed == names(uow)


def test_an_unknown_fabric_or_node_is_not_found_naming_it(uow, onboarded):
    with pytest.raises(NotFoundError, match="ib-nowhere"):
        nodes.list_nodes(uow, fabric_name="ib-nowhere")
    with pytest.raises(NotFoundError, match="gpu0999"):
        nodes.get_node(uow, fabric_name="ib-east", node_name="gpu0999")


# --- roles -------------------------------------------------------------------------------------


def test_a_free_node_becomes_storage_and_lists_with_the_storage_nodes(uow, onboarded):
    view = set_role(uow, "gpu0008", "storage")

    assert (view.name, view.role, view.tenant) == ("gpu0008", "storage", None)
    assert names(uow, role="storage") == ["gpu0008", "stor01", "stor02"]


@pytest.mark.parametrize("role", ["management", "storage"])
def test_an_allocated_node_cannot_leave_the_compute_role(uow, onboarded, db_dump, role):
    before = db_dump()

    with pytest.raises(ConflictError, match="gpu0001") as refused:
        set_role(uow, "gpu0001", role)

    assert refused.value.extensions == {"node": "gpu0001"}
    assert db_dump() == before


def test_an_allocated_node_may_be_set_to_compute_again(uow, onboarded):
    view = set_role(uow, "gpu0001", "compute")

    assert (view.role, view.tenant) == ("compute", "acme")


def test_a_node_that_is_no_longer_compute_cannot_be_allocated(uow, onboarded, db_dump):
    set_role(uow, "gpu0008", "storage")
    before = db_dump()

    with pytest.raises(ConflictError, match="gpu0008"):
        allocations.allocate(
            uow, tenant_name="acme", spec=AllocationCreate(fabric="ib-east", nodes=["gpu0008"])
        )
    assert db_dump() == before
    assert names(uow, free=True, role="compute") == ["gpu0007"]


def test_a_node_made_management_cannot_hold_a_service(uow, onboarded):
    set_role(uow, "gpu0008", "management")

    with pytest.raises(ConflictError, match="management"):
        shared_services.create_service(
            uow, fabric_name="ib-east", spec=ServiceCreate(name="scratch", nodes=["gpu0008"])
        )


def test_a_role_change_is_audited(uow, onboarded, engine):
    set_role(uow, "gpu0008", "storage")

    assert audit_trail(engine)[-1] == ("node.update", "fabrics/ib-east/nodes/gpu0008")


def test_changing_the_role_of_an_unknown_node_is_not_found_and_changes_nothing(
    uow, onboarded, db_dump
):
    before = db_dump()

    with pytest.raises(NotFoundError, match="gpu0999"):
        set_role(uow, "gpu0999", "storage")

    assert db_dump() == before
