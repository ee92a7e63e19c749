"""Port identity across topology imports (issue 10, item 1), through the use cases.

A port is its GUID (InfiniBand) or the (node, NIC) cabled to a switch port (RoCE); what an import
says about it is a claim. A known port that claims another host (or on RoCE a NIC re-cabled, or a
switch port claimed by another host's NIC) is refused with `PortMovedError` when the old or the
new host is held, storage or management, and applied and reported when both are free.
"""

from __future__ import annotations

from typing import Any

import pytest

from policies.errors import PortMovedError
from tenancy.schemas import (
    AllocationCreate,
    NodePatch,
    RoceInventory,
    TenantCreate,
    TopologyImportResult,
)
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, nodes, tenants, topology
from tests.builders import (
    FABRIC,
    PORT_GUIDS,
    ROCE_FABRIC,
    example_topology,
    line_number,
    partition_members,
    replace_line,
    roce_inventory,
    uow_create_roce_fabric,
    uow_partitions_conf,
)

# --- InfiniBand ------------------------------------------------------------------------------


def claiming(text: str, old: str, new: str) -> str:
    """The topology with one CA's NodeDescription (its ``Ca`` record line only) rewritten, as
    root on the host can do through /sys/class/infiniband/<hca>/node_desc."""
    number = line_number(
        text, next(x for x in text.split("\n") if x.startswith("Ca") and f'"{old}"' in x)
    )
    return replace_line(text, number, lambda line: line.replace(f'"{old}"', f'"{new}"'))


def ib_import(uow: UnitOfWork, text: str) -> TopologyImportResult:
    return topology.import_topology(uow, fabric_name=FABRIC, text=text)


def refused_moves(uow: UnitOfWork, text: str) -> list[dict[str, str]]:
    with pytest.raises(PortMovedError) as refused:
        ib_import(uow, text)
    moved: list[dict[str, str]] = refused.value.extensions["moved"]
    return moved


def move(port: str, source: str, target: str) -> dict[str, str]:
    return {"port": port, "from": source, "to": target}


def moves_of(result: TopologyImportResult) -> list[dict[str, str]]:
    """The import's `moved` as the API shows it."""
    return [m.model_dump(mode="json", by_alias=True) for m in result.moved]


def set_role(uow: UnitOfWork, node: str, role: str, fabric: str = FABRIC) -> None:
    nodes.set_node_role(uow, fabric_name=fabric, node_name=node, patch=NodePatch(role=role))


def port_guids(uow: UnitOfWork, node: str) -> list[str]:
    return [p.guid for p in nodes.get_node(uow, fabric_name=FABRIC, node_name=node).ports]


def test_the_demo_line_180_rename_is_refused_and_acmes_port_stays_out_of_globex(
    uow, onboarded, db_dump
):
    # The reproduction: sed '180s/"gpu0001 mlx5_0"/"gpu0005 mlx5_9"/'.
    text = replace_line(
        example_topology(), 180, lambda line: line.replace('"gpu0001 mlx5_0"', '"gpu0005 mlx5_9"')
    )
    before = db_dump()

    assert refused_moves(uow, text) == [move("0x0000000000100003", "gpu0001", "gpu0005")]

    assert db_dump() == before
    globex = partition_members(uow_partitions_conf(uow), "tenant_globex")
    assert "0x0000000000100003" not in globex


def test_a_held_nodes_port_claiming_a_new_host_is_refused(uow, onboarded, db_dump):
    before = db_dump()

    moved = refused_moves(uow, claiming(example_topology(), "gpu0001 mlx5_0", "gpu0099 mlx5_0"))

    assert moved == [move("0x0000000000100003", "gpu0001", "gpu0099")]
    assert db_dump() == before


def test_a_free_nodes_port_claiming_a_held_host_is_refused(uow, onboarded, db_dump):
    before = db_dump()

    moved = refused_moves(uow, claiming(example_topology(), "gpu0007 mlx5_0", "gpu0005 mlx5_7"))

    assert moved == [move("0x000000000010001b", "gpu0007", "gpu0005")]
    assert db_dump() == before


def test_a_management_nodes_port_claiming_a_free_host_is_refused(uow, onboarded):
    moved = refused_moves(uow, claiming(example_topology(), "sm01 mlx5_0", "gpu0007 mlx5_7"))

    assert moved == [move("0x0000000000100001", "sm01", "gpu0007")]


@pytest.mark.parametrize("role", ["storage", "management"])
def test_a_port_claiming_a_free_storage_or_management_host_is_refused(uow, onboarded, role):
    set_role(uow, "gpu0008", role)

    moved = refused_moves(uow, claiming(example_topology(), "gpu0007 mlx5_0", "gpu0008 mlx5_7"))

    assert moved == [move("0x000000000010001b", "gpu0007", "gpu0008")]


