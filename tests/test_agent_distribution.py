"""A fabric host installs the base distribution: the deploy agents run without the service.

The wheel is installed into a fresh venv that can import exactly the distributions its base
requirements pull in (as this venv resolved them; no index is asked): FastAPI, SQLModel,
SQLAlchemy, alembic and the rest of the `server` extra are not there. `isofabric-agent` works in
it, `python -m agent` and the `api.agent` shim too, and the `isofabric` command line says which
extra it needs instead of failing on a traceback.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.wheel import (
    build_wheel,
    expose,
    fresh_venv,
    installed_closure,
    link_distributions,
    run,
    wheel_requirements,
)

SERVICE_ONLY = ("fastapi", "sqlmodel", "sqlalchemy", "alembic", "psycopg", "uvicorn", "starlette")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This work tree's wheel, built once for the module."""
    return build_wheel(tmp_path_factory.mktemp("agent-wheel"))


@pytest.fixture(scope="module")
def agent_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[Path]:
    """A venv with the wheel and its base dependencies only."""
    tmp = tmp_path_factory.mktemp("agent-dist")
    venv = fresh_venv(tmp, wheel)
    link_distributions(installed_closure(wheel_requirements(wheel)), tmp / "base-deps")
    expose(venv, tmp / "base-deps")
    yield venv


def test_the_base_requirements_name_no_package_of_the_service(wheel):
    base = installed_closure(wheel_requirements(wheel))
    assert not base & set(SERVICE_ONLY), base
    server = installed_closure(wheel_requirements(wheel, ("server",)))
    assert {"fastapi", "sqlmodel", "alembic", "uvicorn"} <= server
    print(f"agent install: {len(base)} distributions; service install: {len(server)}")


@pytest.mark.parametrize("package", SERVICE_ONLY)
def test_the_service_packages_are_not_installed(agent_venv, package):
    python = agent_venv / "bin" / "python"
    probe = f"import importlib.util as u; print(u.find_spec({package!r}) is None)"
    assert run(python, "-I", "-c", probe).strip() == "True"


@pytest.mark.parametrize("technology", ["opensm", "sonic"])
def test_isofabric_agent_help_works_without_the_service(agent_venv, technology):
    out = run(agent_venv / "bin" / "isofabric-agent", technology, "--help")
    assert "--server" in out and "--public-key" in out


@pytest.mark.parametrize("module", ["agent", "api.agent"])
def test_python_dash_m_runs_the_agents(agent_venv, module):
    out = run(agent_venv / "bin" / "python", "-m", module, "opensm", "--help")
    assert "--server" in out


def test_the_command_line_names_the_extra_it_needs(agent_venv):
    done = subprocess.run(
        [agent_venv / "bin" / "isofabric", "--help"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert "pip install 'isofabric[server]'" in done.stderr
    assert "isofabric-agent" in done.stderr
