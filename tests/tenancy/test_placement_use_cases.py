"""`count` allocations placed by the policy (issue 13, item 3) on rail-optimised fabrics.

InfiniBand on examples/ib-rail.ibnetdiscover (four leaf groups of four rails, four GPU nodes per
group: gpu0001-0004 on leaf-g1-*, ..., gpu0013-0016 on leaf-g4-*; services on leaf-svc), RoCE
on a small rail inventory built here. Customers (external) are on dedicated leaves, teams
(internal) on segments: customers land on different leaf groups, fill their own before opening
another, teams stay off customers' leaves, and a refusal says why and writes nothing. Every
allocation here also passes the verifier's dedicated-leaf rule at the commit gate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import select

from policies.errors import ConflictError, NoPlacementError
from policies.policy import DEFAULT_POLICY, Isolation, Policy, TenantKindPolicy
from tenancy import models as m
from tenancy.gate import verification
from tenancy.schemas import AllocationCreate, NodePatch, ServiceCreate, TenantCreate
from tenancy.schemas.policy import PolicyDocument
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import allocations, nodes, placement, shared_services, tenants
from tenancy.usecases.policy import put_policy
from tests.builders import REPO, dump_database, uow_create_fabric, uow_create_roce_fabric

IB_RAIL = "ib-rail"
RAIL_TOPOLOGY = REPO / "examples" / "ib-rail.ibnetdiscover"
ROCE_RAIL = "roce-west"
CUSTOMERS_DEDICATED = {"kinds": {"external": {"isolation": "dedicated_leaf"}}}


def group(number: int) -> list[str]:
    """The GPU nodes of ib-rail's leaf group `number` (1-4)."""
    return [f"gpu{n:04d}" for n in range((number - 1) * 4 + 1, number * 4 + 1)]


@pytest.fixture
def ib_rail(uow: UnitOfWork) -> UnitOfWork:
    """ib-rail as docs/operators/policy.md sets it up, customers on dedicated leaves."""
    uow_create_fabric(uow, IB_RAIL, topology_text=RAIL_TOPOLOGY.read_text())
    roles = {"sm01": "management", "stor01": "storage", "stor02": "storage"}
    for node, role in roles.items():
        nodes.set_node_role(uow, fabric_name=IB_RAIL, node_name=node, patch=NodePatch(role=role))
    for name, held in {"storage": ["stor01", "stor02"], "telemetry": ["tel01"]}.items():
        spec = ServiceCreate(name=name, nodes=held)
        shared_services.create_service(uow, fabric_name=IB_RAIL, spec=spec)
    put_policy(uow, document=PolicyDocument.model_validate(CUSTOMERS_DEDICATED))
    return uow


def customer(uow: UnitOfWork, name: str, kind: str = "external") -> None:
    tenants.create_tenant(uow, spec=TenantCreate(name=name, kind=kind))


def allocate(uow: UnitOfWork, tenant: str, count: int, fabric: str = IB_RAIL) -> list[str]:
    spec = AllocationCreate(fabric=fabric, count=count)
    return allocations.allocate(uow, tenant_name=tenant, spec=spec).nodes


def holds(uow: UnitOfWork, fabric: str = IB_RAIL) -> bool:
    return verification.verify_fabric(uow, fabric_name=fabric).holds


def test_two_customers_on_dedicated_leaves_land_on_different_leaf_groups(ib_rail):
    customer(ib_rail, "acme")
    customer(ib_rail, "globex")

    assert allocate(ib_rail, "acme", 2) == ["gpu0001", "gpu0002"]
    assert allocate(ib_rail, "globex", 2) == ["gpu0005", "gpu0006"]
    assert holds(ib_rail)


def test_a_customer_fills_its_own_leaf_group_before_opening_another(ib_rail):
    customer(ib_rail, "acme")
    customer(ib_rail, "globex")
    allocate(ib_rail, "acme", 2)
    allocate(ib_rail, "globex", 1)

    assert allocate(ib_rail, "acme", 2) == ["gpu0003", "gpu0004"]
    # Its group is full: one more group, the first one no other tenant holds a port in.
    assert allocate(ib_rail, "acme", 1) == ["gpu0009"]
    assert holds(ib_rail)


