"""Conformance: ``isofabric agent sonic``'s cycle on the RoCE lab: real FRR, a real Redis, yanglint.

The demo fabric is onboarded through the API (TestClient); the lab (roce_lab.py) runs its
switches as network namespaces with zebra and bgpd, and one Redis database per leaf holds its
CONFIG_DB. A leaf's CONFIG_DB starts as a switch holds it before isofabric: the rendered
declared keys (ports, QoS, the VTEP) plus a key isofabric does not own (a VLAN outside its
range); FRR starts empty. Each leaf runs the agent (api/agent/sonic.py) with the lab's
frr-reload.py and vtysh wrappers; after each agent cycle the lab plays vxlanmgrd from the
CONFIG_DB read back. Then:

* the first deployment (phase 2) leaves every leaf's CONFIG_DB exactly the target plus the
  foreign key, FRR running the target (read back), EVPN sessions Established, and the CONFIG_DB
  valid against sonic-yang-models (yanglint);
* a revoked grant is published in phase 1 (the route-target imports removed on the affected
  leaves, nothing else) before phase 2, and an offboarding likewise (its ports leave the VLAN
  first, the VRF goes in phase 2); after each, the same checks hold;
* ``--gcu``, through a stand-in ``config``/``show`` acting on the lab's Redis (no SONiC here),
  takes the same leaf through phase 1 and 2 with a checkpoint, dry run, apply and save each;
* a leaf whose Redis user may not write reports ``failed`` with its CONFIG_DB unchanged, while
  the other leaf applies the change and `sync` shows only the failed one behind.

Skips without root, FRR, iproute2, redis-server or yanglint unless
``ISOFABRIC_REQUIRE_CONFORMANCE=1``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.agent.client import ServerError
from api.agent.config_db import ConfigDb, RedisConfigDb, flatten, touched, unflatten
from api.agent.frr import FrrLeaf, FrrTools
from api.agent.gcu import GcuConfigDb
from api.agent.sonic import SonicAgent, SonicSettings
from api.app import create_app
from policies.evidence.audit_log import load_public_key
from policies.roce.frr_running import running_differences
from policies.roce.ownership import LeafOwnership
from policies.roce.patch import owned_entries
from tenancy.bootstrap import prepare_database
from tenancy.db import make_engine
from tenancy.lookups import fabric_named
from tenancy.settings import Settings
from tenancy.snapshot.roce import load_roce_snapshot
from tenancy.uow import UnitOfWork
from tests.agent.gcu_standin import calls, install_standin
from tests.builders import LOCAL_URL, ROCE_LEAVES, FakeClock, RoceOnboarded, api_onboard_roce
from tests.keys import key_settings, register_key

from .conftest import skip_or_fail
from .harness import ToolsMissingError
from .roce_lab import LabTools, RedisServer, RoceLab, Router, apply_vxlanmgrd
from .sonic_yang import models_dir, validate_config_db, yanglint_path

pytestmark = pytest.mark.conformance

FABRIC = "roce-west"
ROUTES = f"/v1/fabrics/{FABRIC}"
READER, READER_PASSWORD = "reader", "reader-secret"


@pytest.fixture(scope="module")
def tools() -> LabTools:
    try:
        found = LabTools.locate()
    except ToolsMissingError as exc:
        skip_or_fail(str(exc))
    if yanglint_path() is None or not (models_dir() / "sonic-vlan.yang").is_file():
        skip_or_fail("yanglint or sonic-yang-models missing")
    return found


@dataclass
class Service:
    client: TestClient
    onboarded: RoceOnboarded
    engine: Any
    settings: Settings

    def snapshot(self) -> Any:
        with UnitOfWork(self.engine, self.settings, FakeClock()).transaction(read_only=True) as tx:
            return load_roce_snapshot(tx.session, fabric_named(tx.session, FABRIC))

    def get(self, path: str) -> Any:
        response = self.client.get(f"{ROUTES}/{path}")
        if response.status_code >= 400:
            raise ServerError(f"{response.status_code} {response.text}", response.status_code)
        return response

    def sync(self) -> dict[str, Any]:
        document: dict[str, Any] = self.get("sync").json()
        return document

    def keys(self) -> tuple[Any, ...]:
        """The service's public keys (GET /v1/keys), as an operator pins them."""
        listed = self.client.get("/v1/keys").json()["keys"]
        return tuple(load_public_key(key["pem"]) for key in listed)


