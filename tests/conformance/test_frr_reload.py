"""Conformance: rendered frr.conf files deployed with frr-reload.py on running FRR 8.4 daemons.

The lab (roce_lab.py) runs the fixture fabric (two leaves, one spine) as network namespaces with
zebra and bgpd, and a VXLAN device plus bridge per L2VNI made from each leaf's rendered
CONFIG_DB. Each leaf's frr.conf is deployed with ``frr-reload.py --reload``; then:

* the EVPN sessions come up, and every L2VNI's routes carry exactly the RTs the model gives it,
  so a tenant's routes are not imported by another tenant's VNI (``vtysh … json``);
* grants appear as ``route-target import`` lines of the VRF instances in the running config
  (without VRF devices they cannot become routes here);
* the round trip holds: ``frr-reload.py --test`` shows no delta and `running_differences` of
  the file and ``show running-config`` is empty, after the first deployment and after each
  change of a sequence of onboardings, grants, revocations and offboardings (with
  `with_new_vrfs` as the first step whenever VRFs are added), for a revocation's phase-1 text
  (`without_imports`) and for an API-built fabric.

Tests skip without root, FRR or iproute2 unless ``ISOFABRIC_REQUIRE_CONFORMANCE=1``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from policies.roce.frr_running import running_differences, with_new_vrfs, without_imports
from policies.roce.model import RoceSnapshot, route_target
from policies.roce.parse_frr import parse_frr_conf
from policies.roce.render_frr import render_frr_conf
from policies.roce.render_sonic import render_config_db
from tenancy.record.snapshot.roce import load_roce_snapshot
from tenancy.store.db import make_engine
from tenancy.store.lookups import fabric_named
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import LOCAL_URL, ROCE_LEAVES, FakeClock, api_onboard_roce
from tests.policies.roce_snapshots import roce_snapshot

from .conftest import skip_or_fail
from .harness import ToolsMissingError, wait_until
from .roce_lab import LAB_TIMEOUT, LabTools, RoceLab, Router, apply_vxlanmgrd

pytestmark = pytest.mark.conformance

SNAPSHOT = roce_snapshot()
SNAPSHOT_LEAF01 = render_frr_conf(SNAPSHOT, "leaf01")


@pytest.fixture(scope="module")
def tools() -> LabTools:
    try:
        return LabTools.locate()
    except ToolsMissingError as exc:
        skip_or_fail(str(exc))


def deploy(lab: RoceLab, snapshot: RoceSnapshot) -> None:
    """Every leaf: VXLAN devices from its rendered CONFIG_DB, its rendered frr.conf reloaded."""
    for leaf in lab.leaves():
        apply_vxlanmgrd(leaf, render_config_db(snapshot, leaf.name))
        leaf.load(render_frr_conf(snapshot, leaf.name))


@pytest.fixture(scope="module")
def lab(tools: LabTools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoceLab]:
    with RoceLab(SNAPSHOT, tmp_path_factory.mktemp("frr-reload"), tools) as started:
        deploy(started, SNAPSHOT)
        started.wait_evpn_established()
        yield started


def l2vni_routes(router: Router, vni: int) -> dict[str, list[str]]:
    """Prefix -> RTs of each path in the VNI's table (``show bgp l2vpn evpn route vni N``)."""
    table = router.vtysh_json(f"show bgp l2vpn evpn route vni {vni} json")
    routes = {}
    for prefix, entry in table.items():
        if isinstance(entry, dict) and "paths" in entry:
            communities = [p["extendedCommunity"]["string"] for ps in entry["paths"] for p in ps]
            routes[prefix] = sorted(
                rt for text in communities for rt in re.findall(r"RT:(\S+)", text)
            )
    return routes


def remote_imet(router: Router, vni: int, vtep: str) -> bool:
    return f"[3]:[0]:[32]:[{vtep}]" in l2vni_routes(router, vni)


def test_every_evpn_session_of_the_fabric_comes_up(lab):
    for router in lab.routers.values():
        assert set(router.evpn_peers().values()) == {"Established"}, router.name
        assert sorted(router.evpn_peers()) == lab.ports(router.name)


@pytest.mark.parametrize("leaf", ROCE_LEAVES)
def test_each_l2vni_imports_and_exports_only_its_own_route_target(lab, leaf):
    vnis = lab.router(leaf).vtysh_json("show bgp l2vpn evpn vni json")

    for segment in SNAPSHOT.segments:
        own = route_target(SNAPSHOT.fabric.rt_asn, segment.l2vni)
        assert vnis[str(segment.l2vni)]["importRTs"] == [own]
        assert vnis[str(segment.l2vni)]["exportRTs"] == [own]
        assert vnis[str(segment.l2vni)]["inKernel"] == "True"


