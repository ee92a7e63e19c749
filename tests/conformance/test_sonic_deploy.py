"""``isofabric agent sonic`` per leaf against a live service, real Redis and real FRR (issue 16).

The module builds roce-west through the API (its storage service first: the "first rendered"
state), and runs its topology as the RoCE lab (roce_lab.py: leaf01, leaf02, spine01, spine02 as
network namespaces with zebra and bgpd, veth links named as SONiC ports). Each leaf is a
``sonic`` target with its own agent token, and its CONFIG_DB a database of the module's own
``redis-server`` (a Unix socket), seeded with the first rendered config_db.json plus keys and
fields isofabric does not own. The agent runs as a subprocess (``isofabric-agent sonic
--once``, the lab's vtysh/frr-reload wrappers, the leaf's pathspace). Tests run in file order,
each from the state the previous one left:

onboarding, a grant, its revocation (phase 1 on every affected leaf before phase 2), an
offboarding (ports leave the VLAN in phase 1, the VRF goes in phase 2), ``--gcu`` against a
STAND-IN ``config``/``show`` (tests/agent/gcu_standin.py), then the faults: a disruptive drift,
a FRR read-back mismatch, a Redis user without write rights, a leaf that is down.

After each deployment a leaf's CONFIG_DB is the signed target (owned keys exactly, declared keys
as rendered) with the foreign keys and fields untouched, and it validates with yanglint; the
lab's VXLAN devices are made from that CONFIG_DB (`apply_vxlanmgrd`), and what FRR does with it
is read with ``vtysh … json``. Skips without root, FRR, redis-server or yanglint unless
``ISOFABRIC_REQUIRE_CONFORMANCE=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx2
import jsonpatch
import pytest
from fastapi.testclient import TestClient

from agent.sonic_state import SONIC_STATE_FILE
from api.app import create_app
from policies.roce.frr_running import running_differences
from policies.roce.model import route_target
from policies.roce.parse_frr import parse_frr_conf
from policies.roce.patch import owned_entries
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tests.agent.gcu_standin import calls, install_standin
from tests.builders import ROCE_FABRIC, ROCE_LEAVES, SERVICE
from tests.docs.examples import host_argv, in_lab
from tests.keys import key_settings, register_key
from tests.live_server import live_server

from .conftest import skip_or_fail
from .harness import AGENT_SCRIPT, ToolsMissingError, wait_until
from .roce_lab import LAB_TIMEOUT, LabTools, RedisServer, RoceLab
from .sonic_deploy_lab import (
    ADMIN,
    EXTRA_FIELDS,
    FABRIC,
    FOREIGN,
    DeployLab,
    LeafNode,
    first_state,
    install_dropping_reload,
    l2vni_route_targets,
    load_snapshot,
    register,
    seed_config_db,
    with_foreign,
)
from .sonic_yang import missing_models, models_dir, validate_config_db, yanglint_path
from .test_opensm_end_to_end import Api

pytestmark = pytest.mark.conformance


@pytest.fixture(scope="module")
def deploy_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeployLab]:
    try:
        tools = LabTools.locate()
    except ToolsMissingError as exc:
        skip_or_fail(str(exc))
    if yanglint_path() is None:
        skip_or_fail("yanglint is not installed")
    if (reason := missing_models(models_dir())) is not None:
        skip_or_fail(reason)
    root = tmp_path_factory.mktemp("sonic-deploy")
    url = f"sqlite:///{root / 'isofabric.db'}"
    engine = make_engine(url)
    settings = key_settings(Settings(database_url=url, admin_token="admin-secret"))
    app = create_app(settings, engine=engine)
    register_key(engine)
    try:
        with (
            live_server(app) as base,
            httpx2.Client(base_url=base, headers=ADMIN, timeout=60) as http,
            RedisServer(root / "redis", tools.redis_server) as redis_server,
        ):
            api = Api(cast(TestClient, http))
            first_state(api)
            assert settings.keyring_path is not None
            with RoceLab(load_snapshot(engine, settings), root / "lab", tools) as lab:
                leaves = {
                    name: LeafNode(name, lab.router(name), db, redis_server.url(db), root / name)
                    for db, name in enumerate(ROCE_LEAVES, start=4)
                }
                deployed = DeployLab(
                    base, api, settings.keyring_path, engine, settings, lab, redis_server, leaves
                )
                for leaf in leaves.values():
                    register(deployed, leaf)
                yield deployed
    finally:
        engine.dispose()


# ------------------------------------------------------------------------------ assertions


def assert_holds_target(lab: DeployLab, leaf: str) -> dict[str, Any]:
    """The leaf's CONFIG_DB: owned keys exactly the target's, the rest untouched, YANG-valid."""
    target, ownership = lab.signed(leaf)
    running = lab.leaves[leaf].read()
    assert owned_entries(running, ownership) == owned_entries(target, ownership), leaf
    assert running == with_foreign(target), leaf  # declared as rendered, foreign untouched
    for table, entries in {**FOREIGN, **EXTRA_FIELDS}.items():
        for key, fields in entries.items():
            assert fields.items() <= running[table][key].items(), (leaf, table, key)
    assert lab.leaves[leaf].client.get("CONFIG_DB_INITIALIZED") == "1"
    valid, message = validate_config_db(running)
    assert valid, f"{leaf}: yanglint: {message}"
    return running


def assert_in_sync(lab: DeployLab) -> None:
    status = lab.sync()
    assert status["in_sync"] is True and status["behind"] == [], status
    for leaf in lab.leaves:
        view = lab.target_view(leaf)
        assert view["state"] == "applied" and view["observed_digest"] == status["desired"], view


def converge(lab: DeployLab) -> None:
    """Every leaf's agent once (a change without phase 1); each then holds the target."""
    assert lab.sync()["phase"] == 2
    lab.deploy_all()
    for leaf in lab.leaves:
        assert_holds_target(lab, leaf)
    assert_in_sync(lab)
    lab.vxlanmgrd()


