"""The isofabric command line against a SQLite file holding the demo state."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY, app
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases.demo import load_demo
from tests.demo_db import demo_database
from tests.keys import keys_create

runner = CliRunner()


@pytest.fixture
def demo_db(tmp_path: Path) -> str:
    url = demo_database(tmp_path / "cli.db")
    keys_create(url)  # the key files beside cli.db: rendering opensm.conf needs the OpenSM secret
    return url


def test_render_writes_the_three_files_and_a_manifest_with_their_digests(demo_db, tmp_path):
    out = tmp_path / "bundle"

    result = runner.invoke(
        app, ["render", "--fabric", "ib-east", "--out", str(out), "--db", demo_db]
    )

    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert [f["path"] for f in manifest["files"]] == [
        "opensm/opensm.conf",
        "opensm/partitions.conf",
        "opensm/qos-policy.conf",
    ]
    for entry in manifest["files"]:
        content = (out / entry["path"]).read_bytes()
        assert hashlib.sha256(content).hexdigest() == entry["sha256"]
        assert len(content) == entry["bytes"]
    assert manifest["snapshot_digest"].startswith("v2:")
    assert (out / "opensm" / "opensm.conf").stat().st_mode & 0o077 == 0  # holds the keys


def test_verify_prints_the_verdict_and_exits_zero_when_isolated(demo_db):
    result = runner.invoke(app, ["verify", "--fabric", "ib-east", "--db", demo_db])

    assert result.exit_code == 0, result.output
    verdict = json.loads(result.output)
    assert verdict["holds"] is True
    assert {
        "from": "tenant:acme",
        "to": "service:storage",
        "segment": "0x0100",
        "allowed": True,
    } in verdict["reachability"]


def test_verify_full_reproduces_the_committed_digest_and_exits_zero(demo_db):
    result = runner.invoke(app, ["verify", "--fabric", "ib-east", "--full", "--db", demo_db])

    assert result.exit_code == 0, result.output
    check = json.loads(result.output)
    assert check["matches"] is True and check["holds"] is True
    assert check["digest"] == check["stored_digest"] and check["digest"].startswith("v2:")


def test_check_partitions_accepts_a_rendered_file(demo_db, tmp_path):
    runner.invoke(app, ["render", "--fabric", "ib-east", "--out", str(tmp_path), "--db", demo_db])

    result = runner.invoke(app, ["check-partitions", str(tmp_path / "opensm/partitions.conf")])

    assert result.exit_code == 0, result.output
    assert "0 critical" in result.output


def test_check_partitions_fails_on_a_file_opensm_would_fall_back_from(tmp_path):
    bad = tmp_path / "partitions.conf"
    bad.write_text("Default=0x7fff : ALL=limited ;\nacme=0x0101 : 0002c90300a1b2c4=full ;\n")

    result = runner.invoke(app, ["check-partitions", str(bad)])

    assert result.exit_code == 1
    assert "line 2" in result.output and "critical" in result.output


def test_render_writes_every_leaf_of_the_roce_demo_fabric(demo_db, tmp_path):
    result = runner.invoke(
        app, ["render", "--fabric", "roce-west", "--out", str(tmp_path), "--db", demo_db]
    )

    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [f["path"] for f in manifest["files"]] == [
        "frr/leaf01/frr.conf",
        "frr/leaf02/frr.conf",
        "sonic/leaf01/config_db.json",
        "sonic/leaf01/ownership.json",
        "sonic/leaf02/config_db.json",
        "sonic/leaf02/ownership.json",
    ]
    assert json.loads((tmp_path / "sonic/leaf01/config_db.json").read_text())["VRF"]


def test_loading_the_demo_twice_changes_nothing(demo_db):
    engine = make_engine(demo_db)
    uow = UnitOfWork(engine, Settings(database_url=demo_db))

    assert not load_demo(
        uow,
        topology_text=DEMO_TOPOLOGY.read_text(),
        roce_inventory_text=DEMO_ROCE_INVENTORY.read_text(),
    )
    engine.dispose()


def test_the_demo_loads_what_is_missing_around_an_offboarded_demo_tenant(tmp_path):
    """The worked examples offboard a demo tenant; `serve --demo` then still starts."""
    from tenancy.usecases import allocations, tenants
    from tenancy.usecases.bootstrap import prepare_database

    url = f"sqlite:///{tmp_path / 'examples.db'}"
    engine = make_engine(url, create_missing=True)
    prepare_database(engine)
    uow = UnitOfWork(engine, Settings(database_url=url))
    assert load_demo(uow, topology_text=DEMO_TOPOLOGY.read_text())  # ib-east only
    tenants.offboard_tenant(uow, name="acme")

    assert load_demo(
        uow,
        topology_text=DEMO_TOPOLOGY.read_text(),
        roce_inventory_text=DEMO_ROCE_INVENTORY.read_text(),
    )

    def fabrics_of(name: str) -> list[str]:
        page = allocations.list_allocations(uow, tenant_name=name, limit=100, cursor=None)
        return sorted(a.fabric for a in page.data)

    both = ["ib-east", "roce-west"]
    assert [fabrics_of(n) for n in ("acme", "research", "globex")] == [[], both, both]
    assert tenants.get_tenant(uow, name="acme").status == "offboarded"
    engine.dispose()