@pytest.fixture(scope="module")
def service(tools: LabTools) -> Iterator[Service]:
    engine = make_engine("sqlite://")
    try:
        prepare_database(engine)
        register_key(engine)
        settings = key_settings(Settings(database_url="sqlite://"))  # the session's keys
        app = create_app(settings, engine=engine, clock=FakeClock())
        with TestClient(app, client=("127.0.0.1", 50000), base_url=LOCAL_URL) as client:
            onboarded = api_onboard_roce(client)
            for leaf in ROCE_LEAVES:
                response = client.put(f"{ROUTES}/targets/{leaf}", json={"kind": "sonic"})
                assert response.status_code == 201, response.text
            yield Service(client, onboarded, engine, app.state.uow.settings)
    finally:
        engine.dispose()


@dataclass(frozen=True)
class LeafServer:
    """The service's routes for one leaf agent (api.agent.sonic.SonicServer)."""

    service: Service
    leaf: str

    def signed_manifest(self) -> dict[str, Any]:
        document: dict[str, Any] = self.service.get("signed-manifest").json()
        return document

    def sync(self) -> dict[str, Any]:
        return self.service.sync()

    def artifact(self, digest: str, path: str) -> bytes:
        return bytes(self.service.get(f"snapshots/{digest}/artifacts/{path}").content)

    def post_report(self, report: dict[str, Any]) -> dict[str, Any]:
        url = f"{ROUTES}/targets/{self.leaf}/reports"
        response = self.service.client.post(url, json=report)
        assert response.status_code in (200, 201), response.text
        document: dict[str, Any] = response.json()
        return document


@dataclass
class Leaf:
    router: Router
    store: RedisConfigDb
    frr: FrrLeaf
    agent: SonicAgent
    foreign: ConfigDb

    def cycle(self) -> str:
        result = self.agent.cycle()
        apply_vxlanmgrd(self.router, self.store.read())  # what vxlanmgrd does on the switch
        return f"{result.outcome}: {result.detail}"


@dataclass
class Lab:
    service: Service
    lab: RoceLab
    redis: RedisServer
    leaves: dict[str, Leaf]
    steps: list[str] = field(default_factory=list)  # what the tests changed, in order


def rendered(service: Service, leaf: str) -> tuple[ConfigDb, LeafOwnership, str]:
    config_db = service.get(f"artifacts/sonic/{leaf}/config_db.json").json()
    ownership = LeafOwnership.from_json(service.get(f"artifacts/sonic/{leaf}/ownership.json").text)
    return (
        unflatten(flatten(config_db)),
        ownership,
        service.get(f"artifacts/frr/{leaf}/frr.conf").text,
    )


def switch_before_isofabric(service: Service, leaf: str) -> tuple[ConfigDb, ConfigDb]:
    """The declared keys of the rendered config plus a foreign VLAN; and that foreign part."""
    target, ownership, _ = rendered(service, leaf)
    owned = owned_entries(target, ownership)
    running = {
        table: {k: v for k, v in entries.items() if k not in owned.get(table, {})}
        for table, entries in target.items()
    }
    vlan = ownership.vlan_range[1] + 1  # outside isofabric's pool: someone else's VLAN
    foreign = {"VLAN": {f"Vlan{vlan}": {"vlanid": str(vlan)}}}
    running.setdefault("VLAN", {}).update(foreign["VLAN"])
    return {t: e for t, e in running.items() if e}, foreign


@pytest.fixture(scope="module")
def lab(
    service: Service, tools: LabTools, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Lab]:
    work = tmp_path_factory.mktemp("sonic-agent")
    with (
        RoceLab(service.snapshot(), work / "lab", tools) as started,
        RedisServer(work / "redis", tools.redis_server) as redis_server,
    ):
        redis_server.add_user(
            READER, READER_PASSWORD, ["~*", "+@read", "+@transaction", "+@connection"]
        )
        leaves = {}
        for db, name in enumerate(ROCE_LEAVES, start=4):
            router = started.router(name)
            store = RedisConfigDb.from_url(redis_server.url(db))
            running, foreign = switch_before_isofabric(service, name)
            store.write(*touched({}, running))
            tools_ = FrrTools(str(router.frr_reload_path), str(router.vtysh_path))
            frr = FrrLeaf(work / name / "frr.conf", tools_)
            (work / name).mkdir()
            settings = SonicSettings(FABRIC, name, service.keys(), work / name)
            agent = SonicAgent(settings, LeafServer(service, name), store, frr)
            leaves[name] = Leaf(router, store, frr, agent, foreign)
        yield Lab(service, started, redis_server, leaves)


