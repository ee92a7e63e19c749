"""The wheel carries the docs UI: installed in a fresh venv, `isofabric serve` serves /docs whole.

Issue 14, item 5: the Swagger UI assets are package data, so a wheel built from this tree and
installed anywhere serves /docs with nothing fetched from the internet. The test builds the wheel
and installs it without dependencies into a new venv that imports this one's (tests/wheel.py),
starts its `isofabric serve` in an empty directory and loads
/docs as a browser would: every URL the page uses is on the server and answers 200 with its
media type, and neither the page nor the assets name a CDN.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs_page import (
    OUTSIDE_HOSTS,
    absolute_urls,
    expected_content_type,
    is_same_origin,
    page_urls,
)
from tests.wheel import build_wheel, expose_everything, fresh_venv, run

START_TIMEOUT_SECONDS = 20
LISTENING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """`isofabric serve` of a venv that has only the wheel of this project; yields (venv, URL)."""
    tmp = tmp_path_factory.mktemp("wheel")
    venv = fresh_venv(tmp, build_wheel(tmp))
    expose_everything(venv)
    workdir = tmp / "empty"
    workdir.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(workdir), "LANG": "C.UTF-8"}
    server = subprocess.Popen(
        [venv / "bin" / "isofabric", "serve", "--port", "0"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    log: list[str] = []
    # A thread reads stderr to its end, so that the pipe never fills and stops the server.
    reader = threading.Thread(target=lambda: log.extend(server.stderr or ()), daemon=True)
    reader.start()
    try:
        yield venv, _listening_url(log)
    finally:
        server.terminate()
        server.wait(timeout=START_TIMEOUT_SECONDS)
        reader.join(timeout=START_TIMEOUT_SECONDS)
        assert server.stderr is not None
        server.stderr.close()


def _listening_url(log: list[str]) -> str:
    """The URL uvicorn logs once it listens (port 0: the kernel picked it)."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        for line in list(log):
            if match := LISTENING.search(line):
                return match.group(1)
        time.sleep(0.05)
    raise AssertionError("the server did not start listening:\n" + "".join(log))


def get(url: str) -> tuple[int, str, bytes]:
    """Status, content type and body; no proxy, as on an isolated management network."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        return response.status, response.headers["Content-Type"], response.read()


def test_the_installed_wheel_is_the_code_that_runs(served):
    venv, _ = served
    python = venv / "bin" / "python"

    files = run(python, "-I", "-c", "import api, tenancy, policies; print(api.__file__); "
                "print(tenancy.__file__); print(policies.__file__)")  # fmt: skip

    for file in files.split():
        assert Path(file).is_relative_to(venv), file


def test_docs_from_the_wheel_load_only_assets_of_the_server(served):
    venv, origin = served

    status, content_type, body = get(origin + "/docs")

    assert (status, content_type.split(";")[0]) == (200, "text/html")
    page = body.decode()
    assert [url for url in absolute_urls(page) if not url.startswith(origin)] == []
    urls = page_urls(page)
    assert any(url.endswith("/swagger-ui-bundle.js") for url in urls)
    for url in urls:
        assert is_same_origin(url, origin), url
        status, content_type, asset = get(url if url.startswith(origin) else origin + url)
        assert status == 200, url
        assert content_type.startswith(expected_content_type(url)), (url, content_type)
        assert asset, url
        if url.endswith((".js", ".css")):
            for host in OUTSIDE_HOSTS:
                assert host.encode() not in asset, (url, host)
    probe = "import api.docs as d; print(d.ASSETS_DIR)"
    assets = Path(run(venv / "bin" / "python", "-I", "-c", probe).strip())
    assert assets.is_relative_to(venv) and (assets / "swagger-ui-bundle.js").is_file()


def test_problem_pages_from_the_wheel_answer(served):
    _, origin = served

    status, content_type, _ = get(origin + "/problems/isolation-violation")

    assert (status, content_type) == (200, "application/json")