def test_a_service_nodes_port_claiming_a_free_host_is_refused(uow, onboarded):
    moved = refused_moves(uow, claiming(example_topology(), "stor01 mlx5_0", "gpu0007 mlx5_7"))

    assert moved == [move("0x0000000000100023", "stor01", "gpu0007")]


def test_the_refusal_names_only_the_moves_that_touch_a_held_host(uow, onboarded):
    text = claiming(example_topology(), "gpu0007 mlx5_0", "gpu0008 mlx5_7")
    text = claiming(text, "gpu0001 mlx5_1", "gpu0006 mlx5_7")

    assert refused_moves(uow, text) == [move("0x0000000000100005", "gpu0001", "gpu0006")]


def test_a_port_moving_between_two_free_hosts_is_applied_and_reported(uow, onboarded):
    result = ib_import(uow, claiming(example_topology(), "gpu0007 mlx5_0", "gpu0008 mlx5_7"))

    assert moves_of(result) == [move("0x000000000010001b", "gpu0007", "gpu0008")]
    assert (result.added, result.missing) == ([], [])
    assert port_guids(uow, "gpu0007") == ["0x000000000010001d"]
    assert "0x000000000010001b" in port_guids(uow, "gpu0008")


def test_a_free_hosts_port_claiming_an_unknown_host_creates_it_free(uow, onboarded):
    result = ib_import(uow, claiming(example_topology(), "gpu0007 mlx5_0", "gpu0099 mlx5_0"))

    assert moves_of(result) == [move("0x000000000010001b", "gpu0007", "gpu0099")]
    new = nodes.get_node(uow, fabric_name=FABRIC, node_name="gpu0099")
    assert (new.role, new.state, [p.guid for p in new.ports]) == (
        "compute",
        "free",
        ["0x000000000010001b"],
    )


def test_a_port_the_record_and_the_import_agree_on_is_no_move(uow, onboarded):
    result = ib_import(uow, example_topology())

    assert result.moved == []
    assert port_guids(uow, "gpu0001") == list(PORT_GUIDS["gpu0001"])


# --- RoCE ------------------------------------------------------------------------------------


def roce_import(uow: UnitOfWork, document: dict[str, Any]) -> TopologyImportResult:
    return topology.import_roce_topology(
        uow, fabric_name=ROCE_FABRIC, inventory=RoceInventory.model_validate(document)
    )


def roce_refused(uow: UnitOfWork, document: dict[str, Any]) -> list[dict[str, str]]:
    with pytest.raises(PortMovedError) as refused:
        roce_import(uow, document)
    moved: list[dict[str, str]] = refused.value.extensions["moved"]
    return moved


