"""Every shell example of the README and docs/ runs as printed (docs/examples.md).

Each page with ``sh`` blocks gets a fresh service, started as ``make run`` starts it
(``isofabric serve --demo`` in an empty directory; ``keys create`` and a plain ``serve`` for a
page that says it starts from an empty database), and its blocks run in order with bash in that
directory (``.venv`` and ``examples/`` as in a checkout). ``sh {.host}`` blocks are checked for
their lab test here and run by it.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.builders import REPO
from tests.docs.examples import (
    CURL_WRAPPER,
    DOCUMENTED_URL,
    Outcome,
    all_blocks,
    blocks,
    commands,
    failures,
    matches,
    run_page,
    runnable_pages,
    wants_empty_database,
)
from tests.live_server import first_200, free_port

API_PATH = re.compile(r"\$\{?API\}?/([^\s\"'?]*)")
# /v1, health, metrics, the console and the API docs; the UFM-compatible API (api/ufm/): its base
# paths, also under /fabrics/{fabric}, and /dologin.
SERVICE_PATHS = (
    *("v1/", "v1", "healthz", "readyz", "metrics", "ui", "docs", "openapi.json"),
    *("ufmRest", "fabrics/", "dologin"),
)
VENV_BIN = Path(sys.prefix) / "bin"
START_TIMEOUT_SECONDS = 60.0
PAGE_TIMEOUT_SECONDS = 600.0
# A page waits on its service and its shell far more than it computes: three at a time take
# the module from about 2 minutes to under one on 2 cores.
PAGES_AT_ONCE = 3
# Each `sh {.host #id}` block and the lab test that runs its command line (host_argv).
HOST_BLOCKS = {
    "quick-start": "tests/test_make_run.py::test_make_run_as_the_readme_says_serves_the_demo",
    "ibnetdiscover": "tests/conformance/test_harness.py::"
    "test_the_readmes_ibnetdiscover_line_captures_what_the_import_parses",
    "opensm-plan": "tests/conformance/test_opensm_agent.py::"
    "test_the_documented_plan_command_line_shows_a_change_and_installs_nothing",
    "opensm-by-hand": "tests/conformance/test_harness.py::"
    "test_opensm_runs_and_rereads_its_files_as_the_by_hand_steps_say",
    "sonic-agent": "tests/conformance/test_sonic_deploy.py::"
    "test_the_documented_first_deployment_takes_a_factory_leaf_to_its_target",
    "replicas-once": "tests/conformance/test_replicas.py::"
    "test_two_replicas_on_one_database_stay_correct",
    "replica-serve": "tests/conformance/test_systemd_unit.py::"
    "test_the_unit_starts_serve_with_options_it_takes",
    "audit-sm-partitions": "tests/conformance/test_collect_and_drift.py::"
    "test_collected_tables_show_a_hand_edited_cross_tenant_membership",
    "collect-ib": "tests/conformance/test_collect_jobs.py::"
    "test_collect_with_six_jobs_reads_every_port_but_the_failing_one",
    "collect-roce": "tests/conformance/test_collect_roce.py::"
    "test_collected_config_db_shows_no_drift_then_a_foreign_vlan_member",
    "update-golden": "tests/test_golden.py::"
    "test_update_golden_rewrites_the_file_with_the_rendered_bytes",
    "db-restore": "tests/test_db_backup.py::test_backup_change_restore_brings_the_data_back",
    "conformance-lab": "tests/test_make_run.py::"
    "test_the_conformance_lab_block_is_what_ci_installs_and_runs",
}


def example_env(workdir: Path) -> dict[str, str]:
    """The reader's shell: the checkout's venv and a curl that notes HTTP statuses first."""
    wrappers = workdir / ".docs-bin"
    wrappers.mkdir()
    curl = shutil.which("curl")
    assert curl, "the examples need curl"
    (wrappers / "curl").write_text(CURL_WRAPPER.format(curl=curl))
    (wrappers / "curl").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISOFABRIC_")}
    env["PATH"] = os.pathsep.join([str(wrappers), str(VENV_BIN), env.get("PATH", "")])
    return env


def checkout_like(workdir: Path) -> None:
    (workdir / ".venv").symlink_to(Path(sys.prefix))
    (workdir / "examples").symlink_to(REPO / "examples")


@dataclass
class Reader:
    """A page, the fresh service its examples run against, and the reader's directory and shell."""

    page: Path
    url: str
    workdir: Path
    env: dict[str, str]


