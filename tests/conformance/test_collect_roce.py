"""`isofabric collect roce` against a real Redis holding a leaf's CONFIG_DB (issue 16, item 5).

A `redis-server` of this test's own (a Unix socket in a temporary directory, never the machine's
shared 127.0.0.1:6379) gets leaf01's rendered config_db.json in database 4, written the way
SONiC's ConfigDBConnector writes it (``TABLE|key`` hashes, ``field@`` lists, ``NULL``=``NULL``
for an entry without fields; sonic-swss-common configdb.py ``typed_to_raw``), plus a plain
``CONFIG_DB_INITIALIZED`` key as on a switch. The command reads it back and the demo database
compares it: no drift. Then a globex port is added to acme's VLAN by hand: the drift names the
port, its host and owner, and the cross-tenant violation.

With FRR (real zebra and bgpd in a pathspace, the leaf's rendered frr.conf deployed by the
agent's frr-reload adapter): ``--vtysh``/``--frr-pathspace`` read the running config and bgpd's
``show bgp l2vpn evpn vni json``: no drift; then acme's route target imported into globex's VRF
by hand (vtysh) is a route-target leak and a violation. Skips without root or FRR, unless
ISOFABRIC_REQUIRE_CONFORMANCE=1.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.typing import EncodableT, FieldT
from typer.testing import CliRunner

from agent.frr import FrrLeaf, FrrTools
from cli import app
from tests.demo_db import demo_database
from tests.keys import keys_create

from .conftest import skip_or_fail

# zebra and bgpd in an FRR pathspace (its name), a fixture registered here by its import.
from .test_frr_agent_reload import pathspace as frr_daemons  # noqa: F401

pytestmark = pytest.mark.conformance

FABRIC, LEAF, CONFIG_DB = "roce-west", "leaf01", 4
NULL_ENTRY: dict[FieldT, EncodableT] = {"NULL": "NULL"}
runner = CliRunner()


@pytest.fixture(scope="module")
def redis_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A redis-server on a Unix socket of its own; stopped by its PID."""
    server = shutil.which("redis-server")
    if server is None:
        skip_or_fail("redis-server is not installed")
    directory = tmp_path_factory.mktemp("redis")
    socket = directory / "redis.sock"
    argv = [server, "--port", "0", "--unixsocket", str(socket), "--save", "", "--appendonly", "no"]
    process = subprocess.Popen([*argv, "--dir", str(directory)], stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(unix_socket_path=str(socket))
        deadline = time.monotonic() + 10
        while not _answers(client):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"redis-server did not start (status {process.poll()})")
            time.sleep(0.02)
        yield socket
    finally:
        process.terminate()
        process.wait(timeout=10)


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The demo database and its rendered roce-west bundle."""
    directory = tmp_path_factory.mktemp("demo")
    url = demo_database(directory / "isofabric.db")
    keys_create(url)
    out = directory / "bundle"
    result = runner.invoke(app, ["render", "--fabric", FABRIC, "--out", str(out), "--db", url])
    assert result.exit_code == 0, result.output
    return url, out


def load_config_db(client: redis.Redis, document: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Write `document` as ConfigDBConnector does (``typed_to_raw``), after a flush."""
    client.flushdb()
    pipe = client.pipeline()
    for table, entries in document.items():
        for key, fields in entries.items():
            raw: dict[FieldT, EncodableT] = {
                (f"{name}@" if isinstance(value, list) else name): (
                    ",".join(value) if isinstance(value, list) else str(value)
                )
                for name, value in fields.items()
            }
            pipe.hset(f"{table}|{key}", mapping=raw or NULL_ENTRY)
    pipe.set("CONFIG_DB_INITIALIZED", "1")  # a plain key, not an entry
    pipe.execute()


def collect(socket: Path, db: str, *extra: str) -> Any:
    url = f"unix://{socket}?db={CONFIG_DB}"
    argv = ["collect", "roce", "--fabric", FABRIC, "--leaf", LEAF, "--config-db", url]
    return runner.invoke(app, [*argv, "--db", db, *extra])


def l2_vlan(frr_conf: str, config_db: dict[str, Any], owner: str) -> str:
    """The VLAN of `owner`'s L2VNI on the leaf (frr.conf names each VRF's owner and L2VNI)."""
    match = re.search(rf"! {re.escape(owner)}, L2VNI (\d+),", frr_conf)
    assert match is not None, owner
    maps = config_db["VXLAN_TUNNEL_MAP"].values()
    return str(next(m["vlan"] for m in maps if m["vni"] == match.group(1)))