def test_a_tenants_l2_routes_reach_only_its_own_vni_on_the_other_leaf(lab):
    leaf01, leaf02 = lab.router("leaf01"), lab.router("leaf02")
    remote = str(leaf02.switch.vtep)
    vnis = [segment.l2vni for segment in SNAPSHOT.segments]

    def all_arrived() -> bool:
        return all(remote_imet(leaf01, vni, remote) for vni in vnis)

    wait_until(all_arrived, timeout=LAB_TIMEOUT, what=f"leaf02's IMET routes in VNIs {vnis}")

    for segment in SNAPSHOT.segments:
        routes = l2vni_routes(leaf01, segment.l2vni)
        # leaf02 sends one IMET route per L2VNI, all with the same prefix: each VNI of leaf01
        # holds exactly the one carrying its RT, and no other tenant's.
        own = route_target(SNAPSHOT.fabric.rt_asn, segment.l2vni)
        assert routes[f"[3]:[0]:[32]:[{remote}]"] == [own]
        assert {rt for rts in routes.values() for rt in rts} == {own}
        vni = leaf01.vtysh_json(f"show evpn vni {segment.l2vni} json")
        assert vni["numRemoteVteps"] == [remote]


@pytest.mark.parametrize("leaf", ROCE_LEAVES)
def test_grants_are_the_route_target_imports_of_the_running_vrf_instances(lab, leaf):
    running = parse_frr_conf(lab.router(leaf).running_config())

    for segment in SNAPSHOT.segments:
        instance = running.instance(segment.vrf)
        assert instance is not None, segment.vrf
        own = route_target(SNAPSHOT.fabric.rt_asn, segment.l3vni)
        assert set(instance.rt_imports) == {own, *segment.imports}
        assert instance.rt_exports == (own,)
    acme, storage = running.instance("Vrf50001"), running.instance("Vrf50000")
    assert acme is not None and "65000:50000" in acme.rt_imports  # the grant acme -> storage
    assert storage is not None and "65000:50001" in storage.rt_imports


@pytest.mark.parametrize("leaf", ROCE_LEAVES)
def test_the_deployed_file_round_trips(lab, leaf):
    router = lab.router(leaf)
    conf = router.workdir / "intended" / "frr.conf"

    assert_round_trip(router, conf)


def assert_round_trip(router: Router, conf: Path, state: str = "deployed") -> None:
    test = router.frr_reload(conf, test=True)
    assert test.returncode == 0, test.stderr
    assert test.stdout.strip() == "", f"{state}: frr-reload --test shows a delta:\n{test.stdout}"
    assert running_differences(conf.read_text(), router.running_config()) == [], state


def owned_by(snapshot: RoceSnapshot, *hosts: str) -> RoceSnapshot:
    """`snapshot` where only `hosts` keep their owners: the others' tenants leave the leaves."""
    nodes = tuple(
        n if n.name in hosts else dataclasses.replace(n, owners=()) for n in snapshot.nodes
    )
    return dataclasses.replace(snapshot, nodes=nodes)


REVOKED = roce_snapshot(grants=())
# From the module's state, each kind of change once: VRFs removed and the grant revoked; a VRF
# added with a new grant on an existing VRF (the case that needs `with_new_vrfs` first); a VRF
# added with the grant revoked; the grant re-added, back to the module's state.
SEQUENCE: tuple[tuple[str, RoceSnapshot], ...] = (
    ("storage only", owned_by(REVOKED, "stor01")),
    ("acme and storage, granted", owned_by(SNAPSHOT, "stor01", "gpu0001")),
    ("all, grant revoked", REVOKED),
    ("all, granted", SNAPSHOT),
)


def test_every_change_of_a_leaf_round_trips(lab):
    leaf01 = lab.router("leaf01")
    current = render_frr_conf(SNAPSHOT, "leaf01")
    for index, (name, snapshot) in enumerate(SEQUENCE):
        target = render_frr_conf(snapshot, "leaf01")
        step = with_new_vrfs(current, target)
        if step != current:
            leaf01.load(step, f"{index}-new-vrfs.conf")
        conf = leaf01.load(target, f"{index}.conf")

        assert_round_trip(leaf01, conf, name)
        current = target
    assert set(leaf01.evpn_peers().values()) == {"Established"}


