"""`isofabric collect ib`: read a live InfiniBand fabric's P_Key tables on a Subnet Manager host.

``isofabric collect ib`` runs ``ibnetdiscover`` (the topology text), ``ibnetdiscover -p`` (CA
ports with their LIDs) and ``smpquery pkeys <lid>`` for every CA port, and prints one JSON
document that ``POST /v1/fabrics/{fabric}/observations`` compares with intent. The tools inherit
the caller's environment, so ``LD_PRELOAD``/``IBSIM_SOCKNAME``/``SIM_HOST`` make it run against
ibsim. When OpenSM protects the ports with an M_Key (isofabric's opensm.conf does), pass it with
``--m-key`` / ``ISOFABRIC_M_KEY`` (``smpquery -y``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

# The reads live in api.ibdiag (the deploy agent uses them too); named here as they always were.
from api.ibdiag import (
    COMMAND_TIMEOUT,
    DEFAULT_CONCURRENCY,
    MAD_TIMEOUT_MS,
    CollectError,
    Tools,
    ca_ports,
    discover_ca_ports,
    pkey_table,
    read_pkey_tables,
    run_tool,
)

__all__ = [
    "COMMAND_TIMEOUT",
    "DEFAULT_CONCURRENCY",
    "MAD_TIMEOUT_MS",
    "CollectError",
    "Tools",
    "ca_ports",
    "collect_app",
    "collect_ib",
    "collect_ib_command",
    "discover_ca_ports",
    "pkey_table",
    "read_pkey_tables",
]

collect_app = typer.Typer(help="Read a live fabric's state (run on an SM host).")


def collect_ib(
    *,
    m_key: int | None = None,
    env: Mapping[str, str] | None = None,
    tools: Tools | None = None,
    timeout: float = COMMAND_TIMEOUT,
) -> dict[str, Any]:
    """Read the fabric through the local HCA; returns the observation document.

    Args:
        m_key: The M_Key OpenSM protects ports with (``smpquery -y``); None when unprotected.
        env: Environment of the tools (default: this process's, inherited).
        tools: Tool paths.
        timeout: Seconds per tool invocation.

    Raises:
        CollectError: a tool is missing, fails or prints something unexpected.
    """
    tools = tools or Tools()
    topology = run_tool([tools.ibnetdiscover], env, timeout)
    ports = discover_ca_ports(env=env, tools=tools, timeout=timeout)
    tables = read_pkey_tables(ports, m_key=m_key, env=env, tools=tools, timeout=timeout)
    return {
        "kind": "infiniband",
        "collected_at": datetime.now(UTC).isoformat(),
        "ibnetdiscover": topology,
        "ports": [
            {"guid": f"0x{guid:016x}", "lid": lid, "pkeys": [f"0x{k:04x}" for k in tables[guid]]}
            for guid, lid in ports
        ],
    }


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
) -> None:
    """Read ibnetdiscover and every CA port's P_Key table into an observation document."""
    try:
        document = collect_ib(m_key=_m_key(m_key))
    except CollectError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(2) from error
    text = json.dumps(document, indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