def host(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(n for n in document["nodes"] if n["name"] == name)
    return found


def swapped_eth0(a: str, b: str) -> dict[str, Any]:
    """The demo inventory with the eth0 NICs of hosts `a` and `b` on each other's leaf01 port."""
    document = roce_inventory()
    nic_a, nic_b = host(document, a)["nics"][0], host(document, b)["nics"][0]
    nic_a["port"], nic_b["port"] = nic_b["port"], nic_a["port"]
    return document


def with_new_leaf_port(document: dict[str, Any], port: str = "Ethernet64") -> dict[str, Any]:
    leaf01 = next(s for s in document["switches"] if s["name"] == "leaf01")
    leaf01["ports"].append({"name": port, "lanes": "64,65,66,67", "speed": 400000})
    return document


def recabled(node: str, port: str = "Ethernet64") -> dict[str, Any]:
    """The demo inventory with `node`'s eth0 moved to a new leaf01 port."""
    document = with_new_leaf_port(roce_inventory(), port)
    host(document, node)["nics"][0]["port"] = port
    return document


def renamed(old: str, new: str) -> dict[str, Any]:
    document = roce_inventory()
    host(document, old)["name"] = new
    return document


@pytest.fixture
def roce_free(uow: UnitOfWork) -> UnitOfWork:
    """roce-west with the demo inventory and no owner: every host is a free compute node."""
    uow_create_roce_fabric(uow)
    return uow


def roce_nics(uow: UnitOfWork, node: str) -> list[tuple[str, str, str]]:
    view = nodes.get_node(uow, fabric_name=ROCE_FABRIC, node_name=node)
    return [(n.name, n.switch, n.port) for n in view.nics or []]


def test_swapping_two_tenants_nics_is_refused_naming_every_move(uow, roce_onboarded, db_dump):
    before = db_dump()

    moved = roce_refused(uow, swapped_eth0("gpu0001", "gpu0005"))

    assert moved == [
        move("gpu0001/eth0", "leaf01:Ethernet0", "leaf01:Ethernet32"),
        move("gpu0005/eth0", "leaf01:Ethernet32", "leaf01:Ethernet0"),
        move("leaf01:Ethernet0", "gpu0001", "gpu0005"),
        move("leaf01:Ethernet32", "gpu0005", "gpu0001"),
    ]
    assert db_dump() == before


def test_re_cabling_a_held_hosts_nic_to_a_new_port_is_refused(uow, roce_onboarded, db_dump):
    before = db_dump()

    moved = roce_refused(uow, recabled("gpu0001"))

    assert moved == [move("gpu0001/eth0", "leaf01:Ethernet0", "leaf01:Ethernet64")]
    assert db_dump() == before


def test_a_new_host_taking_a_held_hosts_switch_ports_is_refused(uow, roce_onboarded):
    moved = roce_refused(uow, renamed("gpu0001", "gpu0009"))

    assert moved == [
        move("leaf01:Ethernet0", "gpu0001", "gpu0009"),
        move("leaf02:Ethernet0", "gpu0001", "gpu0009"),
    ]


def test_a_free_hosts_switch_port_claimed_by_a_held_host_is_refused(roce_free, db_dump):
    tenants.create_tenant(
        roce_free, spec=TenantCreate(name="acme", kind="external", qos_class="gold")
    )
    allocations.allocate(
        roce_free, tenant_name="acme", spec=AllocationCreate(fabric=ROCE_FABRIC, nodes=["gpu0002"])
    )
    document = roce_inventory()
    document["nodes"].remove(host(document, "gpu0001"))
    host(document, "gpu0002")["nics"].append(
        {"name": "eth2", "switch": "leaf01", "port": "Ethernet0"}
    )
    before = db_dump()

    assert roce_refused(roce_free, document) == [move("leaf01:Ethernet0", "gpu0001", "gpu0002")]
    assert db_dump() == before


@pytest.mark.parametrize("role", ["storage", "management"])
def test_re_cabling_a_free_storage_or_management_hosts_nic_is_refused(roce_free, role):
    set_role(roce_free, "gpu0001", role, ROCE_FABRIC)

    moved = roce_refused(roce_free, recabled("gpu0001"))

    assert moved == [move("gpu0001/eth0", "leaf01:Ethernet0", "leaf01:Ethernet64")]


def test_swapping_two_free_hosts_nics_is_applied_and_reported(roce_free):
    result = roce_import(roce_free, swapped_eth0("gpu0001", "gpu0002"))

    assert moves_of(result) == [
        move("gpu0001/eth0", "leaf01:Ethernet0", "leaf01:Ethernet8"),
        move("gpu0002/eth0", "leaf01:Ethernet8", "leaf01:Ethernet0"),
        move("leaf01:Ethernet0", "gpu0001", "gpu0002"),
        move("leaf01:Ethernet8", "gpu0002", "gpu0001"),
    ]
    assert roce_nics(roce_free, "gpu0001")[0] == ("eth0", "leaf01", "Ethernet8")
    assert roce_nics(roce_free, "gpu0002")[0] == ("eth0", "leaf01", "Ethernet0")


def test_re_cabling_a_free_hosts_nic_is_applied_and_reported(roce_free):
    result = roce_import(roce_free, recabled("gpu0001"))

    assert moves_of(result) == [move("gpu0001/eth0", "leaf01:Ethernet0", "leaf01:Ethernet64")]
    assert (result.added, result.missing) == ([], [])
    assert roce_nics(roce_free, "gpu0001")[0] == ("eth0", "leaf01", "Ethernet64")


def test_a_new_host_taking_a_free_hosts_switch_ports_is_applied_and_reported(roce_free):
    result = roce_import(roce_free, renamed("gpu0001", "gpu0009"))

    assert moves_of(result) == [
        move("leaf01:Ethernet0", "gpu0001", "gpu0009"),
        move("leaf02:Ethernet0", "gpu0001", "gpu0009"),
    ]
    assert result.absent_nodes == ["gpu0001"]
    assert roce_nics(roce_free, "gpu0009") == [
        ("eth0", "leaf01", "Ethernet0"),
        ("eth1", "leaf02", "Ethernet0"),
    ]


def test_reimporting_the_same_inventory_moves_nothing(uow, roce_onboarded):
    assert roce_import(uow, roce_inventory()).moved == []
