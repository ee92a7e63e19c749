"""`isofabric collect ib`: read a live InfiniBand fabric's P_Key tables on a Subnet Manager host.

``isofabric collect ib`` runs ``ibnetdiscover`` (the topology text), ``ibnetdiscover -p`` (CA
ports with their LIDs) and ``smpquery pkeys <lid>`` for every CA port, ``--jobs`` of them at
once, and prints one JSON document that ``POST /v1/fabrics/{fabric}/observations`` compares with
intent. The tools inherit the caller's environment, so ``LD_PRELOAD``/``IBSIM_SOCKNAME``/
``SIM_HOST`` make it run against ibsim. When OpenSM protects the ports with an M_Key
(isofabric's opensm.conf does), pass it with ``--m-key`` / ``ISOFABRIC_M_KEY`` (``smpquery -y``).

A port whose read fails (smpquery fails, times out or prints something unexpected) does not stop
the others: it is listed in ``ports`` with an ``error`` and no ``pkeys``, so the service treats
it as not observed (never as a port without P_Keys), and a server that predates the field refuses
the document (422) rather than misread it. The failures are listed on stderr at the end, followed
by the summary line ``read P_Key tables of X of Y ports; Z failed``. Exit status: 0 every port
was read; 7 partial (the document was written, some ports were not read); 2 no document
(``ibnetdiscover`` failed, or a usage error).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Annotated, Any, Protocol, TextIO

import typer

# The reads live in agent.ibdiag (the deploy agent uses them too); named here as they always were.
from agent.ibdiag import (
    COMMAND_TIMEOUT,
    DEFAULT_CONCURRENCY,
    MAD_TIMEOUT_MS,
    CollectError,
    PortRead,
    Tools,
    ca_ports,
    discover_ca_ports,
    one_line,
    pkey_table,
    read_pkey_tables,
    read_ports,
    run_tool,
)

__all__ = [
    "COMMAND_TIMEOUT",
    "DEFAULT_CONCURRENCY",
    "MAD_TIMEOUT_MS",
    "MAX_JOBS",
    "PARTIAL",
    "CollectError",
    "PortProgress",
    "ReadProgress",
    "Tools",
    "ca_ports",
    "collect_app",
    "collect_ib",
    "collect_ib_command",
    "discover_ca_ports",
    "pkey_table",
    "read_pkey_tables",
]

# Exit status: the document was written but some ports could not be read (cli/errors.py;
# not 3-6, which the REST commands give to problem types).
PARTIAL = 7
TROUBLE = 2
# A guard against a typo (--jobs 4000 would start 4000 smpquery at once), not a tuning limit.
MAX_JOBS = 256

collect_app = typer.Typer(help="Read a live fabric's state (run on an SM host).")


class ReadProgress(Protocol):
    """What `collect_ib` reports while it reads: the number of ports, then each port read."""

    def begin(self, total: int) -> None:
        """The CA ports are known: `total` tables will be read."""

    def advance(self, port: PortRead) -> None:
        """One port's read completed (read or failed)."""


def collect_ib(
    *,
    m_key: int | None = None,
    env: Mapping[str, str] | None = None,
    tools: Tools | None = None,
    timeout: float = COMMAND_TIMEOUT,
    jobs: int = DEFAULT_CONCURRENCY,
    progress: ReadProgress | None = None,
) -> dict[str, Any]:
    """Read the fabric through the local HCA; returns the observation document.

    Every CA port is read, `jobs` at once; a port whose read failed is listed with an
    ``error`` (one line) instead of ``pkeys``.

    Args:
        m_key: The M_Key OpenSM protects ports with (``smpquery -y``); None when unprotected.
        env: Environment of the tools (default: this process's, inherited).
        tools: Tool paths.
        timeout: Seconds per tool invocation.
        jobs: smpquery processes at once (at least 1).
        progress: Told the number of ports, then each port as its read completes.

    Raises:
        CollectError: ibnetdiscover is missing, fails or prints something unexpected.
    """
    tools = tools or Tools()
    topology = run_tool([tools.ibnetdiscover], env, timeout)
    ports = discover_ca_ports(env=env, tools=tools, timeout=timeout)
    if progress is not None:
        progress.begin(len(ports))
    reads = read_ports(
        ports,
        m_key=m_key,
        env=env,
        tools=tools,
        timeout=timeout,
        concurrency=jobs,
        on_read=progress.advance if progress is not None else None,
    )
    return {
        "kind": "infiniband",
        "collected_at": datetime.now(UTC).isoformat(),
        "ibnetdiscover": topology,
        "ports": [_port_entry(port) for port in reads],
    }


