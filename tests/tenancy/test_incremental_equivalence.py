"""The incremental verifier against the whole-fabric one (issue 12, item 1).

Random sequences of mutations run through the use cases, on InfiniBand and RoCE. Every change
goes through the commit gate with `verify_cross_check` on: the gate verifies the touched part,
then the whole fabric, and raises `IncrementalDivergenceError` unless the verdict, the
counterexamples and the digest agree, refused changes included. After every step the stored
digest must equal the whole snapshot's, and the committed state must verify.

The InfiniBand fabric allows 3 P_Keys per port (the default partition, the tenant's own, one
service), so granting a tenant a second service must be refused as a `pkey-budget-exceeded`
violation: the sequences reach refusals, and a fixed case below checks one.

Policies (issue 13): the sequences also change the policy (dedicated leaves per kind, QoS
classes, service visibility, quotas, default grants), patch tenants and allocate named nodes,
on the demo fabrics (every node on the same leaves) and on the rail-optimised example fabric
(leaf groups), so the policy rules' counterexamples are cross-checked too: a scoped change under
a dedicated-leaf policy must see the other tenants on its leaves
(tenancy/record/snapshot/leaves.py). They also peer tenants and end peerings: a change to one side
is verified with the other side's ports (`widen` reads the peers), including a peering's P_Key over
the budget of 3.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine
from sqlmodel import col, select

from policies.errors import IsofabricError, IsolationViolationError
from tenancy import models as m
from tenancy.record.snapshot import load_snapshot
from tenancy.schemas import AllocationCreate, GrantCreate, NodePatch, ServiceCreate, TenantCreate
from tenancy.schemas.peerings import PeeringCreate
from tenancy.schemas.policy import PolicyDocument
from tenancy.schemas.tenants import TenantPatch
from tenancy.store.db import make_engine
from tenancy.store.lookups import fabric_named
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.technology import verify_snapshot
from tenancy.usecases import (
    allocations,
    nodes,
    peerings,
    policy,
    shared_services,
    tenant_patch,
    tenants,
)
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import (
    FABRIC,
    REPO,
    ROCE_FABRIC,
    ROCE_STORAGE_NODES,
    SERVICE,
    SERVICE_NODES,
    FakeClock,
    uow_create_fabric,
    uow_create_roce_fabric,
)
from tests.keys import key_settings, register_key

TENANTS = ("t0", "t1", "t2", "t3")
KINDS = {"t0": "external", "t1": "external", "t2": "internal", "t3": "internal"}
SECOND_SERVICE = "telemetry"
RAIL_FABRIC = "ib-rail"
RAIL_TOPOLOGY = REPO / "examples" / "ib-rail.ibnetdiscover"
CLASSES = ("gold", "silver", "bronze")
POLICIES = tuple(
    PolicyDocument.model_validate(document)
    for document in (
        {},
        {"kinds": {"external": {"isolation": "dedicated_leaf"}}},
        {
            "kinds": {
                "internal": {"isolation": "dedicated_leaf", "qos_classes": ["gold", "silver"]}
            },
            "services": {SECOND_SERVICE: "internal"},
        },
        {
            "kinds": {
                "external": {"qos_classes": ["gold"], "max_nodes": 3, "default_grants": [SERVICE]}
            }
        },
        # Peering across kinds and among customers, none among teams: an accepted
        # internal peering is refused by it (rule policy-peering).
        {
            "kinds": {
                "internal": {"peering": ["external"]},
                "external": {"peering": ["external", "internal"]},
            }
        },
    )
)


@dataclass
class World:
    """One seeded database and what the sequence did so far."""

    uow: UnitOfWork
    fabric: str
    free_nodes: tuple[str, ...]
    allocations: dict[str, list[str]] = field(default_factory=dict)
    grants: dict[tuple[str, str], str] = field(default_factory=dict)
    peerings: list[tuple[str, str, str]] = field(default_factory=list)  # id, requester, peer
    refused: int = 0


def _seed_ib(uow: UnitOfWork) -> tuple[str, tuple[str, ...]]:
    uow_create_fabric(uow, pkeys_per_port=3)
    for node in SERVICE_NODES:
        nodes.set_node_role(
            uow, fabric_name=FABRIC, node_name=node, patch=NodePatch(role="storage")
        )
    nodes.set_node_role(
        uow, fabric_name=FABRIC, node_name="sm01", patch=NodePatch(role="management")
    )
    _services(uow, FABRIC, SERVICE_NODES, "gpu0008")
    return FABRIC, tuple(f"gpu000{i}" for i in range(1, 8))


def _seed_roce(uow: UnitOfWork) -> tuple[str, tuple[str, ...]]:
    uow_create_roce_fabric(uow)
    for node in ROCE_STORAGE_NODES:
        nodes.set_node_role(
            uow, fabric_name=ROCE_FABRIC, node_name=node, patch=NodePatch(role="storage")
        )
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, ROCE_FABRIC)
        computes = tx.session.exec(
            select(m.Node.name)
            .where(m.Node.fabric_id == fabric.id, m.Node.role == "compute")
            .order_by(col(m.Node.name))
        ).all()
    _services(uow, ROCE_FABRIC, ROCE_STORAGE_NODES, computes[-1])
    return ROCE_FABRIC, tuple(computes[:-1])


def _services(uow: UnitOfWork, fabric: str, storage: tuple[str, ...], telemetry: str) -> None:
    nodes.set_node_role(
        uow, fabric_name=fabric, node_name=telemetry, patch=NodePatch(role="storage")
    )
    for name, held in ((SERVICE, list(storage)), (SECOND_SERVICE, [telemetry])):
        shared_services.create_service(
            uow, fabric_name=fabric, spec=ServiceCreate(name=name, nodes=held)
        )
    for tenant in TENANTS:
        tenants.create_tenant(
            uow, spec=TenantCreate(name=tenant, kind=KINDS[tenant], qos_class="gold")
        )


def _seed_rail(uow: UnitOfWork) -> tuple[str, tuple[str, ...]]:
    """The rail-optimised example: four leaf groups of four compute nodes, services apart."""
    uow_create_fabric(uow, RAIL_FABRIC, RAIL_TOPOLOGY.read_text())
    roles = {"sm01": "management", "stor01": "storage", "stor02": "storage"}
    for node, role in roles.items():
        nodes.set_node_role(
            uow, fabric_name=RAIL_FABRIC, node_name=node, patch=NodePatch(role=role)
        )
    _services(uow, RAIL_FABRIC, ("stor01", "stor02"), "tel01")
    return RAIL_FABRIC, tuple(f"gpu{i:04d}" for i in range(1, 17))


Seeder = Callable[[UnitOfWork], tuple[str, tuple[str, ...]]]
SEEDERS: dict[str, Seeder] = {"infiniband": _seed_ib, "roce": _seed_roce, "ib-rail": _seed_rail}


@pytest.fixture(scope="module")
def seeded(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, str, tuple[str, ...]]]:
    """One seeded SQLite file per technology; each example works on a copy."""
    found = {}
    for kind, seeder in SEEDERS.items():
        path = tmp_path_factory.mktemp(kind) / "seed.db"
        engine = make_engine(f"sqlite:///{path}")
        prepare_database(engine)
        register_key(engine)
        fabric, free = seeder(_uow(engine))
        engine.dispose()
        found[kind] = (path, fabric, free)
    return found


def _uow(engine: Engine) -> UnitOfWork:
    url = engine.url.render_as_string(hide_password=False)
    return UnitOfWork(
        engine, key_settings(Settings(database_url=url, verify_cross_check=True)), FakeClock()
    )


@pytest.fixture
def world_of(seeded, tmp_path: Path) -> Iterator[Callable[[str], World]]:
    engines: list[Engine] = []

    def make(kind: str) -> World:
        source, fabric, free = seeded[kind]
        copy = tmp_path / f"{kind}-{len(engines)}.db"
        shutil.copy(source, copy)
        engines.append(make_engine(f"sqlite:///{copy}"))
        return World(_uow(engines[-1]), fabric, free)

    yield make
    for engine in engines:
        engine.dispose()


# --- the operations ----------------------------------------------------------------------------


def allocate(world: World, tenant: str, count: int) -> None:
    view = allocations.allocate(
        world.uow, tenant_name=tenant, spec=AllocationCreate(fabric=world.fabric, count=count)
    )
    world.allocations.setdefault(tenant, []).append(view.id)


def release(world: World, tenant: str, _: int) -> None:
    held = world.allocations.get(tenant)
    if held:
        allocations.release_allocation(world.uow, tenant_name=tenant, allocation_id=held.pop(0))


def grant(world: World, tenant: str, which: int) -> None:
    service = (SERVICE, SECOND_SERVICE)[which % 2]
    spec = GrantCreate(fabric=world.fabric, service=service)
    world.grants[tenant, service] = shared_services.grant_service(
        world.uow, tenant_name=tenant, spec=spec
    ).id


def revoke(world: World, tenant: str, which: int) -> None:
    grant_id = world.grants.pop((tenant, (SERVICE, SECOND_SERVICE)[which % 2]), None)
    if grant_id is not None:
        shared_services.revoke_grant(world.uow, tenant_name=tenant, grant_id=grant_id)


def offboard(world: World, tenant: str, _: int) -> None:
    tenants.offboard_tenant(world.uow, name=tenant)
    world.allocations.pop(tenant, None)


def set_role(world: World, _: str, which: int) -> None:
    node = world.free_nodes[which % len(world.free_nodes)]
    role = ("compute", "storage")[which // len(world.free_nodes) % 2]
    nodes.set_node_role(
        world.uow, fabric_name=world.fabric, node_name=node, patch=NodePatch(role=role)
    )


def allocate_named(world: World, tenant: str, which: int) -> None:
    """One named node: unlike `count`, not placed by the policy, so the leaf rule may refuse it."""
    node = world.free_nodes[which % len(world.free_nodes)]
    view = allocations.allocate(
        world.uow, tenant_name=tenant, spec=AllocationCreate(fabric=world.fabric, nodes=[node])
    )
    world.allocations.setdefault(tenant, []).append(view.id)


def set_policy(world: World, _: str, which: int) -> None:
    policy.put_policy(world.uow, document=POLICIES[which % len(POLICIES)])


def patch(world: World, tenant: str, which: int) -> None:
    """A QoS class (which < 9) or an own quota of 0..4 nodes (the rest)."""
    change = {"qos_class": CLASSES[which % 3]} if which < 9 else {"max_nodes": which - 9}
    spec = TenantPatch.model_validate(change)
    tenant_patch.patch_tenant(world.uow, name=tenant, spec=spec)


# Whom a tenant asks to peer: its own kind's other tenant (even numbers), else one of the other
# kind (the default policy lets teams peer, the last of POLICIES customers and across kinds).
SAME_KIND = {"t0": "t1", "t1": "t0", "t2": "t3", "t3": "t2"}
OTHER_KIND = {"t0": ("t2", "t3"), "t1": ("t3", "t2"), "t2": ("t0", "t1"), "t3": ("t1", "t0")}


def peer(world: World, tenant: str, which: int) -> None:
    """`tenant` requests a peering with another tenant, which accepts it (issue 13, item 4)."""
    other = SAME_KIND[tenant] if which % 2 == 0 else OTHER_KIND[tenant][which // 2 % 2]
    spec = PeeringCreate(fabric=world.fabric, peer=other)
    asked = peerings.request_peering(world.uow, tenant_name=tenant, spec=spec)
    world.peerings.append((asked.id, tenant, other))
    peerings.accept_peering(world.uow, tenant_name=other, peering_id=asked.id)


def unpeer(world: World, _: str, which: int) -> None:
    """One side of a peering made so far ends it (the requester on even numbers)."""
    if world.peerings:
        peering, requester, other = world.peerings.pop(which % len(world.peerings))
        side = requester if which % 2 == 0 else other
        peerings.end_peering(world.uow, tenant_name=side, peering_id=peering)


OPERATIONS = {
    f.__name__: f
    for f in (
        allocate,
        release,
        grant,
        revoke,
        offboard,
        set_role,
        allocate_named,
        set_policy,
        patch,
        peer,
        unpeer,
    )
}
WEIGHTED = (
    ["allocate"] * 4
    + ["release"] * 2
    + ["grant"] * 3
    + ["revoke", "offboard", "set_role"]
    + ["allocate_named"] * 3
    + ["set_policy"] * 2
    + ["patch"]
    + ["peer"] * 2
    + ["unpeer"]
)

steps = st.lists(
    st.tuples(st.sampled_from(WEIGHTED), st.sampled_from(TENANTS), st.integers(0, 13)),
    min_size=1,
    max_size=12,
)


def run(world: World, name: str, tenant: str, number: int) -> None:
    """One operation; refusals and other domain errors are outcomes, not failures."""
    try:
        OPERATIONS[name](world, tenant, number if name != "allocate" else 1 + number % 2)
    except IsolationViolationError:
        world.refused += 1
    except IsofabricError:
        pass


def assert_committed_state_is_the_stored_one(world: World) -> None:
    with world.uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, world.fabric)
        whole = verify_snapshot(load_snapshot(tx.session, fabric))
        stored = tx.session.get(m.FabricDigest, fabric.id)
    assert whole.holds, whole.counterexamples
    assert stored is not None and stored.digest == whole.snapshot_digest


@pytest.mark.parametrize("kind", sorted(SEEDERS))
@settings(
    max_examples=16, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(policy_in_force=st.integers(0, len(POLICIES) - 1), sequence=steps)
def test_incremental_verdicts_and_digests_equal_the_whole_fabrics(
    world_of, kind, policy_in_force, sequence
):
    world = world_of(kind)
    set_policy(world, "", policy_in_force)  # the empty fabric holds under every policy
    for name, tenant, number in sequence:
        run(world, name, tenant, number)  # the gate's cross-check raises on any divergence
        assert_committed_state_is_the_stored_one(world)


def test_a_refused_change_has_the_whole_fabrics_counterexamples(world_of):
    world = world_of("infiniband")
    allocate(world, "t0", 1)
    grant(world, "t0", 0)

    with pytest.raises(IsolationViolationError) as refused:
        grant(world, "t0", 1)  # a fourth P_Key on t0's port: over the fabric's budget of 3

    rules = {e["rule"] for e in refused.value.extensions["counterexamples"]}
    assert rules == {"pkey-budget-exceeded"}
    assert_committed_state_is_the_stored_one(world)


def test_a_change_beside_a_dedicated_tenant_is_refused_as_the_whole_fabric_refuses_it(world_of):
    world = world_of("ib-rail")
    set_policy(world, "", 1)  # external tenants on dedicated leaves
    allocate_named(world, "t0", 0)  # external t0 on gpu0001, leaf group 1

    with pytest.raises(IsolationViolationError) as refused:
        allocate_named(world, "t2", 1)  # internal t2 on gpu0002: group 1's leaves are t0's

    examples = refused.value.extensions["counterexamples"]
    assert {e["rule"] for e in examples} == {"policy-dedicated-leaf"}
    assert {(e["a"]["owner"], e["b"]["owner"]) for e in examples} == {("tenant:t0", "tenant:t2")}
    assert len(examples) == 4  # one per rail: the node's four HCAs reach four leaves
    allocate_named(world, "t2", 4)  # gpu0005, leaf group 2: beside no dedicated tenant
    assert_committed_state_is_the_stored_one(world)


def test_a_peering_over_the_pkey_budget_is_refused_as_the_whole_fabric_refuses_it(world_of):
    world = world_of("infiniband")
    allocate(world, "t2", 1)
    allocate(world, "t3", 1)
    grant(world, "t2", 0)  # t2's port: the default partition, its own and storage's

    with pytest.raises(IsolationViolationError) as refused:
        peer(world, "t2", 0)  # t3 accepts: the peering's partition is a fourth key on t2's port

    rules = {e["rule"] for e in refused.value.extensions["counterexamples"]}
    assert rules == {"pkey-budget-exceeded"}
    assert_committed_state_is_the_stored_one(world)


@pytest.mark.parametrize("kind", ["infiniband", "roce"])
def test_a_policy_against_an_accepted_peering_is_refused_with_its_counterexample(world_of, kind):
    world = world_of(kind)
    allocate(world, "t2", 1)
    allocate(world, "t3", 1)
    peer(world, "t2", 0)  # internal t2 and t3: the default policy lets teams peer

    with pytest.raises(IsolationViolationError) as refused:
        set_policy(world, "", len(POLICIES) - 1)  # no peering among teams

    examples = refused.value.extensions["counterexamples"]
    # Not allowed, the peering is no intended edge: its reach is refuted as cross-tenant too.
    assert {e["rule"] for e in examples} == {"policy-peering", "cross-tenant-reachability"}
    unpeer(world, "", 1)  # t3 ends it
    set_policy(world, "", len(POLICIES) - 1)
    assert_committed_state_is_the_stored_one(world)