def test_a_third_customer_with_no_free_leaf_group_is_refused_with_the_reason(ib_rail, engine):
    customer(ib_rail, "acme")
    customer(ib_rail, "globex")
    customer(ib_rail, "initech")
    assert allocate(ib_rail, "acme", 5) == [*group(1), "gpu0005"]
    assert allocate(ib_rail, "globex", 5) == [*group(3), "gpu0013"]
    before = dump_database(engine)

    with pytest.raises(NoPlacementError) as refusal:
        allocate(ib_rail, "initech", 1)

    assert refusal.value.detail == (
        "fabric 'ib-rail' has 6 free compute node(s), 1 requested, but every leaf they are "
        "cabled to holds another tenant's port (dedicated_leaf)"
    )
    assert dump_database(engine) == before


def test_teams_on_segments_stay_off_customers_leaves_and_share_theirs(ib_rail):
    customer(ib_rail, "acme")
    customer(ib_rail, "research", kind="internal")
    customer(ib_rail, "datapipe", kind="internal")
    allocate(ib_rail, "acme", 1)

    assert allocate(ib_rail, "research", 2) == ["gpu0005", "gpu0006"]
    assert allocate(ib_rail, "datapipe", 2) == ["gpu0007", "gpu0008"]
    assert holds(ib_rail)


def test_a_team_is_refused_when_every_free_node_is_on_a_customers_leaves(ib_rail):
    customer(ib_rail, "acme")
    customer(ib_rail, "research", kind="internal")
    allocate(ib_rail, "acme", 13)

    with pytest.raises(NoPlacementError, match="a port of a tenant on dedicated leaves"):
        allocate(ib_rail, "research", 1)


def test_a_service_holding_a_gpu_node_does_not_keep_a_customer_off_its_leaves(ib_rail):
    spec = ServiceCreate(name="scratch", nodes=["gpu0001"])
    shared_services.create_service(ib_rail, fabric_name=IB_RAIL, spec=spec)
    customer(ib_rail, "acme")

    # Group 1 has 3 free nodes: the smallest group that fits 3.
    assert allocate(ib_rail, "acme", 3) == ["gpu0002", "gpu0003", "gpu0004"]
    assert holds(ib_rail)


def test_too_few_free_nodes_is_the_refusal_from_before_policies(ib_rail):
    customer(ib_rail, "acme")

    with pytest.raises(ConflictError) as refusal:
        allocate(ib_rail, "acme", 17)

    assert not isinstance(refusal.value, NoPlacementError)
    assert refusal.value.detail == "fabric 'ib-rail' has 16 free compute node(s), 17 requested"


