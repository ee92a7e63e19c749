"""What a release serves from a database: every InfiniBand fabric's OpenSM files and digest.

Run as a script by the migration tests with an earlier release's packages first on PYTHONPATH
(tests/test_partitions_migration.py), and imported by them under this release, so that both
releases answer the same requests through their own API:

    python -P tests/release_state.py load URL KEY_DIRECTORY  # migrate, key, demo; then read
    python -P tests/release_state.py read URL KEY_DIRECTORY  # JSON: what it serves (`served`)

Run it with ``python -P``: the script's own directory (tests/, with packages named like the
service's: tests/tenancy, tests/api) must not come first on sys.path.

It imports the service's packages only, never the test suite's modules.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from api.app import create_app
from cli import DEMO_ROCE_INVENTORY, DEMO_TOPOLOGY
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import signing_keys
from tenancy.usecases.bootstrap import prepare_database
from tenancy.usecases.demo import load_demo

OPENSM_FILES = ("opensm/opensm.conf", "opensm/partitions.conf", "opensm/qos-policy.conf")
# Open mode (no token issued yet) answers loopback clients only (api/access_rules.py).
LOOPBACK = ("127.0.0.1", 50000)


def release_settings(url: str, keys: Path) -> Settings:
    """Settings on `url`, the key files in `keys` (signing.key, keyring.jsonl, opensm.secret)."""
    return Settings(
        database_url=url,
        signing_key_file=str(keys / "signing.key"),
        keyring_file=str(keys / "keyring.jsonl"),
        opensm_secret_file=str(keys / "opensm.secret"),
    )


def load(url: str, keys: Path) -> None:
    """Migrate to this release's head, record the key (`isofabric keys create`), load the demo."""
    engine = make_engine(url)
    try:
        prepare_database(engine)
        uow = UnitOfWork(engine, release_settings(url, keys))
        signing_keys.create(uow)
        demo = {"roce_inventory_text": DEMO_ROCE_INVENTORY.read_text()}
        assert load_demo(uow, topology_text=DEMO_TOPOLOGY.read_text(), **demo)
    finally:
        engine.dispose()


def served(url: str, keys: Path) -> dict[str, Any]:
    """{"fabrics": name -> {"digest", "files": path -> text} (InfiniBand), "modules": the files
    the service's packages were imported from}."""
    modules = (sys.modules[name] for name in ("api.app", "cli", "tenancy.store.db"))
    return {"fabrics": read(url, keys), "modules": [module.__file__ for module in modules]}


def read(url: str, keys: Path) -> dict[str, Any]:
    """Fabric name -> {"digest": the verified snapshot's, "files": path -> text} (InfiniBand)."""
    engine = make_engine(url)
    app = create_app(release_settings(url, keys), engine=engine)
    fabrics: dict[str, Any] = {}
    try:
        with TestClient(app, client=LOOPBACK, base_url="http://127.0.0.1") as client:
            listed = client.get("/v1/fabrics", params={"limit": 100})
            assert listed.status_code == 200, listed.text
            for fabric in listed.json()["data"]:
                if fabric["kind"] != "infiniband":
                    continue
                name = fabric["name"]
                verdict = client.get(f"/v1/fabrics/{name}/verification")
                assert verdict.status_code == 200, verdict.text
                files = {}
                for path in OPENSM_FILES:
                    response = client.get(f"/v1/fabrics/{name}/artifacts/{path}")
                    assert response.status_code == 200, response.text
                    files[path] = response.text
                fabrics[name] = {"digest": verdict.json()["snapshot_digest"], "files": files}
    finally:
        engine.dispose()
    return fabrics


def main(argv: list[str]) -> int:
    command, url, keys = argv
    if command == "load":
        load(url, Path(keys))
    json.dump(served(url, Path(keys)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