def running_imports(lab: DeployLab, leaf: str) -> dict[str, set[str]]:
    """VRF -> its route-target imports in the leaf's running FRR config."""
    running = parse_frr_conf(lab.leaves[leaf].router.running_config())
    return {bgp.vrf: set(bgp.rt_imports) for bgp in running.bgp if bgp.vrf}


def assert_evpn(lab: DeployLab) -> None:
    """Sessions up; every L2VNI's RTs are the model's; a VNI holds only its own RT's routes."""
    snapshot = lab.snapshot()
    lab.lab.wait_evpn_established()
    rt_asn = snapshot.fabric.rt_asn
    for leaf in lab.leaves.values():
        vnis = leaf.router.vtysh_json("show bgp l2vpn evpn vni json")
        for segment in snapshot.segments:
            own = route_target(rt_asn, segment.l2vni)
            assert vnis[str(segment.l2vni)]["importRTs"] == [own], (leaf.name, segment.l2vni)
            assert vnis[str(segment.l2vni)]["exportRTs"] == [own], (leaf.name, segment.l2vni)
    leaf01, leaf02 = (lab.leaves[name].router for name in ROCE_LEAVES)
    imet = f"[3]:[0]:[32]:[{leaf02.switch.vtep}]"
    for segment in snapshot.segments:

        def arrived(vni: int = segment.l2vni) -> bool:
            return imet in l2vni_route_targets(leaf01, vni)

        wait_until(arrived, timeout=LAB_TIMEOUT, what=f"leaf02's IMET in VNI {segment.l2vni}")
        routes = l2vni_route_targets(leaf01, segment.l2vni)
        own = route_target(rt_asn, segment.l2vni)
        assert {rt for rts in routes.values() for rt in rts} == {own}, (segment.l2vni, routes)


def segment(lab: DeployLab, owner: str) -> Any:
    return next(s for s in lab.snapshot().segments if str(s.owner) == owner)


def l3_rt(lab: DeployLab, owner: str) -> str:
    return route_target(lab.snapshot().fabric.rt_asn, segment(lab, owner).l3vni)


def assert_frr_runs_installed(lab: DeployLab, leaf: str) -> None:
    """The running config is the file the agent installed (the read-back, done again here)."""
    node = lab.leaves[leaf]
    differences = running_differences(node.frr_conf.read_text(), node.router.running_config())
    assert differences == [], (leaf, differences)