def test_collected_config_db_shows_no_drift_then_a_foreign_vlan_member(
    redis_socket: Path, demo: tuple[str, Path], tmp_path: Path
) -> None:
    url, bundle = demo
    config_db = json.loads((bundle / "sonic" / LEAF / "config_db.json").read_text())
    frr_conf = (bundle / "frr" / LEAF / "frr.conf").read_text()
    client = redis.Redis(unix_socket_path=str(redis_socket), db=CONFIG_DB, decode_responses=True)
    load_config_db(client, config_db)

    clean = collect(redis_socket, url, "--json", "--out", str(tmp_path / "leaf01.json"))

    assert clean.exit_code == 0, clean.output
    report = json.loads(clean.output)
    assert (report["leaf"], report["in_sync"], report["holds"]) == (LEAF, True, True)
    assert report["drift"] == [] and report["frr_observed"] is False
    document = json.loads((tmp_path / "leaf01.json").read_text())
    assert document["kind"] == "roce" and "CONFIG_DB_INITIALIZED" not in json.dumps(document)
    assert document["vrfs"] == {name: int(f["vni"]) for name, f in config_db["VRF"].items()}

    acme, globex = (
        l2_vlan(frr_conf, config_db, "tenant:acme"),
        l2_vlan(frr_conf, config_db, "tenant:globex"),
    )
    intruder = sorted(k.split("|")[1] for k in config_db["VLAN_MEMBER"] if k.startswith(globex))[0]
    client.hset(f"VLAN_MEMBER|{acme}|{intruder}", mapping={"tagging_mode": "untagged"})

    drifted = collect(redis_socket, url, "--json")

    assert drifted.exit_code == 1, drifted.output
    report = json.loads(drifted.output)
    assert [(d["code"], d["subject"], d["owner"]) for d in report["drift"]] == [
        ("vlan-member-unexpected", intruder, "tenant:globex")
    ]
    assert acme in report["drift"][0]["observed"]
    assert report["holds"] is False
    assert {c["rule"] for c in report["counterexamples"]} == {"cross-tenant-reachability"}


def test_frr_read_from_real_daemons_shows_no_drift_then_a_leaked_import(
    redis_socket: Path,
    demo: tuple[str, Path],
    frr_daemons: str,  # noqa: F811 - the imported fixture
    tmp_path: Path,
) -> None:
    url, bundle = demo
    config_db = json.loads((bundle / "sonic" / LEAF / "config_db.json").read_text())
    frr_conf = (bundle / "frr" / LEAF / "frr.conf").read_text()
    load_config_db(redis.Redis(unix_socket_path=str(redis_socket), db=CONFIG_DB), config_db)
    vtysh = shutil.which("vtysh") or "vtysh"
    leaf = FrrLeaf(tmp_path / "frr.conf", FrrTools(vtysh=vtysh, pathspace=frr_daemons))
    leaf.deploy(frr_conf)
    frr = ["--vtysh", vtysh, "--frr-pathspace", frr_daemons]

    clean = collect(redis_socket, url, "--json", "--out", str(tmp_path / "leaf01.json"), *frr)

    assert clean.exit_code == 0, clean.output
    report = json.loads(clean.output)
    assert (report["frr_observed"], report["in_sync"], report["holds"]) == (True, True, True)
    observed = json.loads((tmp_path / "leaf01.json").read_text())["frr"]
    l2vnis = {int(m["vni"]) for k, m in config_db["VXLAN_TUNNEL_MAP"].items() if "_Vlan" in k}
    assert {v["vni"] for v in observed["vnis"] if v["layer"] == "L2"} <= l2vnis
    assert {v["vni"] for v in observed["vnis"]} & l2vnis  # bgpd lists the configured L2VNIs
    assert set(observed["vrf_imports"]) == set(config_db["VRF"])

    asn, vrf = own_vrf(frr_conf, "tenant:globex")
    _, acme_vrf = own_vrf(frr_conf, "tenant:acme")
    acme_rt = f"65000:{acme_vrf.removeprefix('Vrf')}"
    commands = [f"router bgp {asn} vrf {vrf}", "address-family l2vpn evpn"]
    leaf.run(
        leaf.tools.vtysh_argv("configure terminal", *commands, f"route-target import {acme_rt}")
    )

    leaked = collect(redis_socket, url, "--json", *frr)

    assert leaked.exit_code == 1, leaked.output
    report = json.loads(leaked.output)
    assert [(d["code"], d["subject"]) for d in report["drift"]] == [("route-target-leak", vrf)]
    assert acme_rt in report["drift"][0]["observed"]
    assert {c["rule"] for c in report["counterexamples"]} == {"cross-tenant-reachability"}


def own_vrf(frr_conf: str, owner: str) -> tuple[str, str]:
    """(ASN, VRF) of `owner`'s BGP VRF instance in the rendered frr.conf (its comment names it)."""
    match = re.search(rf"router bgp (\d+) vrf (\S+)\n ! {re.escape(owner)},", frr_conf)
    assert match is not None, owner
    return match.group(1), match.group(2)