def test_without_the_new_vrfs_step_a_vrf_added_with_a_grant_loses_its_l3vni(lab):
    # Why `with_new_vrfs` exists: frr-reload.py sends the grant's RT import into the existing
    # storage VRF first, without `exit`, so the new `vrf Vrf50001` is read in the BGP node.
    leaf01 = lab.router("leaf01")
    before = render_frr_conf(owned_by(REVOKED, "stor01"), "leaf01")
    target = render_frr_conf(owned_by(SNAPSHOT, "stor01", "gpu0001"), "leaf01")
    leaf01.load(before, "one-step-before.conf")
    one_step = leaf01.workdir / "intended" / "one-step.conf"
    one_step.write_text(target)

    failed = leaf01.frr_reload(one_step)
    lost = running_differences(target, leaf01.running_config())

    leaf01.load(before, "one-step-undone.conf")  # back to a clean state, then the module's
    leaf01.load(with_new_vrfs(before, SNAPSHOT_LEAF01), "one-step-new-vrfs.conf")
    assert_round_trip(leaf01, leaf01.load(SNAPSHOT_LEAF01, "one-step-restored.conf"))
    assert failed.returncode != 0
    assert lost == ["vrf Vrf50001", "vrf Vrf50001 > vni 50001"]


def test_the_phase_one_text_removes_exactly_the_revoked_leaks_from_running_frr(lab):
    leaf01 = lab.router("leaf01")
    phase_one = without_imports(SNAPSHOT_LEAF01, render_frr_conf(REVOKED, "leaf01"))

    conf = leaf01.load(phase_one, "phase-one.conf")

    assert_round_trip(leaf01, conf, "phase 1")
    running = parse_frr_conf(leaf01.running_config())
    imports = {vrf: running.instance(vrf) for vrf in ("Vrf50000", "Vrf50001", "Vrf50002")}
    assert {vrf: i.rt_imports if i else None for vrf, i in imports.items()} == {
        "Vrf50000": ("65000:50000",),
        "Vrf50001": ("65000:50001",),
        "Vrf50002": ("65000:50002",),
    }
    assert_round_trip(leaf01, leaf01.load(SNAPSHOT_LEAF01, "phase-two.conf"), "phase 2")


# ------------------------------------------------------------------------- API-built fabric


@pytest.fixture(scope="module")
def api_built(tools: LabTools) -> Iterator[tuple[RoceSnapshot, dict[str, str]]]:
    """The demo fabric onboarded through the API: its snapshot and every leaf's served frr.conf."""
    engine = make_engine("sqlite://")
    try:
        prepare_database(engine)
        settings = Settings(database_url="sqlite://")
        app = create_app(settings, engine=engine, clock=FakeClock())
        with TestClient(app, client=("127.0.0.1", 50000), base_url=LOCAL_URL) as client:
            api_onboard_roce(client)
            files = {}
            for leaf in ROCE_LEAVES:
                served = client.get(f"/v1/fabrics/roce-west/artifacts/frr/{leaf}/frr.conf")
                assert served.status_code == 200, served.text
                files[leaf] = served.text
        with UnitOfWork(engine, settings, FakeClock()).transaction(read_only=True) as tx:
            snapshot = load_roce_snapshot(tx.session, fabric_named(tx.session, "roce-west"))
        yield snapshot, files
    finally:
        engine.dispose()


def test_an_api_built_fabric_round_trips_and_its_sessions_come_up(api_built, tools, tmp_path):
    snapshot, files = api_built
    assert {s.name for s in snapshot.switches} >= {"leaf01", "leaf02", "spine01", "spine02"}
    with RoceLab(snapshot, tmp_path, tools) as api_lab:
        for leaf in api_lab.leaves():
            assert files[leaf.name] == render_frr_conf(snapshot, leaf.name)
            apply_vxlanmgrd(leaf, render_config_db(snapshot, leaf.name))
            assert_round_trip(leaf, leaf.load(files[leaf.name]))
        api_lab.wait_evpn_established()

        for leaf in api_lab.leaves():
            vnis = leaf.vtysh_json("show bgp l2vpn evpn vni json")
            assert vnis["numL2Vnis"] == len(snapshot.segments)
            assert_round_trip(leaf, leaf.workdir / "intended" / "frr.conf")


def test_the_states_start_from_the_owners_they_assume():
    owners = {n.name: n.owners for n in SNAPSHOT.nodes}
    assert [str(o) for o in owners["stor01"]] == ["service:storage"]
    assert [str(o) for o in owners["gpu0001"]] == ["tenant:acme"]
    assert [str(o) for o in owners["gpu0003"]] == ["tenant:globex"]
