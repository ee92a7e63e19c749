"""`isofabric collect roce` without a switch: CONFIG_DB from a stand-in reader, FRR from a
stand-in ``vtysh`` script; the document, the FRR pathspace, partial reads and exit status.

The Redis reading itself runs against a real redis-server in
tests/conformance/test_collect_roce.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from typer.testing import CliRunner

from cli import app
from cli import collect_roce as collect_module
from cli.collect import PARTIAL, TROUBLE
from policies.roce.observed import LeafState, leaf_state
from tests.cli_server import ADMIN, Served, served

__all__ = ["served"]  # the fixture

runner = CliRunner()
TABLES: dict[str, dict[str, dict[str, Any]]] = {
    "VLAN_MEMBER": {"Vlan100|Ethernet0": {"tagging_mode": "untagged"}},
    "VRF": {"Vrf50001": {"vni": "50001"}},
    "VXLAN_TUNNEL_MAP": {"vtep|map_10000_Vlan100": {"vlan": "Vlan100", "vni": "10000"}},
    "PORT_QOS_MAP": {"Ethernet0": {"dscp_to_tc_map": "TENANT_GOLD", "pfc_enable": ["3", "4"]}},
}
RUNNING = """router bgp 65101 vrf Vrf50001
 address-family l2vpn evpn
  route-target import 65000:50001
  route-target import 65000:50000
 exit-address-family
exit
"""
VNIS = {"numVnis": 1, "10000": {"vni": 10000, "type": "L2", "importRTs": ["65000:10000"]}}
BASE = ["collect", "roce", "--fabric", "roce-west", "--leaf", "leaf01"]
URL = ["--config-db", "unix:///nonexistent/redis.sock?db=4"]


@pytest.fixture
def config_db(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """CONFIG_DB reads answer TABLES; the list holds the URLs read."""
    urls: list[str] = []

    def read(url: str) -> LeafState:
        urls.append(url)
        return leaf_state(TABLES)

    monkeypatch.setattr(collect_module, "read_config_db", read)
    return urls


def fake_vtysh(tmp_path: Path, *, fail: bool = False) -> Path:
    """A stand-in vtysh: records its arguments, answers the two show commands."""
    (tmp_path / "running.txt").write_text(RUNNING)
    (tmp_path / "vnis.json").write_text(json.dumps(VNIS))
    script = tmp_path / "vtysh"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path}/calls\n'
        + ("echo 'vtysh: no daemons' >&2; exit 1\n" if fail else "")
        + 'case "$*" in\n'
        f'  *"show running-config"*) cat {tmp_path}/running.txt ;;\n'
        f'  *"show bgp l2vpn evpn vni json"*) cat {tmp_path}/vnis.json ;;\n'
        "esac\n"
    )
    script.chmod(0o755)
    return script


def test_without_a_server_it_prints_the_leafs_document(config_db):
    result = runner.invoke(app, [*BASE, *URL])

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert config_db == ["unix:///nonexistent/redis.sock?db=4"]
    assert (document["kind"], document["leaf"], document["frr"]) == ("roce", "leaf01", None)
    assert document["vlan_members"] == {"Ethernet0": ["Vlan100"]}
    assert document["vrfs"] == {"Vrf50001": 50001}
    assert document["tunnel_maps"] == [
        {"tunnel": "vtep", "name": "map_10000_Vlan100", "vni": 10000, "vlan": "Vlan100"}
    ]
    assert document["port_qos_maps"]["Ethernet0"]["pfc_enable"] == "3,4"


def test_with_vtysh_it_reads_frr_in_the_pathspace(config_db, tmp_path):
    vtysh = fake_vtysh(tmp_path)

    result = runner.invoke(app, [*BASE, *URL, "--vtysh", str(vtysh), "--frr-pathspace", "leaf01"])

    assert result.exit_code == 0, result.output
    frr = json.loads(result.stdout)["frr"]
    assert frr["vrf_imports"] == {"Vrf50001": ["65000:50000", "65000:50001"]}
    assert frr["vnis"] == [
        {"vni": 10000, "layer": "L2", "import_rts": ["65000:10000"], "export_rts": []}
    ]
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [
        "-N leaf01 -c show running-config",
        "-N leaf01 -c show bgp l2vpn evpn vni json",
    ]


def test_frr_that_cannot_be_read_is_a_partial_document(config_db, tmp_path):
    out = tmp_path / "leaf01.json"

    result = runner.invoke(
        app, [*BASE, *URL, "--vtysh", str(fake_vtysh(tmp_path, fail=True)), "--out", str(out)]
    )

    assert result.exit_code == PARTIAL
    document = json.loads(out.read_text())
    assert document["frr"] is None and "no daemons" in document["frr_error"]
    assert "failed: FRR:" in result.stderr
    assert result.stdout == ""  # --out: the document went to the file


def test_a_config_db_that_cannot_be_read_is_exit_2_and_no_document():
    result = runner.invoke(app, [*BASE, *URL])

    assert result.exit_code == TROUBLE
    assert result.stderr.startswith("error: reading CONFIG_DB")
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--frr-pathspace", "x"], "--frr-pathspace needs --vtysh"),
        (["--url", "http://127.0.0.1:9", "--db", "sqlite:///x.db"], "name two places"),
    ],
)
def test_usage_errors_are_exit_2(config_db, extra, message):
    result = runner.invoke(app, [*BASE, *URL, *extra])

    assert result.exit_code == TROUBLE
    assert message in result.stderr


# --- compared over REST and on the database --------------------------------------------------


def rendered_tables(served: Served) -> dict[str, dict[str, dict[str, Any]]]:
    response = httpx2.get(
        f"{served.url}/v1/fabrics/roce-west/artifacts/sonic/leaf01/config_db.json",
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert response.status_code == 200, response.text
    tables: dict[str, dict[str, dict[str, Any]]] = response.json()
    return tables


def serve_config_db(monkeypatch: pytest.MonkeyPatch, tables: dict[str, Any]) -> None:
    monkeypatch.setattr(collect_module, "read_config_db", lambda url: leaf_state(tables))


def test_over_rest_and_on_the_database_a_leaf_as_rendered_is_in_sync(served, monkeypatch):
    serve_config_db(monkeypatch, rendered_tables(served))

    status, out, err = served.run(*BASE, *URL)

    assert status == 0, err
    assert out == "leaf01: in sync, isolation holds (FRR not observed)\n"
    local = runner.invoke(app, [*BASE, *URL, "--db", served.db, "--json"])
    assert local.exit_code == 0, local.output
    assert json.loads(local.stdout)["in_sync"] is True


def test_over_rest_a_foreign_vlan_member_is_listed_and_exit_1(served, monkeypatch):
    tables = rendered_tables(served)
    members = sorted(tables["VLAN_MEMBER"])
    vlans = sorted({key.split("|")[0] for key in members})
    stranger = next(k.split("|")[1] for k in members if not k.startswith(f"{vlans[0]}|"))
    tables["VLAN_MEMBER"][f"{vlans[0]}|{stranger}"] = {"tagging_mode": "untagged"}
    serve_config_db(monkeypatch, tables)

    status, out, err = served.run(*BASE, *URL)

    assert status == 1, err
    lines = out.splitlines()
    assert lines[0].startswith(f"vlan-member-unexpected: {stranger} (")
    assert lines[-1].startswith("leaf01: 1 drift item(s), isolation")