@contextmanager
def fresh_service(page: Path, root: Path) -> Iterator[Reader]:
    """A fresh service for the page, started in `root` as its reader starts it."""
    workdir = root / "checkout"
    workdir.mkdir()
    checkout_like(workdir)
    env = example_env(workdir)
    isofabric = str(VENV_BIN / "isofabric")
    serve = [isofabric, "serve", "--host", "127.0.0.1", "--port", str(port := free_port())]
    if wants_empty_database(page):
        subprocess.run([isofabric, "keys", "create"], cwd=workdir, env=env, check=True)
    else:
        serve.append("--demo")
    log = root / "service.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(serve, cwd=workdir, env=env, stdout=sink, stderr=sink)
    url = f"http://127.0.0.1:{port}"
    try:
        first_200(f"{url}/readyz", server, START_TIMEOUT_SECONDS)
        yield Reader(page, url, workdir, env)
    finally:
        server.terminate()
        server.wait(timeout=30)


def read_page(page: Path, root: Path) -> list[Outcome]:
    with fresh_service(page, root) as reader:
        return run_page(reader.page, reader.url, reader.workdir, reader.env)


def selected_pages(request: pytest.FixtureRequest) -> list[Path]:
    """The pages of this module's selected tests (all of them, or those -k chose)."""
    pages: list[Path] = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "page" in callspec.params and item.path == request.path:
            pages.append(callspec.params["page"])
    return pages


@pytest.fixture(scope="module")
def page_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[Path, Future[list[Outcome]]]]:
    """Every selected page, run PAGES_AT_ONCE at a time from the module's first test on."""
    selected = selected_pages(request)
    with ThreadPoolExecutor(max_workers=PAGES_AT_ONCE) as pool:
        yield {
            page: pool.submit(read_page, page, tmp_path_factory.mktemp(page.stem))
            for page in selected
        }


@pytest.mark.parametrize(
    "page", runnable_pages(), ids=[str(page.relative_to(REPO)) for page in runnable_pages()]
)
def test_the_page_runs_as_printed(page: Path, page_runs: dict[Path, Future[list[Outcome]]]):
    outcomes = page_runs[page].result(timeout=PAGE_TIMEOUT_SECONDS)
    problems = [problem for outcome in outcomes for problem in failures(outcome)]
    shown = "\n\n".join(
        f"{o.command.where}: $ {o.command.text}\n{o.output[-2000:]}"
        for o in outcomes
        if failures(o)
    )
    assert not problems, "\n".join(problems) + "\n\n" + shown


def test_every_page_uses_one_address_and_sets_its_variables_first():
    for block in all_blocks():
        if block.kind != "sh":
            continue
        assert "/v1/v1" not in block.text, block.where
        for path in API_PATH.findall(block.text):
            assert path.startswith(SERVICE_PATHS), (
                f"{block.where}: $API/{path}: $API is the base URL"
            )
        assert "localhost:8000" not in block.text, f"{block.where}: use {DOCUMENTED_URL}"


def test_every_host_block_names_where_it_runs_and_has_its_lab_test():
    host_blocks = [block for block in all_blocks() if block.kind == "host"]
    for block in host_blocks:
        assert block.block_id in HOST_BLOCKS, f"{block.where}: no lab test for this block"
        assert "# on " in block.text.splitlines()[0], f"{block.where}: say where it runs"
    for node_id in HOST_BLOCKS.values():
        path, name = node_id.split("::")
        tree = ast.parse((REPO / path).read_text())
        defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name in defined, node_id
    assert {block.block_id for block in host_blocks} == set(HOST_BLOCKS)


def test_every_sh_block_parses_into_commands():
    for page in runnable_pages():
        for block in blocks(page):
            if block.kind == "sh":
                assert commands(block), f"{block.where}: an sh block without a command"


@pytest.mark.parametrize(
    "output",
    [
        '{"data":[{"id":"a","final":false},{"id":"b","final":false}],"count":2}',
        '{"data":[{"id":"b","final":false},{"id":"a","final":false}],"count":2}',
        '{"data":[{"id":"a","final":false}],"count":1}',
    ],
)
def test_an_ellipsis_stands_for_any_number_of_items_wherever_the_claimed_one_sits(output: str):
    assert matches('{"data":[…{"id":"a",…},…],"count":…}', output)
    assert matches('{"data":[{"id":"…","final":false},…],…}', output)


def test_a_claim_fails_when_a_fragment_is_missing_or_out_of_order():
    output = '{"data":[{"id":"a","final":false}],"count":1}'
    assert not matches('{"data":[…{"id":"b",…},…],…}', output)
    assert not matches('…"count":1…"data":…', output)
    assert not matches('{"data":[{"id":"a","final":true}…', output)
