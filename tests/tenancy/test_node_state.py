"""Node state and absence across imports (issue 10, item 4), through the use cases.

Nodes and switches an import no longer lists keep their record (and a node its role) and are
marked absent until an import lists them again; an absent node is not allocatable, and neither is
a management or storage node, whatever happened before. Each node shows one state: free,
allocated, absent or draining.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from policies.errors import ConflictError
from tenancy.schemas import (
    AllocationCreate,
    NodePatch,
    RoceInventory,
    ServiceCreate,
    TenantCreate,
    TopologyImportResult,
)
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, nodes, shared_services, tenants, topology
from tests.builders import (
    FABRIC,
    PORT_GUIDS,
    ROCE_FABRIC,
    example_topology,
    roce_inventory,
    rows,
    uow_create_roce_fabric,
    without_hosts,
)


def ib_import(uow: UnitOfWork, text: str) -> TopologyImportResult:
    return topology.import_topology(uow, fabric_name=FABRIC, text=text)


def roce_import(uow: UnitOfWork, document: dict[str, Any]) -> TopologyImportResult:
    return topology.import_roce_topology(
        uow, fabric_name=ROCE_FABRIC, inventory=RoceInventory.model_validate(document)
    )


def node(uow: UnitOfWork, name: str, fabric: str = FABRIC) -> Any:
    return nodes.get_node(uow, fabric_name=fabric, node_name=name)


def allocate(uow: UnitOfWork, tenant: str, **spec: Any) -> Any:
    return allocations.allocate(
        uow, tenant_name=tenant, spec=AllocationCreate(fabric=spec.pop("fabric", FABRIC), **spec)
    )


def set_role(uow: UnitOfWork, name: str, role: str, fabric: str = FABRIC) -> None:
    nodes.set_node_role(uow, fabric_name=fabric, node_name=name, patch=NodePatch(role=role))


def states(uow: UnitOfWork, **filters: Any) -> dict[str, str]:
    page = nodes.list_nodes(uow, fabric_name=filters.pop("fabric", FABRIC), limit=100, **filters)
    return {view.name: view.state for view in page.data}


def without_switch(text: str, guid: str) -> str:
    """The sample as ibnetdiscover prints it once switch `guid` (16 hex digits) is gone: its
    record and every port line leading to it."""
    peer = f'"S-{guid}"'
    blocks = [block.split("\n") for block in text.split("\n\n")]
    kept = [
        [line for line in block if not (line.startswith("[") and peer in line)]
        for block in blocks
        if not any(line.startswith("Switch") and peer in line for line in block)
    ]
    return "\n\n".join("\n".join(block) for block in kept)


SPINE02 = "0000000000200003"


# --- the reproduction ------------------------------------------------------------------


def test_a_management_node_missing_from_one_import_keeps_its_role_and_is_never_allocatable(
    uow, onboarded
):
    result = ib_import(uow, without_hosts(example_topology(), ["sm01"]))

    assert result.absent_nodes == ["sm01"]
    assert (node(uow, "sm01").role, node(uow, "sm01").state) == ("management", "absent")

    ib_import(uow, example_topology())

    assert (node(uow, "sm01").role, node(uow, "sm01").state) == ("management", "free")
    with pytest.raises(ConflictError, match="management"):
        allocate(uow, "research", nodes=["sm01"])


def test_an_allocation_by_count_never_picks_a_management_or_storage_node(uow, onboarded):
    set_role(uow, "gpu0008", "storage")
    ib_import(uow, without_hosts(example_topology(), ["sm01", "gpu0008"]))
    ib_import(uow, example_topology())

    with pytest.raises(ConflictError, match="1 free compute node"):
        allocate(uow, "research", count=2)
    assert allocate(uow, "research", count=1).nodes == ["gpu0007"]


def test_a_storage_node_missing_from_one_import_comes_back_as_storage(uow, onboarded):
    set_role(uow, "gpu0008", "storage")
    ib_import(uow, without_hosts(example_topology(), ["gpu0008"]))

    ib_import(uow, example_topology())

    assert (node(uow, "gpu0008").role, node(uow, "gpu0008").state) == ("storage", "free")
    with pytest.raises(ConflictError, match="storage"):
        allocate(uow, "research", nodes=["gpu0008"])


# --- absent nodes ---------------------------------------------------------------------------


def test_an_absent_node_keeps_its_record_without_ports_and_cannot_be_held(uow, onboarded):
    ib_import(uow, without_hosts(example_topology(), ["gpu0007"]))

    assert node(uow, "gpu0007").ports == []
    with pytest.raises(ConflictError, match="absent"):
        allocate(uow, "research", nodes=["gpu0007"])
    with pytest.raises(ConflictError, match="absent"):
        shared_services.create_service(
            uow, fabric_name=FABRIC, spec=ServiceCreate(name="scratch", nodes=["gpu0007"])
        )
    assert allocate(uow, "research", count=1).nodes == ["gpu0008"]


def test_an_absent_node_that_reappears_is_free_with_its_ports_again(uow, onboarded):
    ib_import(uow, without_hosts(example_topology(), ["gpu0007"]))

    result = ib_import(uow, example_topology())

    assert result.absent_nodes == []
    assert node(uow, "gpu0007").state == "free"
    assert [p.guid for p in node(uow, "gpu0007").ports] == list(PORT_GUIDS["gpu0007"])
    assert allocate(uow, "research", nodes=["gpu0007"]).nodes == ["gpu0007"]


def test_an_absent_node_stays_absent_and_reported_until_an_import_lists_it(uow, onboarded):
    ib_import(uow, without_hosts(example_topology(), ["gpu0007"]))

    again = ib_import(uow, without_hosts(example_topology(), ["gpu0007", "gpu0008"]))

    assert again.absent_nodes == ["gpu0007", "gpu0008"]
    assert again.nodes == 9


def test_a_held_node_missing_from_an_import_stays_allocated_with_its_ports_kept(uow, onboarded):
    result = ib_import(uow, without_hosts(example_topology(), ["gpu0001"]))

    assert result.absent_nodes == []
    assert (node(uow, "gpu0001").state, node(uow, "gpu0001").tenant) == ("allocated", "acme")
    assert [p.guid for p in node(uow, "gpu0001").ports] == list(PORT_GUIDS["gpu0001"])


# --- the state through the node's life --------------------------------------------------------


def test_holding_and_releasing_moves_the_state_between_free_and_allocated(uow, onboarded):
    assert states(uow, state="allocated") == dict.fromkeys(
        ["gpu0001", "gpu0002", "gpu0003", "gpu0004", "gpu0005", "gpu0006", "stor01", "stor02"],
        "allocated",
    )
    assert states(uow, state="free") == dict.fromkeys(["gpu0007", "gpu0008", "sm01"], "free")

    view = allocate(uow, "research", nodes=["gpu0007"])
    assert node(uow, "gpu0007").state == "allocated"

    allocations.release_allocation(uow, tenant_name="research", allocation_id=view.id)
    assert node(uow, "gpu0007").state == "free"


def test_offboarding_a_tenant_frees_its_nodes(uow, onboarded):
    tenants.offboard_tenant(uow, name="acme")

    assert states(uow, tenant=None, free=True).keys() >= {"gpu0001", "gpu0002"}
    assert node(uow, "gpu0001").state == "free"


def test_the_node_list_filters_by_state_and_free_means_the_free_state(uow, onboarded):
    ib_import(uow, without_hosts(example_topology(), ["gpu0007"]))

    assert states(uow, state="absent") == {"gpu0007": "absent"}
    assert states(uow, free=True) == {"gpu0008": "free", "sm01": "free"}
    assert "gpu0007" in states(uow, free=False)
    assert states(uow, state="draining") == {}


def test_the_stored_state_is_allocated_exactly_while_an_assignment_holds_the_node(
    uow, onboarded, engine: Engine
):
    allocate(uow, "research", nodes=["gpu0007"])
    tenants.offboard_tenant(uow, name="globex")

    mismatched = rows(
        engine,
        "SELECT name, state FROM node WHERE (state = 'allocated') <> "
        "(id IN (SELECT node_id FROM node_assignment))",
    )
    assert mismatched == []


# --- switches --------------------------------------------------------------------------------


def test_an_infiniband_switch_missing_from_an_import_is_kept_absent_and_reported(
    uow, onboarded, engine: Engine
):
    result = ib_import(uow, without_switch(example_topology(), SPINE02))

    assert [(s.name, s.guid) for s in result.absent_switches] == [("spine02", "0x0000000000200003")]
    assert result.switches == 3
    assert rows(engine, "SELECT name, absent FROM switch WHERE absent") == [("spine02", True)]

    back = ib_import(uow, example_topology())

    assert (back.absent_switches, back.switches) == ([], 4)
    assert rows(engine, "SELECT name FROM switch WHERE absent") == []


def without_roce_switch(name: str) -> dict[str, Any]:
    document = roce_inventory()
    document["switches"] = [s for s in document["switches"] if s["name"] != name]
    document["links"] = [x for x in document["links"] if name not in (x["a"] + x["b"])]
    return document


def test_a_roce_switch_missing_from_an_inventory_is_kept_absent_and_reported(
    uow, roce_onboarded, engine: Engine
):
    result = roce_import(uow, without_roce_switch("spine02"))

    assert [(s.name, s.guid) for s in result.absent_switches] == [("spine02", None)]
    assert result.switches == 3
    assert rows(engine, "SELECT name FROM roce_switch WHERE absent") == [("spine02",)]

    back = roce_import(uow, roce_inventory())

    assert (back.absent_switches, back.switches) == ([], 4)


# --- RoCE nodes ------------------------------------------------------------------------------


@pytest.fixture
def roce_free(uow: UnitOfWork) -> UnitOfWork:
    uow_create_roce_fabric(uow)
    return uow


def without_roce_node(name: str) -> dict[str, Any]:
    document = roce_inventory()
    document["nodes"] = [n for n in document["nodes"] if n["name"] != name]
    return document


@pytest.mark.parametrize("role", ["management", "storage"])
def test_a_roce_node_missing_from_one_inventory_keeps_its_role_and_is_not_allocatable(
    roce_free, role
):
    set_role(roce_free, "gpu0006", role, ROCE_FABRIC)

    result = roce_import(roce_free, without_roce_node("gpu0006"))

    assert result.absent_nodes == ["gpu0006"]
    assert node(roce_free, "gpu0006", ROCE_FABRIC).state == "absent"

    roce_import(roce_free, roce_inventory())

    back = node(roce_free, "gpu0006", ROCE_FABRIC)
    assert (back.role, back.state) == (role, "free")
    tenants.create_tenant(roce_free, spec=_tenant("acme"))
    with pytest.raises(ConflictError, match=role):
        allocate(roce_free, "acme", fabric=ROCE_FABRIC, nodes=["gpu0006"])


def test_an_absent_roce_node_is_never_picked_and_is_picked_once_back(roce_free):
    roce_import(roce_free, without_roce_node("gpu0001"))
    tenants.create_tenant(roce_free, spec=_tenant("acme"))

    first = allocate(roce_free, "acme", fabric=ROCE_FABRIC, count=1)
    assert node(roce_free, "gpu0001", ROCE_FABRIC).state == "absent"
    roce_import(roce_free, roce_inventory())
    second = allocate(roce_free, "acme", fabric=ROCE_FABRIC, count=1)

    assert (first.nodes, second.nodes) == (["gpu0002"], ["gpu0001"])


def _tenant(name: str) -> TenantCreate:
    return TenantCreate(name=name, kind="external", qos_class="gold")