def assert_holds_target(lab: Lab, leaf: Leaf) -> None:
    target, _, frr_conf = rendered(lab.service, leaf.router.name)
    running = leaf.store.read()
    expected = {t: dict(e) for t, e in target.items()}
    for table, entries in leaf.foreign.items():
        expected.setdefault(table, {}).update(entries)
    assert running == expected, leaf.router.name
    assert running_differences(frr_conf, leaf.router.running_config()) == []
    valid, messages = validate_config_db(running)
    assert valid, messages


def run_phases(lab: Lab, expect_phase_1: bool) -> None:
    """Every leaf's agent until `sync` is in sync: phase 1 first when the change removes access."""
    status = lab.service.sync()
    assert status["phase"] == (1 if expect_phase_1 else 2), status
    if expect_phase_1:
        for leaf in lab.leaves.values():
            assert leaf.cycle().startswith("applied"), leaf.router.name
        assert lab.service.sync()["phase"] == 2
    for leaf in lab.leaves.values():
        outcome = leaf.cycle()
        assert outcome.startswith("applied"), outcome
        assert_holds_target(lab, leaf)
    status = lab.service.sync()
    assert status["in_sync"] is True and status["behind"] == [], status


def deployed(lab: Lab) -> None:
    """The first deployment (once per module: the tests share the lab)."""
    if "deployed" not in lab.steps:
        run_phases(lab, expect_phase_1=False)
        lab.lab.wait_evpn_established()
        lab.steps.append("deployed")


def offboarded_globex(lab: Lab) -> None:
    """globex released and deployed in phases (once per module): frees two nodes."""
    deployed(lab)
    if "globex" not in lab.steps:
        allocation = lab.service.onboarded.allocation_ids["globex"]
        response = lab.service.client.delete(f"/v1/tenants/globex/allocations/{allocation}")
        assert response.status_code == 204, response.text
        run_phases(lab, expect_phase_1=True)
        lab.lab.wait_evpn_established()
        lab.steps.append("globex")


def test_deploy_revoke_and_offboard_in_phases(lab: Lab) -> None:
    deployed(lab)
    grant = lab.service.onboarded.grant_ids["acme"]
    response = lab.service.client.delete(f"/v1/tenants/acme/grants/{grant}")
    assert response.status_code == 204, response.text
    run_phases(lab, expect_phase_1=True)
    offboarded_globex(lab)


def test_a_leaf_without_write_rights_fails_unchanged_and_stays_behind(lab: Lab) -> None:
    offboarded_globex(lab)  # two free nodes
    leaf01, leaf02 = (lab.leaves[name] for name in ROCE_LEAVES)
    grown = lab.service.client.post(
        "/v1/tenants/acme/allocations", json={"fabric": FABRIC, "count": 1}
    )
    assert grown.status_code == 201, grown.text  # an onboarding: phase 2 only
    assert lab.service.sync()["phase"] == 2
    before = leaf01.store.read()
    reader_url = lab.redis.url(4, user=READER, password=READER_PASSWORD)
    leaf01.agent.store = RedisConfigDb.from_url(reader_url)
    try:
        outcome = leaf01.cycle()
    finally:
        leaf01.agent.store = leaf01.store  # the other tests' leaf01 may write again
    assert outcome.startswith("failed") and "NoPermissionError" in outcome, outcome
    assert leaf01.store.read() == before
    assert leaf02.cycle().startswith("applied")
    assert_holds_target(lab, leaf02)
    status = lab.service.sync()
    assert status["behind"] == [leaf01.router.name], status


def test_gcu_mode_through_a_standin_config_command(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--gcu`` cannot run here (no SONiC): leaf02 goes through tests/agent/gcu_standin.py, a
    STAND-IN for ``config``/``show`` that records its calls and applies the patch to the lab's
    Redis; the checkpoint, dry run, apply, save and checkpoint deletion happen in that order."""
    offboarded_globex(lab)
    leaf02 = lab.leaves["leaf02"]
    env = install_standin(tmp_path / "bin", tmp_path / "gcu", lab.redis.url(5))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    response = lab.service.client.delete(
        f"/v1/tenants/research/allocations/{lab.service.onboarded.allocation_ids['research']}"
    )
    assert response.status_code == 204, response.text
    leaf02.agent.store = GcuConfigDb()
    try:
        run_phases(lab, expect_phase_1=True)
    finally:
        leaf02.agent.store = leaf02.store
    done = [call[1] for call in calls(tmp_path / "gcu") if call[0] == "config"]
    assert done[:3] == ["checkpoint", "apply-patch", "apply-patch"], done
    assert done[-2:] == ["save", "delete-checkpoint"] and "rollback" not in done
