"""A tenant's additional partitions under random sequences of changes (Hypothesis), both backends.

From the onboarded ib-east (acme, research and globex hold two nodes each, gpu0007 and gpu0008
are free; acme and research then create a partition; ports may hold 4 P_Keys), random
sequences create partitions (the lowest free P_Key or a chosen one), set their
members exactly (the tenant's own ports, sometimes another tenant's or a free node's), add and
remove members, delete partitions, release allocations and allocate again. After every step:

* the verdict the service keeps (the stored digest row, which GET .../verification and the next
  change build on) equals a full re-verification of the whole fabric, and the full check
  (tenancy/gate/full_check.py) raises no alarm; each change went through the commit gate with
  `verify_cross_check` on (tests/conftest.py), which raises `IncrementalDivergenceError` when the
  tenant-scoped verdict differs from the whole fabric's;
* no partition of the loaded snapshot holds ports of two tenants, and every member of a
  tenant's partition is a port of a node that tenant holds;
* the tenant's partitions are what the sequence made of them (a model), and a refused
  operation changed no row at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text

from policies.errors import IsofabricError, IsolationViolationError
from policies.infiniband.model import IbSnapshot
from policies.model import OwnerKind
from tenancy import models as m
from tenancy.gate.full_check import full_check
from tenancy.record.snapshot import load_snapshot
from tenancy.schemas import AllocationCreate, MemberSpec, PartitionCreate
from tenancy.store.lookups import fabric_named
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.technology import verify_snapshot
from tenancy.usecases import allocations, partitions
from tests.builders import FABRIC, PORT_GUIDS, FakeClock, dump_database

TENANT_NAMES = ("acme", "research", "globex")
NAMES = ("jobs", "mpi", "storage-net")
# Chosen keys: free ones, one another tenant's partition may take first, and research's default.
CHOSEN_PKEYS = (None, None, "0x0200", "0x0201", "0x0102")
# P_Keys a port may hold, 0x7fff included: every port of a tenant holds 0x7fff and its default
# partition's key, acme's the storage service's too, so acme's ports have room for one more
# partition and the others' for two; a change over it is refused by the commit gate.
BUDGET = 4
SET_BUDGET = "UPDATE fabric SET pkeys_per_port = :budget WHERE name = :fabric"
FORGET_DIGEST = (
    "DELETE FROM fabric_digest WHERE fabric_id = (SELECT id FROM fabric WHERE name = :fabric)"
)
BASE_KEYS = {"acme": 3, "research": 2, "globex": 2}
COMPUTE_PORTS = tuple(
    (node, guid) for node, guids in PORT_GUIDS.items() if node.startswith("gpu") for guid in guids
)


@dataclass
class World:
    """The database of one example and what the sequence made of the partitions."""

    uow: UnitOfWork
    engine: Engine
    # tenant -> partition name -> member GUID -> full
    partitions: dict[str, dict[str, dict[str, bool]]] = field(
        default_factory=lambda: {tenant: {} for tenant in TENANT_NAMES}
    )

    def held_ports(self) -> dict[str, str]:
        """Port GUID -> the tenant holding its node, from the committed snapshot."""
        with self.uow.transaction(read_only=True) as tx:
            snapshot = load_snapshot(tx.session, fabric_named(tx.session, FABRIC))
        holders = {
            node.name: node.owners[0].name
            for node in snapshot.nodes
            if len(node.owners) == 1 and node.owners[0].kind == OwnerKind.TENANT
        }
        return {guid: holders[node] for node, guid in COMPUTE_PORTS if node in holders}


@pytest.fixture
def fresh(
    engine: Engine, settings: Settings, request: pytest.FixtureRequest, onboarded: object
) -> Iterator[Callable[[], World]]:
    """A new World on the onboarded state for each Hypothesis example, on the test's backend."""

    def make() -> World:
        if engine.dialect.name == "sqlite":
            request.getfixturevalue("sqlite_seeds").restore("onboarded", engine)
        else:
            request.getfixturevalue("postgres_databases").reset("onboarded")
        with engine.begin() as connection:  # a small budget; the digest is then rebuilt whole
            connection.execute(text(SET_BUDGET), {"budget": BUDGET, "fabric": FABRIC})
            connection.execute(text(FORGET_DIGEST), {"fabric": FABRIC})
        world = World(UnitOfWork(engine, settings, FakeClock()), engine)
        assert full_check(world.uow, fabric_name=FABRIC).matches  # stores the rebuilt digest
        return world

    yield make


# --- the operations ---------------------------------------------------------------------------
# Each predicts its outcome (True: refused, False: accepted, None: either), then returns the call
# and what it does to the model when accepted.

Step = tuple[bool | None, Callable[[], object], Callable[[], None]]


def _partition(world: World, tenant: str, number: int) -> str:
    """Mostly one of the tenant's partitions; one time in five any name, maybe not one."""
    existing = sorted(world.partitions[tenant])
    if existing and number % 5:
        return existing[number % len(existing)]
    return NAMES[number % len(NAMES)]


