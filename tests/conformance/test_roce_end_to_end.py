"""Conformance end to end: onboard the demo RoCE fabric through the API, download every leaf's
artifacts and hand them to the real checkers.

* ``sonic/<leaf>/config_db.json`` through yanglint against the pinned sonic-yang-models
  (`sonic_yang.validate_config_db`);
* ``frr/<leaf>/frr.conf`` through ``vtysh -C -f`` (exit 0) and bgpd's dry run (no
  ``% Malformed`` line, nothing but the expected zebra-only noise; see test_frr.py).

Tests skip when a tool is missing unless ``ISOFABRIC_REQUIRE_CONFORMANCE=1``, then they fail.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from tenancy.store.db import make_engine
from tenancy.store.settings import Settings
from tenancy.usecases.bootstrap import prepare_database
from tests.builders import (
    LOCAL_URL,
    ROCE_ARTIFACT_PATHS,
    ROCE_LEAVES,
    FakeClock,
    api_onboard_roce,
    ok,
)

from .conftest import skip_or_fail
from .sonic_yang import missing_models, models_dir, validate_config_db, yanglint_path
from .test_frr import FrrTools, _find_bgpd, unexpected

pytestmark = pytest.mark.conformance

FABRIC = "/v1/fabrics/roce-west"


@pytest.fixture(scope="module")
def downloaded() -> Iterator[dict[str, str]]:
    """Every artifact of the onboarded demo fabric, by path, as the API serves it."""
    engine = make_engine("sqlite://")
    try:
        prepare_database(engine)
        app = create_app(Settings(database_url="sqlite://"), engine=engine, clock=FakeClock())
        with TestClient(
            app, client=("127.0.0.1", 50000), base_url=LOCAL_URL
        ) as client:  # open mode: loopback
            api_onboard_roce(client)
            assert ok(client.get(f"{FABRIC}/verification"))["holds"] is True
            paths = [f["path"] for f in ok(client.get(f"{FABRIC}/artifacts"))["files"]]
            files = {}
            for path in paths:
                response = client.get(f"{FABRIC}/artifacts/{path}")
                assert response.status_code == 200, response.text
                files[path] = response.text
        yield files
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def models() -> Path:
    path = models_dir()
    if (reason := missing_models(path)) is not None:
        skip_or_fail(reason)
    if yanglint_path() is None:
        skip_or_fail("yanglint not installed (apt-get install libyang-tools)")
    return path


@pytest.fixture(scope="module")
def frr_tools() -> FrrTools:
    vtysh, bgpd = shutil.which("vtysh"), _find_bgpd()
    if vtysh is None or bgpd is None:
        skip_or_fail("FRR is not installed (need vtysh and bgpd)")
    if os.geteuid() != 0:
        skip_or_fail("FRR's offline checkers need root (bgpd drops privileges to user frr)")
    return FrrTools(vtysh, bgpd)


def frr_file(downloaded: dict[str, str], leaf: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{leaf}.conf"
    path.write_text(downloaded[f"frr/{leaf}/frr.conf"])
    return path


def test_the_api_serves_a_config_db_and_an_frr_conf_for_every_leaf(downloaded):
    assert sorted(downloaded) == list(ROCE_ARTIFACT_PATHS)


@pytest.mark.parametrize("leaf", ROCE_LEAVES)
def test_every_downloaded_config_db_validates_against_the_sonic_yang_models(
    downloaded, models, leaf
):
    config = json.loads(downloaded[f"sonic/{leaf}/config_db.json"])
    assert sorted(config["VRF"]) == ["Vrf50000", "Vrf50001", "Vrf50002", "Vrf50003"]

    valid, message = validate_config_db(config, models)

    assert valid, message


@pytest.mark.parametrize("leaf", ROCE_LEAVES)
def test_vtysh_accepts_every_downloaded_frr_conf(downloaded, frr_tools, leaf, tmp_path):
    done = frr_tools.vtysh_check(frr_file(downloaded, leaf, tmp_path))

    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("leaf", ROCE_LEAVES)
def test_bgpd_dry_run_of_every_downloaded_frr_conf_reports_nothing_malformed(
    downloaded, frr_tools, leaf, tmp_path
):
    path = frr_file(downloaded, leaf, tmp_path)
    assert "route-target import 65000:50000" in path.read_text()  # the granted route leak

    lines = frr_tools.bgpd_dry_run(path)

    assert [line for line in lines if "% Malformed" in line] == []
    assert unexpected(lines) == []
