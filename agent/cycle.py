"""What a cycle of the agent works with and produces: settings, the report, the throttle.

The server and the SM host are protocols, so unit tests drive the cycle (agent/opensm.py)
with fakes; `agent.client.ServerClient` and `agent.sm.LocalSmHost` are the real ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agent.client import ServerError
from agent.manifest import Manifest
from agent.sm import SmProcess
from agent.trust import Trust
from policies.infiniband.deploy import Mismatch
from policies.infiniband.opensm_conf import OptionChange
from policies.infiniband.parse_partitions import ParsedPartitions

MAX_DETAIL = 4096
MAX_MISMATCHES = 10_000  # what a report may carry; the detail counts them all
DEFAULT_SAMPLE = 16
DEFAULT_SWEEP_TIMEOUT = 60.0
DEFAULT_MIN_INTERVAL = 5.0


class Server(Protocol):
    """The service's routes the agent calls (agent/client.py)."""

    def signed_manifest(self) -> dict[str, Any]:
        """The DSSE envelope of the current manifest."""

    def key_transitions(self) -> list[Any]:
        """The service's key transition statements (agent/trust.py)."""

    def artifact(self, digest: str, path: str) -> bytes:
        """One file of snapshot `digest`."""

    def post_report(self, report: dict[str, Any]) -> dict[str, Any]:
        """Store one report."""


class SmHost(Protocol):
    """The local OpenSM and the fabric through this host's HCA (agent/sm.py)."""

    def process(self) -> SmProcess:
        """The running OpenSM (`SmError` when none)."""

    def hup(self, process: SmProcess) -> None:
        """SIGHUP it."""

    def role(self, m_key: int | None) -> tuple[str, int | None]:
        """master, standby or unknown, and the local port GUID."""

    def log_offset(self) -> int:
        """The log's size now."""

    def wait_for_sweep(self, offset: int, timeout: float, process: SmProcess) -> str:
        """Log text up to the first ``SUBNET UP`` after `offset`."""

    def ca_ports(self) -> list[tuple[int, int]]:
        """(GUID, LID) of every CA port."""

    def pkey_tables(
        self, ports: Sequence[tuple[int, int]], m_key: int | None
    ) -> dict[int, list[int]]:
        """The P_Key tables of `ports`."""


@dataclass(frozen=True)
class AgentSettings:
    """What the command line configures."""

    conf_dir: Path
    fabric: str
    keys: Trust
    full: bool = False
    sample: int = DEFAULT_SAMPLE
    sweep_timeout: float = DEFAULT_SWEEP_TIMEOUT
    min_interval: float = DEFAULT_MIN_INTERVAL


@dataclass
class Report:
    """One report to ``POST …/targets/{name}/reports`` (the issue-11 contract's fields)."""

    state: str
    digest: str | None
    detail: str
    role: str = "unknown"
    observed_digest: str | None = None
    mismatches: tuple[Mismatch, ...] = ()
    durations: dict[str, float] = field(default_factory=dict)
    ports_read: int = 0
    phase: int | None = None  # a RoCE leaf's: the phase of the snapshot it applied or tried
    covers: tuple[str, ...] | None = None  # a RoCE leaf's: config_db, and frr if it deploys FRR

    def body(self) -> dict[str, Any]:
        """The JSON body (detail cut to 4096 characters, durations >= 0; phase, covers when set)."""
        body: dict[str, Any] = {
            "state": self.state,
            "digest": self.digest,
            "observed_digest": self.observed_digest,
            "role": self.role,
            "mismatches": [m.as_report() for m in self.mismatches[:MAX_MISMATCHES]],
            "detail": self.detail[:MAX_DETAIL],
            "durations": {k: round(max(v, 0.0), 6) for k, v in self.durations.items()},
            "ports_read": self.ports_read,
        }
        if self.phase is not None:
            body["phase"] = self.phase
        if self.covers is not None:
            body["covers"] = list(self.covers)
        return body


@dataclass(frozen=True)
class CycleResult:
    """What a cycle did: ``nothing``, ``waiting`` (coalescing), ``unreachable``, or a report."""

    outcome: str
    detail: str = ""
    report: Report | None = None

    @property
    def ok(self) -> bool:
        """True for nothing to do and for applied (``--once`` exits 0 then)."""
        return self.outcome in ("nothing", "applied")


class ReportOutbox:
    """Reports waiting for the service, oldest first, and the one queued last.

    A report the service did not take stays and is sent first at the next cycle. An idle agent
    `repeat`s its last report every cycle (unless one is waiting): the service takes the repeat
    as a sign of life (``last_seen_at``), so an idle, healthy agent and a dead one differ.
    """

    def __init__(
        self, post: Callable[[dict[str, Any]], dict[str, Any]], say: Callable[[str], None]
    ) -> None:
        self.post, self.say = post, say
        self.unsent: list[dict[str, Any]] = []
        self.last: dict[str, Any] | None = None

    def queue(self, body: dict[str, Any]) -> None:
        """Queue `body` and send every waiting report."""
        self.last = body
        self.unsent.append(body)
        self.send()

    def repeat(self, body: dict[str, Any]) -> None:
        """Send `body` again, unless a report is waiting (the service moves last-seen only)."""
        if not self.unsent:
            self.queue(body)

    def send(self) -> None:
        """POST the waiting reports in order; stop at the first the service does not take."""
        while self.unsent:
            try:
                self.post(self.unsent[0])
            except ServerError as error:
                self.say(f"report not delivered, sent again next cycle: {error}")
                return
            self.unsent.pop(0)


class Throttle:
    """At most one apply per `min_interval` seconds of `clock`."""

    def __init__(self, min_interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_interval, self.clock = min_interval, clock
        self.last: float | None = None

    def remaining(self) -> float:
        """Seconds until the next apply may start (0 when it may start now)."""
        if self.last is None:
            return 0.0
        return max(0.0, self.last + self.min_interval - self.clock())

    def mark(self) -> None:
        """An apply starts now."""
        self.last = self.clock()


class RefusedError(Exception):
    """The manifest or a file may not be installed (report ``refused``).

    `lasting`: the signed manifest itself is at fault (a fail-open file), so the same envelope
    would be refused again; False when the transport is (a download whose sha256 differs from
    the manifest's), which the next cycle tries again.
    """

    def __init__(self, message: str, *, lasting: bool = True) -> None:
        super().__init__(message)
        self.lasting = lasting


class FailedError(Exception):
    """The apply cannot go on; nothing more is installed (report ``failed``)."""


@dataclass
class Deployment:
    """What one apply works with: files by conf-dir name, the models, the running OpenSM.

    `parsed` is the model of the signed partitions.conf, `previous` the one it replaces;
    `changed` names the files this cycle installs; `restart` the restart-only options that
    differ from what OpenSM was started with.
    """

    manifest: Manifest
    contents: dict[str, bytes]
    changed: list[str]
    parsed: ParsedPartitions
    previous: ParsedPartitions
    restart: tuple[OptionChange, ...] = ()
    process: SmProcess | None = None
    m_key: int | None = None
    durations: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def digest(self) -> str:
        """The snapshot being deployed."""
        return self.manifest.digest
