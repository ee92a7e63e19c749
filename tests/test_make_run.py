"""The README's quick start, ``make run``: the demo service answers (its ``sh {.host}`` block).

Run in a copy of the Makefile and pyproject.toml with this suite's venv (already installed, so
make's install steps are up to date), on a free port; stopped by its process group.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from tests.builders import REPO
from tests.docs.examples import host_argv
from tests.live_server import first_200, free_port

START_TIMEOUT_SECONDS = 60.0


def test_make_run_as_the_readme_says_serves_the_demo(tmp_path: Path) -> None:
    documented = host_argv("README.md", "quick-start")
    assert [argv[:2] for argv in documented] == [["make", "run"], ["make", "test"]]
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(REPO / name, tmp_path / name)
    venv, port = Path(sys.prefix), free_port()
    (venv / ".installed-run").touch()  # the suite's venv holds the service's packages
    argv = [*documented[0], f"VENV={venv}", f"PORT={port}"]
    make = subprocess.Popen(argv, cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE)
    try:
        fabrics = first_200(f"http://127.0.0.1:{port}/v1/fabrics", make)
    finally:
        os.killpg(make.pid, signal.SIGTERM)
        printed = make.communicate(timeout=30)[0].decode()

    assert fabrics.status_code == 200
    assert {f["name"] for f in fabrics.json()["data"]} == {"ib-east", "roce-west"}
    assert f"http://127.0.0.1:{port}" in printed and (tmp_path / "isofabric.db").is_file()


def test_the_conformance_lab_block_is_what_ci_installs_and_runs() -> None:
    """docs/maintainers.md's ``#conformance-lab`` block: .ci/run runs it (CI is its lab)."""
    install, run = host_argv("docs/maintainers.md", "conformance-lab")
    ci = (REPO / ".ci" / "run").read_text()

    packages = [word for word in install[3:] if not word.startswith("-")]
    assert install[:3] == ["sudo", "apt-get", "install"] and packages
    assert all(f" {package}" in ci for package in packages), packages
    assert (
        run[0] == "ISOFABRIC_REQUIRE_CONFORMANCE=1"
        and "export ISOFABRIC_REQUIRE_CONFORMANCE=1" in ci
    )
    assert run[1:] == [".venv/bin/pytest", "tests/conformance"]