def onboard(lab: DeployLab, tenant: str, qos_class: str, kind: str = "external") -> None:
    if lab.api.client.get(f"/v1/tenants/{tenant}").status_code == 404:
        tenant_body = {"name": tenant, "kind": kind, "qos_class": qos_class}
        lab.api.call("POST", "/v1/tenants", json=tenant_body)
    body = {"fabric": ROCE_FABRIC, "count": 2}
    lab.ids[tenant] = lab.api.call("POST", f"/v1/tenants/{tenant}/allocations", json=body)["id"]


def assert_service_patch(lab: DeployLab, leaf: str, previous: dict[str, Any]) -> None:
    """GET …/patches/{leaf} (from the deployed snapshot) turns `previous` into the target; the
    leaf's agent token may read it, not another leaf's."""
    desired = lab.sync()["desired"]
    with lab.as_agent(leaf) as agent:
        response = agent.get(f"{FABRIC}/snapshots/{desired}/patches/{leaf}")
        others = [n for n in lab.leaves if n != leaf]
        foreign = agent.get(f"{FABRIC}/snapshots/{desired}/patches/{others[0]}")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json-patch+json")
    assert jsonpatch.apply_patch(previous, response.json()) == lab.raw_config_db(leaf)
    assert foreign.status_code == 403, foreign.text


def affected(lab: DeployLab) -> set[str]:
    return {t["name"] for t in lab.sync()["targets"] if t["affected"]}


# ----------------------------------------------------------------------------- lifecycle


def test_first_deployment_keeps_foreign_keys_and_brings_evpn_up(deploy_lab: DeployLab) -> None:
    lab = deploy_lab
    converge(lab)
    for leaf, node in lab.leaves.items():
        signed = lab.api.call("GET", f"{FABRIC}/artifacts/frr/{leaf}/frr.conf")
        assert node.frr_conf.read_text() == signed
        assert_frr_runs_installed(lab, leaf)
    assert_evpn(lab)


def test_onboarding_patches_only_owned_keys_and_isolates_the_tenants_l2vnis(
    deploy_lab: DeployLab,
) -> None:
    lab = deploy_lab
    before = {leaf: lab.raw_config_db(leaf) for leaf in lab.leaves}
    onboard(lab, "acme", "gold")
    onboard(lab, "globex", "bronze")
    for leaf in lab.leaves:  # the service's review patch, read with the leaf's own token
        assert_service_patch(lab, leaf, before[leaf])

    converge(lab)

    snapshot = lab.snapshot()
    vrfs = {s.vrf for s in snapshot.segments}
    for leaf, node in lab.leaves.items():
        assert set(node.read()["VRF"]) == vrfs
        raw = node.dump()  # ConfigDBConnector's layout, as the agent wrote it
        acme = segment(lab, "tenant:acme")
        assert raw[f"VLAN_INTERFACE|Vlan{acme.vlan}|{acme.subnet[1]}/{acme.subnet.prefixlen}"] == {
            "NULL": "NULL"
        }
        assert raw[f"VRF|{acme.vrf}"] == {"vni": str(acme.l3vni)}
        assert raw["VLAN|Vlan10"]["dhcp_servers@"] == "10.255.0.5"  # a foreign list field
        devices = node.router.ip("-j", "-d", "link", "show", "type", "vxlan").stdout
        vnis = sorted(d["linkinfo"]["info_data"]["id"] for d in json.loads(devices))
        assert vnis == sorted(s.l2vni for s in snapshot.segments), leaf
        assert_frr_runs_installed(lab, leaf)
    assert_evpn(lab)