@pytest.fixture
def no_leaf_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail any read of candidates or leaf occupancy (the policy-aware path's statements)."""

    def refuse(*_: Any) -> Any:
        raise AssertionError("the default policy's allocation read the fabric's leaves")

    monkeypatch.setattr(placement, "_candidates", refuse)
    monkeypatch.setattr(placement, "_occupancy", refuse)
    yield


def test_under_the_default_policy_a_count_is_the_first_free_nodes_without_reading_leaves(
    uow, no_leaf_reads
):
    uow_create_fabric(uow, IB_RAIL, topology_text=RAIL_TOPOLOGY.read_text())
    customer(uow, "acme")
    customer(uow, "globex")

    assert allocate(uow, "acme", 2) == ["gpu0001", "gpu0002"]
    assert allocate(uow, "globex", 2) == ["gpu0003", "gpu0004"]


def test_a_policy_without_dedicated_leaves_reads_no_leaves_either(ib_rail, no_leaf_reads):
    put_policy(ib_rail, document=PolicyDocument.model_validate({"kinds": {}}))
    customer(ib_rail, "acme")

    assert allocate(ib_rail, "acme", 2) == ["gpu0001", "gpu0002"]


# --- RoCE -------------------------------------------------------------------------------------


def rail_inventory(groups: int = 3, rails: int = 2, per_group: int = 2) -> dict[str, Any]:
    """A rail-optimised RoCE inventory: leaf ``leaf-g<g>-r<r>``, NIC ``eth<r>`` of each of the
    group's nodes on it; every leaf cabled to one spine."""
    leaves = [(g, r) for g in range(1, groups + 1) for r in range(rails)]
    switches: list[dict[str, Any]] = [
        _switch(f"leaf-g{g}-r{r}", "leaf", index, per_group + 1)
        for index, (g, r) in enumerate(leaves, start=1)
    ]
    switches.append(_switch("spine01", "spine", len(leaves) + 1, len(leaves)))
    links = [
        {"a": f"leaf-g{g}-r{r}:Ethernet{per_group * 8}", "b": f"spine01:Ethernet{i * 8}"}
        for i, (g, r) in enumerate(leaves)
    ]
    hosts = [
        {
            "name": f"gpu{(g - 1) * per_group + n:04d}",
            "nics": [
                {"name": f"eth{r}", "switch": f"leaf-g{g}-r{r}", "port": f"Ethernet{(n - 1) * 8}"}
                for r in range(rails)
            ],
        }
        for g in range(1, groups + 1)
        for n in range(1, per_group + 1)
    ]
    return {"switches": switches, "links": links, "nodes": hosts}


def _switch(name: str, role: str, index: int, ports: int) -> dict[str, Any]:
    switch: dict[str, Any] = {
        "name": name,
        "role": role,
        "asn": 65100 + index,
        "loopback": f"10.0.0.{index}",
        "platform": "sonic",
        "ports": [
            {
                "name": f"Ethernet{p * 8}",
                "lanes": ",".join(str(p * 8 + i) for i in range(4)),
                "speed": 400000,
                "cable_length": "5m",
            }
            for p in range(ports)
        ],
    }
    if role == "leaf":
        switch["vtep"] = f"10.0.1.{index}"
    return switch


@pytest.fixture
def roce_rail(uow: UnitOfWork) -> UnitOfWork:
    uow_create_roce_fabric(uow, rail_inventory())
    put_policy(uow, document=PolicyDocument.model_validate(CUSTOMERS_DEDICATED))
    return uow


def test_roce_customers_on_dedicated_leaves_land_on_different_leaf_groups(roce_rail):
    for name in ("acme", "globex", "initech", "hooli"):
        customer(roce_rail, name)

    assert allocate(roce_rail, "acme", 1, ROCE_RAIL) == ["gpu0001"]
    assert allocate(roce_rail, "globex", 2, ROCE_RAIL) == ["gpu0003", "gpu0004"]
    assert allocate(roce_rail, "initech", 1, ROCE_RAIL) == ["gpu0005"]
    assert allocate(roce_rail, "acme", 1, ROCE_RAIL) == ["gpu0002"]  # its own group first
    assert holds(roce_rail, ROCE_RAIL)
    with pytest.raises(NoPlacementError, match="holds another tenant's port"):
        allocate(roce_rail, "hooli", 1, ROCE_RAIL)


def test_a_roce_team_stays_off_a_customers_leaves(roce_rail):
    customer(roce_rail, "acme")
    customer(roce_rail, "research", kind="internal")
    allocate(roce_rail, "acme", 1, ROCE_RAIL)

    assert allocate(roce_rail, "research", 3, ROCE_RAIL) == ["gpu0003", "gpu0004", "gpu0005"]
    assert holds(roce_rail, ROCE_RAIL)


def test_hold_placed_nodes_takes_the_policy_as_a_parameter(ib_rail):
    customer(ib_rail, "acme")
    allocate(ib_rail, "acme", 1)
    dedicated = TenantKindPolicy(isolation=Isolation.DEDICATED_LEAF)
    everyone = Policy(version=7, internal=dedicated, external=dedicated)

    with ib_rail.transaction() as tx:
        fabric = tx.session.exec(select(m.Fabric).where(m.Fabric.name == IB_RAIL)).one()
        team = tx.session.exec(select(m.Tenant).where(m.Tenant.name == "acme")).one()
        held = placement.hold_placed_nodes(tx.session, fabric, team, 2, everyone)
        first = placement.hold_placed_nodes(tx.session, fabric, team, 1, DEFAULT_POLICY)

    assert [n.name for n in held] == ["gpu0002", "gpu0003"]
    assert [n.name for n in first] == ["gpu0004"]
