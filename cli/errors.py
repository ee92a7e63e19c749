"""The one place where the command line turns a failure into one line and an exit status.

Exit statuses, like ``diff`` and ``grep`` (docs/operators/command-line.md):

    0  done
    1  a check ran and found a problem (verify, audit verify, proof verify, audit-config,
       check-partitions, collect roce: the leaf drifted from intent)
    2  trouble: the command could not do its job, e.g. a usage error, a name that does not exist,
       a refused change, no database, a database or file that cannot be read or written
    3-6  a REST client command's failed request, by the problem's type (cli/client.py
       EXIT_BY_TYPE): 3 not found, 4 refused, 5 unauthorized or forbidden, 6 unavailable
    7  partial: the command did its job for some items only and wrote what it got (collect ib:
       some ports' P_Key tables could not be read; each is listed, cli/collect.py; collect
       roce: FRR could not be read, cli/collect_roce.py)

Trouble is one line on stderr, ``error: <detail>``; ``--debug`` (or ``ISOFABRIC_DEBUG=1``) shows
the traceback instead. Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from cli.options import close_databases
from policies.errors import IsofabricError

TROUBLE = 2
DEBUG_KEY = "isofabric.debug"


def reported() -> tuple[type[Exception], ...]:
    """What the command line reports in one line; anything else is a bug (traceback kept).

    The storage errors are SQLAlchemy's: a command that never loaded it cannot raise them, and
    importing it for every command would cost `isofabric --help` most of its start-up time.
    """
    return (IsofabricError, OSError, *_storage_errors())


def _storage_errors() -> tuple[type[Exception], ...]:
    if not {"sqlalchemy", "sqlite3", "alembic"} & sys.modules.keys():
        return ()
    from tenancy.store.db import STORAGE_ERRORS

    return STORAGE_ERRORS


def detail_of(error: Exception) -> str:
    """The one line that says what went wrong (no SQL, no traceback)."""
    if isinstance(error, IsofabricError):
        text = error.detail
    elif isinstance(error, _storage_errors()):
        from tenancy.store.db import storage_error_detail

        text = f"database: {storage_error_detail(error)}"
    elif isinstance(error, OSError) and error.filename is not None and error.strerror:
        text = _file_error(error)
    else:
        text = str(error)
    return " ".join(text.split())


def _file_error(error: OSError) -> str:
    """``PATH: No such file or directory``, not ``[Errno 2] No such file …: 'PATH'``."""
    paths = [str(p) for p in (error.filename, error.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {error.strerror}"


class ReportingGroup(TyperGroup):
    """The root command group: a reported failure of any command is one line and exit 2.

    Whatever the outcome, the databases the command opened are closed when it ends.
    """

    # typer passes a typer.Context; the base class names its private click's Context.
    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        """Run the command; report a domain, storage or file error in one line on stderr."""
        try:
            return super().invoke(ctx)
        except reported() as error:
            if ctx.meta.get(DEBUG_KEY):
                raise
            typer.echo(f"error: {detail_of(error)}", err=True)
            raise typer.Exit(TROUBLE) from error
        finally:
            close_databases()


def root_options(
    ctx: typer.Context,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", envvar="ISOFABRIC_DEBUG", help="Show the traceback of an error, not one line"
        ),
    ] = False,
) -> None:
    """The options every command takes (the app's own help text is the one shown)."""
    ctx.meta[DEBUG_KEY] = debug
