"""Migration 0027 on a database the previous release wrote: the demo, as operators run it.

The previous release is this repository's code just before migration 0027 was added (git
history): it migrates a database to 0026, loads the demo and serves its OpenSM files; this
release then upgrades the database. Every tenant's P_Key is its partition named ``default``
(same key, its nodes' ports), the three OpenSM files are byte-identical (the agents apply no
change) and the snapshot digest is unchanged; a new partition can then be created, and the
database downgrades to 0026 again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import Engine, inspect, text

from api.app import create_app
from tenancy.gate.full_check import full_check
from tenancy.store import key_store
from tenancy.store.db import alembic_config, make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tests import release_state
from tests.builders import REPO, created, ok
from tests.test_node_state_migration import url  # noqa: F401  (the SQLite/PostgreSQL fixture)

MIGRATION = "tenancy/migrations/versions/0027_partitions.py"
PREVIOUS_HEAD = "0026"
FABRIC = "ib-east"
TENANTS = ("acme", "research", "globex")


def _unavailable(reason: str) -> None:
    """No previous release to run: a failure in CI (CI=true), a skip elsewhere."""
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, check=False)


@pytest.fixture(scope="module")
def previous_release() -> Iterator[Path]:
    """The tree of the commit before the one that added migration 0027, extracted."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        _unavailable("the previous release comes from git history: no git checkout here")
    added = _git("log", "--diff-filter=A", "--format=%H", "--", MIGRATION)
    commits = added.stdout.decode().split()
    if added.returncode != 0 or not commits:
        _unavailable(f"git history does not show where {MIGRATION} was added (shallow clone?)")
    archive = _git("archive", "--format=tar", f"{commits[-1]}^")
    if archive.returncode != 0:
        _unavailable(f"no parent of {commits[-1]} in git history: {archive.stderr.decode()}")
    directory = Path(tempfile.mkdtemp(prefix="isofabric-previous-release-"))
    try:
        archive_path = directory / "release.tar"
        archive_path.write_bytes(archive.stdout)
        with tarfile.open(archive_path) as tar:
            tar.extractall(directory / "tree", filter="data")
        yield directory / "tree"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _run_previous(tree: Path, *args: str) -> str:
    """tests/release_state.py under the previous release's packages; its standard output.

    ``-P``: the script's directory (tests/, which has packages named tenancy and api) is not put
    first on sys.path, so PYTHONPATH's tree is found before this checkout's editable install.
    """
    environment = {**os.environ, "PYTHONPATH": str(tree)}
    script = Path(release_state.__file__)
    done = subprocess.run(
        [sys.executable, "-P", str(script), *args], cwd=tree, env=environment, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    return done.stdout.decode()


def _keys(directory: Path) -> Path:
    directory.mkdir()
    signing = key_store.private_pem(key_store.generate_signing_key())
    key_store.write_private_file(directory / "signing.key", signing)
    key_store.write_private_file(directory / "opensm.secret", key_store.new_opensm_secret())
    return directory


def test_0027_keeps_the_demos_files_and_digest_and_makes_each_pkey_a_default_partition(
    url,  # noqa: F811
    previous_release,
    tmp_path,
):
    keys = _keys(tmp_path / "keys")
    before = json.loads(_run_previous(previous_release, "load", url, str(keys)))
    modules = before.pop("modules")
    assert all(Path(module).is_relative_to(previous_release) for module in modules), modules
    engine = make_engine(url)
    try:
        assert _revision(engine) == PREVIOUS_HEAD and "partition" not in _tables(engine)
        pkeys = _tenant_pkeys(engine)

        command.upgrade(alembic_config(url), "head")

        assert release_state.read(url, keys) == before["fabrics"]  # byte for byte, digests
        settings = release_state.release_settings(url, keys)
        assert full_check(UnitOfWork(engine, settings), fabric_name=FABRIC).matches
        _assert_default_partitions_then_add_one(engine, settings, pkeys)

        command.downgrade(alembic_config(url), PREVIOUS_HEAD)

        assert _revision(engine) == PREVIOUS_HEAD
        assert {"partition", "partition_member", "virtual_guid"}.isdisjoint(_tables(engine))
        assert "virtual_guids" not in {c["name"] for c in inspect(engine).get_columns("fabric")}
    finally:
        engine.dispose()
    # The previous release serves its files again: the additional partition went with 0027.
    again = json.loads(_run_previous(previous_release, "read", url, str(keys)))
    assert again["fabrics"] == before["fabrics"]


def _assert_default_partitions_then_add_one(
    engine: Engine, settings: Settings, pkeys: dict[str, int]
) -> None:
    """Each tenant lists its default partition (its P_Key, its ports, full); acme adds one."""
    keys = Path(str(settings.signing_key_file)).parent
    app = create_app(settings, engine=engine)
    with TestClient(app, client=release_state.LOOPBACK, base_url="http://127.0.0.1") as client:
        for tenant in TENANTS:
            listed = ok(client.get(f"/v1/tenants/{tenant}/partitions"))["data"]
            assert [(p["name"], p["fabric"]) for p in listed] == [("default", FABRIC)]
            assert int(listed[0]["pkey"], 16) == pkeys[tenant]
            members = {(m["guid"], m["membership"]) for m in listed[0]["members"]}
            assert members == {(guid, "full") for guid in _ports_of(engine, tenant)}
        added = created(
            client.post("/v1/tenants/acme/partitions", json={"fabric": FABRIC, "name": "jobs"})
        )
        assert int(added["pkey"], 16) not in pkeys.values()
        guid = sorted(_ports_of(engine, "acme"))[0]
        ok(client.post(f"/v1/tenants/acme/partitions/jobs/members/{guid}"))
    partitions_conf = release_state.read(settings.database_url, keys)[FABRIC]["files"][
        "opensm/partitions.conf"
    ]
    assert added["pkey"] in partitions_conf and f"{guid}=full" in partitions_conf


def _revision(engine: Engine) -> str:
    with engine.connect() as connection:
        return str(connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar())


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def _tenant_pkeys(engine: Engine) -> dict[str, int]:
    """Each demo tenant's active P_Key segment on ib-east, as the previous release left it."""
    query = (
        "SELECT t.name, s.value FROM segment s JOIN tenant t ON t.id = s.tenant_id "
        "JOIN fabric f ON f.id = s.fabric_id WHERE f.name = 'ib-east' AND s.kind = 'pkey' "
        "AND s.state = 'active'"
    )
    with engine.connect() as connection:
        found = {str(name): int(value) for name, value in connection.exec_driver_sql(query)}
    assert set(found) == set(TENANTS)
    return found


def _ports_of(engine: Engine, tenant: str) -> set[str]:
    """The port GUIDs of the nodes `tenant` holds on ib-east."""
    query = (
        "SELECT p.guid FROM port p JOIN node n ON n.id = p.node_id "
        "JOIN fabric f ON f.id = n.fabric_id "
        "JOIN node_assignment a ON a.node_id = n.id JOIN allocation al ON al.id = a.allocation_id "
        "JOIN tenant t ON t.id = al.tenant_id WHERE f.name = 'ib-east' AND t.name = :tenant"
    )
    with engine.connect() as connection:
        found = {str(guid) for (guid,) in connection.execute(text(query), {"tenant": tenant})}
    assert found
    return found