def test_a_grant_becomes_route_target_imports_of_both_vrfs(deploy_lab: DeployLab) -> None:
    lab = deploy_lab
    body = {"fabric": ROCE_FABRIC, "service": SERVICE}
    lab.ids["grant"] = lab.api.call("POST", "/v1/tenants/acme/grants", json=body)["id"]

    converge(lab)

    acme, storage, globex = (
        segment(lab, o) for o in ("tenant:acme", "service:storage", "tenant:globex")
    )
    for leaf in lab.leaves:
        imports = running_imports(lab, leaf)
        assert imports[acme.vrf] == {l3_rt(lab, "tenant:acme"), l3_rt(lab, "service:storage")}
        assert l3_rt(lab, "tenant:acme") in imports[storage.vrf]
        assert imports[globex.vrf] == {l3_rt(lab, "tenant:globex")}  # nothing leaks to globex


def test_a_revocation_removes_imports_on_every_affected_leaf_before_phase_two(
    deploy_lab: DeployLab,
) -> None:
    lab = deploy_lab
    acme_vrf, storage_rt = segment(lab, "tenant:acme").vrf, l3_rt(lab, "service:storage")
    lab.api.call("DELETE", f"/v1/tenants/acme/grants/{lab.ids['grant']}")
    status = lab.sync()
    assert status["phase"] == 1 and sorted(status["behind"]) == sorted(ROCE_LEAVES), status
    assert affected(lab) == set(ROCE_LEAVES)
    first, second = ROCE_LEAVES

    lab.deploy(first)
    assert storage_rt not in running_imports(lab, first)[acme_vrf]
    assert storage_rt in running_imports(lab, second)[acme_vrf]  # not run yet
    assert_frr_runs_installed(lab, first)
    assert (lab.progress(first)["phase"], lab.progress(first)["behind"]) == (1, True)
    assert lab.sync()["phase"] == 1  # the second leaf has not removed its import yet
    lab.deploy(first)  # again: still phase 1, nothing more happens on the first leaf
    assert lab.progress(first)["phase"] == 1
    lab.deploy(second)
    assert storage_rt not in running_imports(lab, second)[acme_vrf]
    assert lab.sync()["phase"] == 2

    lab.deploy_all()
    for leaf in lab.leaves:
        assert lab.progress(leaf)["phase"] == 2
        assert_holds_target(lab, leaf)
        assert running_imports(lab, leaf)[acme_vrf] == {l3_rt(lab, "tenant:acme")}
        assert_frr_runs_installed(lab, leaf)
    assert_in_sync(lab)


def test_an_offboarding_removes_ports_from_the_vlan_before_the_vrf_goes(
    deploy_lab: DeployLab,
) -> None:
    lab = deploy_lab
    globex = segment(lab, "tenant:globex")
    members = f"Vlan{globex.vlan}|"
    for node in lab.leaves.values():
        assert any(k.startswith(members) for k in node.read()["VLAN_MEMBER"])
    lab.api.call("DELETE", f"/v1/tenants/globex/allocations/{lab.ids['globex']}")
    assert lab.sync()["phase"] == 1 and affected(lab) == set(ROCE_LEAVES)

    for index, (leaf, node) in enumerate(lab.leaves.items()):
        lab.deploy(leaf)
        running = node.read()
        assert not any(k.startswith(members) for k in running.get("VLAN_MEMBER", {})), leaf
        assert globex.vrf in running["VRF"] and f"Vlan{globex.vlan}" in running["VLAN"]
        assert globex.vrf in running_imports(lab, leaf)  # its BGP instance is still there
        assert lab.sync()["phase"] == (1 if index < len(lab.leaves) - 1 else 2)

    lab.deploy_all()
    for leaf in lab.leaves:
        running = assert_holds_target(lab, leaf)
        assert globex.vrf not in running["VRF"] and globex.vrf not in running_imports(lab, leaf)
    assert_in_sync(lab)
    lab.vxlanmgrd()
    for node in lab.leaves.values():
        assert f"vtep-{globex.vlan}" not in node.router.ip("link", "show").stdout
    nodes = lab.api.call("GET", f"{FABRIC}/nodes", params={"limit": 500})["data"]
    assert not [n["name"] for n in nodes if n["state"] == "draining"]  # every leaf read back
    assert_evpn(lab)