def _over_budget(world: World, tenant: str, name: str, guids: Iterable[str]) -> bool:
    """Whether one of `guids` in partition `name` would hold more than BUDGET keys."""
    others = [members for other, members in world.partitions[tenant].items() if other != name]
    return any(
        BASE_KEYS[tenant] + 1 + sum(guid in members for members in others) > BUDGET
        for guid in guids
    )


def _port(world: World, tenant: str, number: int) -> str:
    """Mostly one of the tenant's ports; one time in four any compute node's."""
    own = sorted(guid for guid, holder in world.held_ports().items() if holder == tenant)
    if own and number % 4:
        return own[number // 4 % len(own)]
    return COMPUTE_PORTS[number // 4 % len(COMPUTE_PORTS)][1]


def create(world: World, tenant: str, number: int) -> Step:
    name, pkey = NAMES[number % 3], CHOSEN_PKEYS[number // 3 % len(CHOSEN_PKEYS)]
    spec = PartitionCreate(fabric=FABRIC, name=name, pkey=pkey)
    taken = name in world.partitions[tenant]

    def call() -> None:
        view = partitions.create_partition(world.uow, tenant_name=tenant, spec=spec)
        assert (view.name, view.members) == (name, [])
        assert pkey is None or view.pkey == pkey

    def accepted() -> None:
        world.partitions[tenant][name] = {}

    return (True if taken else None if pkey else False), call, accepted


def set_members(world: World, tenant: str, number: int) -> Step:
    """A subset of the tenant's ports (bits of `number`); with number % 7 == 0 also a port the
    tenant does not hold (another tenant's or a free node's)."""
    name = _partition(world, tenant, number)
    held = world.held_ports()
    own = sorted(guid for guid, holder in held.items() if holder == tenant)
    wanted = {guid: bool(number >> 4 & 1) for bit, guid in enumerate(own) if number >> bit & 1}
    foreign = number % 7 == 0
    if foreign:
        others = [guid for _, guid in COMPUTE_PORTS if held.get(guid) != tenant]
        wanted[others[number % len(others)]] = True
    members = [
        MemberSpec(guid=guid, membership="full" if full else "limited")
        for guid, full in wanted.items()
    ]

    def call() -> None:
        view = partitions.set_members(world.uow, tenant_name=tenant, name=name, members=members)
        assert {(mv.guid, mv.membership == "full") for mv in view.members} == set(wanted.items())

    def accepted() -> None:
        world.partitions[tenant][name] = wanted

    refused = foreign or name not in world.partitions[tenant]
    return refused or _over_budget(world, tenant, name, wanted), call, accepted


def add_member(world: World, tenant: str, number: int) -> Step:
    name, guid = _partition(world, tenant, number), _port(world, tenant, number)
    full = number % 2 == 0
    member = MemberSpec(guid=guid, membership="full" if full else "limited")
    refused = name not in world.partitions[tenant] or world.held_ports().get(guid) != tenant
    refused = refused or _over_budget(world, tenant, name, [guid])

    def call() -> None:
        partitions.add_member(world.uow, tenant_name=tenant, name=name, member=member)

    def accepted() -> None:
        world.partitions[tenant][name][guid] = full

    return refused, call, accepted


def remove_member(world: World, tenant: str, number: int) -> Step:
    name = _partition(world, tenant, number)
    members = sorted(world.partitions[tenant].get(name, {}))
    guid = (
        members[number % len(members)] if members and number % 4 else _port(world, tenant, number)
    )

    def call() -> None:
        partitions.remove_member(world.uow, tenant_name=tenant, name=name, guid=guid)

    def accepted() -> None:
        del world.partitions[tenant][name][guid]

    return guid not in world.partitions[tenant].get(name, {}), call, accepted


def delete(world: World, tenant: str, number: int) -> Step:
    name = _partition(world, tenant, number)

    def call() -> None:
        partitions.delete_partition(world.uow, tenant_name=tenant, name=name)

    def accepted() -> None:
        del world.partitions[tenant][name]

    return name not in world.partitions[tenant], call, accepted


def release(world: World, tenant: str, number: int) -> Step:
    page = allocations.list_allocations(world.uow, tenant_name=tenant, limit=10, cursor=None)
    if not page.data:
        return False, lambda: None, lambda: None
    view = page.data[number % len(page.data)]

    def call() -> None:
        allocations.release_allocation(world.uow, tenant_name=tenant, allocation_id=view.id)

    def accepted() -> None:  # the released nodes' ports leave the tenant's partitions
        released = {guid for node, guid in COMPUTE_PORTS if node in view.nodes}
        for members in world.partitions[tenant].values():
            for guid in released & set(members):
                del members[guid]

    return False, call, accepted


def allocate(world: World, tenant: str, number: int) -> Step:
    spec = AllocationCreate(fabric=FABRIC, count=1 + number % 2)

    def call() -> None:
        allocations.allocate(world.uow, tenant_name=tenant, spec=spec)

    return None, call, lambda: None  # refused when fewer nodes are free


OPERATIONS: dict[str, Callable[[World, str, int], Step]] = {
    f.__name__: f
    for f in (create, set_members, add_member, remove_member, delete, release, allocate)
}
WEIGHTED = (
    ["create"] * 3
    + ["set_members"] * 3
    + ["add_member"] * 3
    + ["remove_member", "delete", "release", "allocate"]
)
STEPS = st.lists(
    st.tuples(st.sampled_from(WEIGHTED), st.sampled_from(TENANT_NAMES), st.integers(0, 63)),
    min_size=1,
    max_size=10,
)


def run(world: World, name: str, tenant: str, number: int) -> None:
    """One operation as predicted; a refusal must change no row (its rollback is whole)."""
    refusal, call, accepted = OPERATIONS[name](world, tenant, number)
    before = dump_database(world.engine)
    try:
        call()
    except IsofabricError as refused:
        assert refusal is not False, f"{name}({tenant}, {number}) refused: {refused}"
        assert dump_database(world.engine) == before, f"{name} refused ({refused}) changed rows"
        event(f"{name}: refused ({type(refused).__name__})")
        return
    assert refusal is not True, f"{name}({tenant}, {number}) was accepted"
    accepted()
    event(f"{name}: accepted")


# --- what must hold after every step ----------------------------------------------------------


def assert_kept_verdict_is_the_whole_fabrics(world: World) -> None:
    with world.uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, FABRIC)
        whole = verify_snapshot(load_snapshot(tx.session, fabric))
        kept = tx.session.get(m.FabricDigest, fabric.id)
    assert whole.holds, whole.counterexamples
    assert kept is not None and (kept.digest, kept.holds) == (whole.snapshot_digest, True)
    check = full_check(world.uow, fabric_name=FABRIC)
    assert check.matches and check.holds, check.alarm


def assert_no_partition_mixes_tenants(world: World) -> None:
    held = world.held_ports()
    with world.uow.transaction(read_only=True) as tx:
        snapshot = load_snapshot(tx.session, fabric_named(tx.session, FABRIC))
    assert isinstance(snapshot, IbSnapshot)
    for partition in snapshot.partitions:
        tenants = {
            held[f"0x{m.guid:016x}"] for m in partition.members if f"0x{m.guid:016x}" in held
        }
        assert len(tenants) <= 1, (partition, tenants)
        if partition.owner.kind == OwnerKind.TENANT:
            assert tenants <= {partition.owner.name}, (partition, tenants)
            strays = [m for m in partition.members if f"0x{m.guid:016x}" not in held]
            assert not strays, (partition, strays)


def assert_partitions_are_the_models(world: World) -> None:
    held = world.held_ports()
    for tenant in TENANT_NAMES:
        views = partitions.list_partitions(world.uow, tenant_name=tenant)
        additional = {
            view.name: {member.guid: member.membership == "full" for member in view.members}
            for view in views
            if view.name != "default"
        }
        assert additional == world.partitions[tenant]
        own = {guid for guid, holder in held.items() if holder == tenant}
        defaults = [view for view in views if view.name == "default"]
        if own:
            assert [{mv.guid for mv in view.members} for view in defaults] == [own]
        else:
            assert defaults == []


PROPERTY = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@PROPERTY
@given(sequence=STEPS)
def test_partition_changes_keep_the_whole_fabrics_verdict_and_never_mix_tenants(fresh, sequence):
    world = fresh()
    for tenant in TENANT_NAMES[:2]:  # globex starts with its default partition only
        run(world, "create", tenant, 0)
    for name, tenant, number in sequence:
        run(world, name, tenant, number)
        assert_kept_verdict_is_the_whole_fabrics(world)
        assert_no_partition_mixes_tenants(world)
        assert_partitions_are_the_models(world)


def test_a_port_over_its_pkey_budget_is_refused_by_the_gate_and_changes_nothing(fresh):
    world = fresh()
    port = PORT_GUIDS["gpu0001"][0]
    for name in NAMES[:2]:
        partitions.create_partition(
            world.uow, tenant_name="acme", spec=PartitionCreate(fabric=FABRIC, name=name)
        )
    partitions.add_member(
        world.uow, tenant_name="acme", name=NAMES[0], member=MemberSpec(guid=port)
    )
    before = dump_database(world.engine)

    with pytest.raises(IsolationViolationError) as refused:
        partitions.add_member(
            world.uow, tenant_name="acme", name=NAMES[1], member=MemberSpec(guid=port)
        )

    rules = {e["rule"] for e in refused.value.extensions["counterexamples"]}
    assert rules == {"pkey-budget-exceeded"}
    assert dump_database(world.engine) == before
    assert_kept_verdict_is_the_whole_fabrics(world)
