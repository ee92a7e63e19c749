"""The command line starts without the service: `isofabric --help` loads no database or web stack.

Each command imports what it uses when it runs (cli/options.py opens the database, cli/serve.py
imports the app), so listing the commands, and a REST command, never pay for SQLAlchemy,
alembic, FastAPI or the system of record. Checked by what is imported, not by a clock.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("sqlalchemy", "sqlmodel", "alembic", "fastapi", "starlette", "uvicorn", "tenancy")
# Loaded by `collect roce` when it runs: the Redis client and FRR's parsers (0.2 s at start).
COLLECTOR_ONLY = ("redis", "agent.config_db", "agent.frr", "policies.roce")


def imported_after(code: str) -> set[str]:
    """The top-level packages loaded by `code`."""
    return {name.split(".")[0] for name in modules_after(code)}


def modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return set(done.stdout.split())


def test_importing_the_command_line_loads_no_database_or_web_stack():
    assert not imported_after("import cli") & set(HEAVY)


def test_importing_the_command_line_loads_no_collector():
    loaded = modules_after("import cli")
    assert not [m for m in loaded if m.startswith(COLLECTOR_ONLY)]


def test_help_loads_no_database_or_web_stack():
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom cli import app\n"
        "assert CliRunner().invoke(app, ['--help']).exit_code == 0"
    )
    assert not imported_after(code) & set(HEAVY)