def test_gcu_mode_checkpoints_dry_runs_applies_and_saves_through_a_standin(
    deploy_lab: DeployLab, tmp_path: Path
) -> None:
    # The `config`/`show` here are a STAND-IN (tests/agent/gcu_standin.py): no SONiC on this
    # machine. It records its calls and applies the patch to the leaf's CONFIG_DB in Redis.
    lab = deploy_lab
    onboard(lab, "research", "silver", kind="internal")
    leaf = ROCE_LEAVES[0]
    standin = install_standin(tmp_path / "bin", tmp_path / "gcu", lab.leaves[leaf].config_db_url)

    lab.deploy(leaf, "--gcu", **standin)
    lab.deploy(ROCE_LEAVES[1])

    config = [call[1:] for call in calls(tmp_path / "gcu") if call[0] == "config"]
    assert [c[0] for c in config] == [
        "checkpoint",
        "apply-patch",
        "apply-patch",
        "save",
        "delete-checkpoint",
    ]
    assert config[1][1] == "--dry-run" and config[2][1] != "--dry-run"
    assert config[3] == ["save", "-y"] and config[0][1] == config[4][1]
    assert ["show", "runningconfiguration", "all"] in calls(tmp_path / "gcu")
    for name in ROCE_LEAVES:
        assert_holds_target(lab, name)
        assert_frr_runs_installed(lab, name)
    assert_in_sync(lab)
    lab.vxlanmgrd()
    assert_evpn(lab)


# ---------------------------------------------------------------------------------- faults


def agent_said(done: subprocess.CompletedProcess[str], state: str) -> str:
    """The agent's exit 1 and its report line (``<state>: <digest>: <detail>``)."""
    assert done.returncode == 1, done.stderr
    line = next((ln for ln in done.stderr.splitlines() if f": {state}: " in ln), None)
    assert line is not None, done.stderr
    return line


def test_a_disruptive_drift_is_refused_and_nothing_changes(deploy_lab: DeployLab) -> None:
    lab = deploy_lab
    onboard(lab, "globex", "bronze")  # a routine change, for a leaf whose port MTU drifted
    leaf = lab.leaves[ROCE_LEAVES[0]]
    leaf.client.hset("PORT|Ethernet0", "mtu", "1500")
    before, frr_before = leaf.dump(), leaf.frr_conf.read_text()

    line = agent_said(lab.agent(leaf.name), "refused")

    assert "/PORT/Ethernet0/mtu" in line and "disruptive" in line
    view = lab.target_view(leaf.name)
    assert view["state"] == "refused" and "/PORT/Ethernet0/mtu" in view["detail"]
    assert leaf.dump() == before and leaf.frr_conf.read_text() == frr_before
    assert_frr_runs_installed(lab, leaf.name)
    assert lab.progress(leaf.name)["behind"] is True


def test_a_frr_read_back_mismatch_rolls_the_leaf_back_as_a_whole(deploy_lab: DeployLab) -> None:
    # A STAND-IN frr-reload (wrapping the lab's real one) drops the new VRF's `vni` line:
    # the way frr-reload.py 8.4 lost new VRFs' VNIs (issue 16). The read-back must catch it.
    lab = deploy_lab
    leaf = lab.leaves[ROCE_LEAVES[0]]
    l3vni = segment(lab, "tenant:globex").l3vni  # globex's VRF is new to the leaf
    reload, armed = install_dropping_reload(leaf, rf"^ vni {l3vni}$")
    armed.write_text("1\n")
    before, frr_before = leaf.dump(), leaf.frr_conf.read_text()
    assert before["PORT|Ethernet0"]["mtu"] == "1500"  # the drift of the previous test
    held = lab.target_view(leaf.name)["deployed"]  # the snapshot it last applied
    assert held is not None and held != lab.sync()["desired"]

    allowed = ("--allow-disruptive", f"--frr-reload={reload}")
    line = agent_said(lab.agent(leaf.name, *allowed), "rolled_back")
    armed.unlink()

    assert f"vni {l3vni}" in line
    view = lab.target_view(leaf.name)
    assert view["state"] == "rolled_back" and view["observed_digest"] == view["deployed"] == held
    assert leaf.dump() == before  # restored: the new keys gone, the drifted MTU (1500) back
    assert leaf.frr_conf.read_text() == frr_before
    assert_frr_runs_installed(lab, leaf.name)  # the previous file runs again

    lab.deploy(leaf.name, *allowed)  # not armed: the real reload; the flag repairs the MTU

    assert assert_holds_target(lab, leaf.name)["PORT"]["Ethernet0"]["mtu"] == "9000"
    assert_frr_runs_installed(lab, leaf.name)
    assert lab.target_view(leaf.name)["state"] == "applied"