def _port_entry(port: PortRead) -> dict[str, Any]:
    entry: dict[str, Any] = {"guid": f"0x{port.guid:016x}", "lid": port.lid}
    if port.error is None:
        entry["pkeys"] = [f"0x{key:04x}" for key in port.pkeys]
    else:
        entry["error"] = port.error
    return entry


class PortProgress:
    """A progress bar on `stream` while the ports are read; nothing at all when not `show`.

    A context manager; the bar is removed when it ends (the summary line replaces it). rich is
    imported only when the bar is shown.
    """

    def __init__(self, *, show: bool, stream: TextIO) -> None:
        self.show = show
        self.stream = stream
        self._bar: Any = None
        self._task: Any = None
        self._failed = 0

    def __enter__(self) -> PortProgress:
        if self.show:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn())
            counts = (MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"))
            self._bar = Progress(
                *columns,
                *counts,
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("ibnetdiscover", total=None, failed=0)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def begin(self, total: int) -> None:
        """Switch from discovery to reading `total` P_Key tables."""
        if self._bar is not None:
            self._bar.update(self._task, description="smpquery pkeys", total=total, completed=0)

    def advance(self, port: PortRead) -> None:
        """Count one port read (or failed)."""
        self._failed += not port.ok
        if self._bar is not None:
            self._bar.update(self._task, advance=1, failed=self._failed)


def report_reads(document: Mapping[str, Any]) -> int:
    """Print each failed port, then the summary line, on stderr; returns how many failed."""
    ports = document["ports"]
    failed = [port for port in ports if "error" in port]
    for port in failed:
        typer.echo(f"failed: port {port['guid']} (LID {port['lid']}): {port['error']}", err=True)
    read = len(ports) - len(failed)
    typer.echo(f"read P_Key tables of {read} of {len(ports)} ports; {len(failed)} failed", err=True)
    return len(failed)


def _m_key(text: str | None) -> int | None:
    try:
        return int(text, 0) if text else None
    except ValueError as error:
        raise typer.BadParameter(f"{text!r} is not a number (e.g. 0x1234abcd)") from error


@collect_app.command("ib")
def collect_ib_command(
    out: Annotated[Path | None, typer.Option("--out", help="Write here instead of stdout")] = None,
    m_key: Annotated[
        str | None,
        typer.Option("--m-key", "-y", envvar="ISOFABRIC_M_KEY", help="M_Key for smpquery -y"),
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            max=MAX_JOBS,
            help="smpquery processes at once (ibsim serves at most 10 clients: use <= 6 there)",
        ),
    ] = DEFAULT_CONCURRENCY,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar (the summary is still printed)")
    ] = False,
) -> None:
    """Read ibnetdiscover and every CA port's P_Key table into an observation document.

    A port that cannot be read is listed with an error; the others are still read. Exit 0 when
    every port was read, 7 when some were not (the document is still written), 2 when nothing
    could be read (ibnetdiscover failed).
    """
    key = _m_key(m_key)
    stderr = sys.stderr
    with PortProgress(show=not quiet and stderr.isatty(), stream=stderr) as progress:
        try:
            document = collect_ib(m_key=key, jobs=jobs, progress=progress)
        except CollectError as error:
            typer.echo(f"error: {one_line(str(error))}", err=True)
            raise typer.Exit(TROUBLE) from error
    text = json.dumps(document, indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
    if report_reads(document):
        raise typer.Exit(PARTIAL)
