"""The infiniband-diags reads ``isofabric collect ib`` and the deploy agent share.

``ibnetdiscover -p`` lists the CA ports with their LIDs; ``smpquery pkeys <lid>`` reads one
port's P_Key table. The tools inherit the caller's environment (so ``LD_PRELOAD``,
``IBSIM_SOCKNAME`` and ``SIM_HOST`` make them run against ibsim) and are looked up on PATH. This
module imports nothing of the service, so the agent (agent/) starts fast on an SM host.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

MAD_TIMEOUT_MS = 2000
# smpquery processes at once (ibsim serves at most 10 clients in all).
DEFAULT_CONCURRENCY = 4
COMMAND_TIMEOUT = 60.0
# A failed read's message, on one line, is cut to this (it is the stderr of smpquery).
ERROR_LIMIT = 1000
# CA  23  1 0x0000000000100025 4x SDR - SW  3  9 0x0000000000200001 ( 'stor02 mlx5_0' - 'leaf02' )
_CA_LINE = re.compile(r"^CA\s+(?P<lid>\d+)\s+(?P<port>\d+)\s+(?P<guid>0x[0-9a-fA-F]+)\s")
# "   0: 0xffff 0x0000 ..." (smpquery pkeys)
_PKEY_ROW = re.compile(r"^\s*\d+:\s+((?:0x[0-9a-fA-F]{4}\s*)+)$")


class CollectError(RuntimeError):
    """A diagnostic tool failed or printed something unexpected."""


@dataclass(frozen=True)
class Tools:
    """Where the infiniband-diags tools are (names are looked up on PATH)."""

    ibnetdiscover: str = "ibnetdiscover"
    smpquery: str = "smpquery"


def ca_ports(report: str) -> list[tuple[int, int]]:
    """(port GUID, LID) of every CA port in ``ibnetdiscover -p`` output, each GUID once."""
    seen: dict[int, int] = {}
    for line in report.splitlines():
        match = _CA_LINE.match(line.strip())
        if match:
            seen.setdefault(int(match["guid"], 16), int(match["lid"]))
    return sorted(seen.items(), key=lambda item: item[1])


def pkey_table(text: str) -> list[int]:
    """The non-empty entries (base != 0) of ``smpquery pkeys`` output, in table order."""
    keys: list[int] = []
    for line in text.splitlines():
        match = _PKEY_ROW.match(line)
        if match:
            keys += [int(word, 16) for word in match.group(1).split()]
    if not keys and "capacity" not in text:
        raise CollectError(f"unexpected smpquery pkeys output:\n{text}")
    return [key for key in keys if key & 0x7FFF]


def run_tool(argv: list[str], env: Mapping[str, str] | None, timeout: float) -> str:
    """Run one tool; its stdout, or `CollectError` naming it, its status and its stderr."""
    try:
        done = subprocess.run(
            argv,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CollectError(f"{' '.join(argv)}: {error}") from error
    if done.returncode != 0:
        raise CollectError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def discover_ca_ports(
    *,
    env: Mapping[str, str] | None = None,
    tools: Tools | None = None,
    timeout: float = COMMAND_TIMEOUT,
) -> list[tuple[int, int]]:
    """(port GUID, LID) of every CA port, from ``ibnetdiscover -p``, sorted by LID."""
    return ca_ports(run_tool([(tools or Tools()).ibnetdiscover, "-p"], env, timeout))


@dataclass(frozen=True, slots=True)
class PortRead:
    """One CA port's read: its non-empty P_Keys, or why they could not be read (`error`)."""

    guid: int
    lid: int
    pkeys: tuple[int, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True iff the table was read."""
        return self.error is None


def one_line(text: str, limit: int = ERROR_LIMIT) -> str:
    """`text` on one line (whitespace runs made one space), cut to `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def read_ports(
    ports: Sequence[tuple[int, int]],
    *,
    m_key: int | None = None,
    env: Mapping[str, str] | None = None,
    tools: Tools | None = None,
    timeout: float = COMMAND_TIMEOUT,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_read: Callable[[PortRead], None] | None = None,
) -> list[PortRead]:
    """Read every (GUID, LID) port's P_Key table, at most `concurrency` smpquery at once.

    A port whose read fails (smpquery missing, failing, timing out or printing something
    unexpected) becomes a `PortRead` with `error` set, and the other ports are still read. A
    port with LID 0 (not yet swept) reads as an empty table. `on_read` is called in the
    caller's thread as each read completes. The result keeps the order of `ports`.
    """
    tools = tools or Tools()
    key_args = ["-y", f"0x{m_key:016x}"] if m_key else []

    def read(guid: int, lid: int) -> PortRead:
        if not lid:
            return PortRead(guid, lid)
        argv = [tools.smpquery, "-t", str(MAD_TIMEOUT_MS), *key_args, "pkeys", str(lid)]
        try:
            return PortRead(guid, lid, tuple(pkey_table(run_tool(argv, env, timeout))))
        except CollectError as error:
            return PortRead(guid, lid, error=one_line(str(error)))

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = [pool.submit(read, guid, lid) for guid, lid in ports]
        for future in as_completed(futures):
            if on_read is not None:
                on_read(future.result())
        return [future.result() for future in futures]


def read_pkey_tables(
    ports: Sequence[tuple[int, int]],
    *,
    m_key: int | None = None,
    env: Mapping[str, str] | None = None,
    tools: Tools | None = None,
    timeout: float = COMMAND_TIMEOUT,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> dict[int, list[int]]:
    """The non-empty P_Keys of each (GUID, LID) port, with at most `concurrency` smpquery at once.

    All or nothing (the deploy agent's check): every port is read (`read_ports`), then the
    first failed one, in the order of `ports`, is raised. A port with LID 0 (not yet swept)
    reads as an empty table. ibsim serves at most 10 clients in all (SMs included), hence the
    small default. The result keeps the order of `ports`.

    Raises:
        CollectError: smpquery is missing, fails or prints something unexpected.
    """
    reads = read_ports(
        ports, m_key=m_key, env=env, tools=tools, timeout=timeout, concurrency=concurrency
    )
    for port in reads:
        if port.error is not None:
            raise CollectError(port.error)
    return {port.guid: list(port.pkeys) for port in reads}