def test_a_leaf_that_is_down_or_cannot_write_stays_behind(deploy_lab: DeployLab) -> None:
    lab = deploy_lab
    up, down = (lab.leaves[name] for name in ROCE_LEAVES)
    assert_holds_target(lab, up.name)
    status = lab.sync()
    assert status["behind"] == [down.name] and status["in_sync"] is False, status
    assert lab.progress(up.name)["behind"] is False and lab.progress(down.name)["behind"] is True

    gone = lab.redis.socket.parent / "gone.sock"
    unreachable = lab.agent(down.name, f"--config-db=unix://{gone}?db={down.db}")
    agent_said(unreachable, "failed")
    assert lab.sync()["behind"] == [down.name]

    lab.redis.add_user("reader", "reader-secret", ["~*", "+@read", "+@connection", "+@transaction"])
    read_only = lab.redis.url(down.db, user="reader", password="reader-secret")
    before, frr_before = down.dump(), down.frr_conf.read_text()
    line = agent_said(lab.agent(down.name, f"--config-db={read_only}"), "failed")
    assert "NOPERM" in line or "permission" in line.lower(), line
    assert down.dump() == before and down.frr_conf.read_text() == frr_before
    assert lab.target_view(down.name)["state"] == "failed"
    assert lab.sync()["behind"] == [down.name]

    lab.deploy(down.name)

    assert_holds_target(lab, down.name)
    assert_in_sync(lab)
    lab.vxlanmgrd()
    assert_evpn(lab)


def test_the_documented_first_deployment_takes_a_factory_leaf_to_its_target(
    deploy_lab: DeployLab,
) -> None:
    """docs/operators/deploy-sonic-frr.md's ``sh {.host #sonic-agent}`` block, in the lab.

    A leaf as it comes up (its own keys and fields, none of the declared ones as rendered, no
    agent state): refused in one line naming the tables without ``--bootstrap``; the page's first
    line applies and reads back the target; its second line (one cycle for the loop) finds
    nothing to do.
    """
    lab = deploy_lab
    leaf = lab.leaves[ROCE_LEAVES[0]]
    seed_config_db(leaf.client, {})
    (leaf.state_dir / SONIC_STATE_FILE).unlink(missing_ok=True)
    first, loop = host_argv("docs/operators/deploy-sonic-frr.md", "sonic-agent")
    options: dict[str, str | tuple[str, ...]] = {
        "program": AGENT_SCRIPT, "--server": lab.url, "--target": leaf.name,
        "--public-key": str(lab.keyring), "--config-db": leaf.config_db_url,
        "--frr-conf": str(leaf.frr_conf),
    }  # fmt: skip
    lab_only = [
        *("--state-dir", str(leaf.state_dir), "--frr-pathspace", leaf.router.namespace),
        *("--vtysh", str(leaf.router.vtysh_path), "--frr-reload", str(leaf.router.frr_reload_path)),
    ]

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ISOFABRIC_TOKEN": leaf.token}
        return subprocess.run(
            [*argv, *lab_only], env=env, capture_output=True, text=True, timeout=120, check=False
        )

    refused = agent_said(run([w for w in in_lab(first, options) if w != "--bootstrap"]), "refused")
    assert "give --bootstrap" in refused and " in tables BUFFER_PG, " in refused
    assert len(refused) < 800  # one line however many keys: tables, three paths, a count
    bootstrapped = run(in_lab(first, options))
    assert bootstrapped.returncode == 0, bootstrapped.stderr
    assert_holds_target(lab, leaf.name)
    assert lab.target_view(leaf.name)["state"] == "applied"
    again = run(in_lab(loop, {**options, "--interval": ("--once",)}))
    assert again.returncode == 0, again.stderr
    assert_holds_target(lab, leaf.name)
