"""The deploy agent's loop against a real service, with a standby OpenSM stand-in (bench_ufm).

The agent's own code runs unchanged: `agent.loop.run_loop` (one cycle every ``--interval``
seconds, sooner when a coalesced apply falls due), `agent.opensm.Agent` (fetch and verify the
signed manifest, at most one apply per ``--min-interval``, download the changed files by
digest, parse partitions.conf, install atomically, report) and `agent.client.ServerClient`
(HTTP). Only OpenSM is a stand-in: a standby whose command line names the conf dir's files. A
standby installs and never sweeps (agent/opensm.py), so no fabric is needed; a master would
sweep and read back on top, which makes each apply longer, not more frequent.

It prints one JSON line a call to the service on stdout (monotonic clock, shared with the
parent on Linux), once the call has answered: ``{"event": "fetch", "start": ..., "t": ...,
"digest": ...}`` for each signed manifest fetched (the snapshot it names; ``fetch-failed``
with the error when the call failed), ``{"event": "download", "start": ..., "t": ...,
"digest": ..., "path": ...}`` for each file downloaded, and ``{"event": "report", "t": ...,
"state": ..., "digest": ..., "detail": ...}`` for each report posted.

    python -m tests.benchmarks.ufm_agent --server URL --fabric F --target T --conf-dir DIR
        --public-key KEYRING --interval S --min-interval S   # token in ISOFABRIC_TOKEN
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.client import ServerClient, ServerError
from agent.cycle import AgentSettings
from agent.loop import run_loop
from agent.opensm import Agent
from agent.sm import SmError, SmProcess
from agent.trust import Trust


def event(name: str, **fields: Any) -> None:
    """One JSON line on stdout, flushed at once (the parent reads them as they come)."""
    print(json.dumps({"event": name, "t": time.monotonic(), **fields}), flush=True)


@dataclass(frozen=True)
class CountingClient(ServerClient):
    """`ServerClient`, saying each signed-manifest fetch, download and report."""

    def signed_manifest(self) -> dict[str, Any]:
        start = time.monotonic()
        try:
            envelope = super().signed_manifest()
        except ServerError as error:
            event("fetch-failed", start=start, error=str(error)[:200])
            raise
        event("fetch", start=start, digest=_snapshot_of(envelope))
        return envelope

    def artifact(self, digest: str, path: str) -> bytes:
        start = time.monotonic()
        data = super().artifact(digest, path)
        event("download", start=start, digest=digest, path=path, bytes=len(data))
        return data

    def post_report(self, report: dict[str, Any]) -> dict[str, Any]:
        answer = super().post_report(report)
        detail = str(report.get("detail", ""))[:300]
        event("report", state=report.get("state"), digest=report.get("digest"), detail=detail)
        return answer


def _snapshot_of(envelope: dict[str, Any]) -> str | None:
    """The snapshot digest the envelope's payload names (not verified: the agent does that)."""
    try:
        return str(json.loads(base64.b64decode(envelope["payload"]))["snapshot_digest"])
    except (KeyError, TypeError, ValueError):
        return None


class StandbyHost:
    """OpenSM as a standby reading its files from `conf_dir`: installs only, never sweeps."""

    def __init__(self, conf_dir: Path) -> None:
        self.conf_dir = conf_dir
        self.started_at = time.time()
        d = conf_dir
        self.argv: tuple[str, ...] = ("/usr/sbin/opensm", "-F", f"{d}/opensm.conf")
        self.argv += ("-P", f"{d}/partitions.conf", "-Q", "-Y", f"{d}/qos-policy.conf")

    def process(self) -> SmProcess:
        return SmProcess(os.getpid(), 1, self.started_at, self.argv, self.conf_dir)

    def hup(self, process: SmProcess) -> None:
        """A standby reloads its options; nothing to do here."""

    def role(self, m_key: int | None) -> tuple[str, int | None]:
        return "standby", None

    def log_offset(self) -> int:
        return 0

    def wait_for_sweep(self, offset: int, timeout: float, process: SmProcess) -> str:
        raise SmError("a standby does not sweep")

    def ca_ports(self) -> list[tuple[int, int]]:
        return []

    def pkey_tables(
        self, ports: Sequence[tuple[int, int]], m_key: int | None
    ) -> dict[int, list[int]]:
        return {}


def main(argv: list[str] | None = None) -> None:
    """Run the agent's loop until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("--server", "--fabric", "--target"):
        parser.add_argument(name, required=True)
    parser.add_argument("--conf-dir", type=Path, required=True)
    parser.add_argument("--public-key", type=Path, required=True)
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--min-interval", type=float, required=True)
    args = parser.parse_args(argv)
    settings = AgentSettings(
        args.conf_dir, args.fabric, Trust.load(args.public_key), min_interval=args.min_interval
    )
    client = CountingClient(args.server, os.environ["ISOFABRIC_TOKEN"], args.fabric, args.target)
    agent = Agent(
        settings,
        client,
        StandbyHost(args.conf_dir),
        say=lambda line: print(f"agent: {line}", file=sys.stderr, flush=True),
    )
    run_loop(agent, args.interval)


if __name__ == "__main__":
    main()
