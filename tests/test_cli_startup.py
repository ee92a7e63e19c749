"""The command line starts without the service: `isofabric --help` loads no database or web stack.

Each command imports what it uses when it runs (cli/options.py opens the database, cli/serve.py
imports the app), so listing the commands, and a REST command, never pay for SQLAlchemy,
alembic, FastAPI or the system of record. Checked by what is imported, not by a clock.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("sqlalchemy", "sqlmodel", "alembic", "fastapi", "starlette", "uvicorn", "tenancy")


def imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return {name.split(".")[0] for name in done.stdout.split()}


def test_importing_the_command_line_loads_no_database_or_web_stack():
    assert not imported_after("import cli") & set(HEAVY)


def test_help_loads_no_database_or_web_stack():
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom cli import app\n"
        "assert CliRunner().invoke(app, ['--help']).exit_code == 0"
    )
    assert not imported_after(code) & set(HEAVY)
