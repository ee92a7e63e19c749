"""/docs works on a network without internet access: every asset it loads is this server's.

FastAPI's default page loads Swagger UI from cdn.jsdelivr.net and its favicon from
fastapi.tiangolo.com (issue 14, item 5); api/docs.py serves them from package data instead.
tests/test_wheel_docs.py checks the same page served from an installed wheel.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.docs import ASSETS_DIR
from cli import app as cli
from tests.docs_page import (
    OUTSIDE_HOSTS,
    absolute_urls,
    expected_content_type,
    is_same_origin,
    page_urls,
)

TOKEN = "docs-offline-operator"


@pytest.fixture
def guarded(make_client):
    """A closed service (an admin token is configured): the docs still need no token."""
    return make_client(admin_token=TOKEN)


def test_the_docs_page_loads_only_assets_of_this_server_each_served(guarded):
    page = guarded.get("/docs")

    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert absolute_urls(page.text) == []
    urls = page_urls(page.text)
    assert {"/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"} <= set(urls)
    assert "/openapi.json" in urls
    for url in urls:
        assert is_same_origin(url), url
        asset = guarded.get(url)
        assert asset.status_code == 200, url
        assert asset.headers["content-type"].startswith(expected_content_type(url)), url
        assert asset.content, url


def test_swagger_ui_never_calls_out_to_its_validator_or_a_cdn(guarded):
    page = guarded.get("/docs").text
    bundle = guarded.get("/docs/assets/swagger-ui-bundle.js").text
    css = guarded.get("/docs/assets/swagger-ui.css").text

    # Swagger UI's default validatorUrl is https://validator.swagger.io/validator.
    assert '"validatorUrl": null' in page
    for host in OUTSIDE_HOSTS:
        assert host not in page + bundle + css, host
    assert re.findall(r"url\(\s*['\"]?(?:https?:)?//", css) == []


def test_the_oauth2_redirect_page_refers_to_no_other_origin(guarded):
    page = guarded.get("/docs/oauth2-redirect")

    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert absolute_urls(page.text) == []


def test_behind_a_path_prefix_the_page_names_its_assets_under_it(guarded):
    prefixed = TestClient(guarded.app, root_path="/isofabric")

    urls = page_urls(prefixed.get("/docs").text)

    assert urls
    assert all(url.startswith("/isofabric/") for url in urls), urls


def test_redoc_is_not_served_from_a_cdn_either(guarded):
    # One UI: ReDoc's page would load its bundle from cdn.jsdelivr.net.
    assert guarded.get("/redoc").status_code == 404


def test_the_packaged_assets_are_the_published_swagger_ui_files():
    """SOURCE.txt names each copied file's sha256 (byte for byte swagger-ui-dist's)."""
    listed = {
        line.split()[1]: line.split()[0]
        for line in (ASSETS_DIR / "SOURCE.txt").read_text().splitlines()
        if len(line.split()) == 2 and len(line.split()[0]) == 64
    }

    assert set(listed) == {"swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"}
    for name, sha256 in listed.items():
        assert hashlib.sha256(Path(ASSETS_DIR, name).read_bytes()).hexdigest() == sha256, name
    for licence in ("LICENSE", "NOTICE", "swagger-ui-bundle.js.LICENSE.txt"):
        assert (ASSETS_DIR / licence).is_file(), licence


def test_the_description_says_what_the_service_does_on_both_technologies(guarded):
    description = guarded.get("/openapi.json").json()["info"]["description"]

    for term in (
        # InfiniBand: partitions, OpenSM's files and QoS, the deploy agent
        "InfiniBand", "P_Key", "partitions.conf", "OpenSM", "QoS", "isofabric agent opensm",
        # RoCE: VRF + VLAN + VXLAN VNI, SONiC and FRR EVPN
        "RoCE", "VRF", "VLAN", "L2VNI", "L3VNI", "config_db.json", "FRR", "EVPN",
        # how to use it: tokens and roles, lists, retries, dry runs, errors
        "Bearer", "tenant-admin", "auditor", "?cursor=", "Idempotency-Key", "?dry_run=true",
        "application/problem+json", "/problems/isolation-violation",
    ):  # fmt: skip
        assert term in description, term


def test_the_command_line_says_infiniband_and_roce():
    result = CliRunner().invoke(cli, ["--help"], env={"COLUMNS": "200"})

    assert result.exit_code == 0
    assert "InfiniBand" in result.output
    assert "RoCE" in result.output
    assert "for InfiniBand fabrics." not in result.output


@pytest.mark.parametrize(
    "path", ["/docs", "/docs/oauth2-redirect", "/problems", "/problems/conflict"]
)
def test_no_other_site_may_frame_the_docs_or_the_problem_pages(guarded, path):
    page = guarded.get(path, headers={"Accept": "text/html"})

    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
