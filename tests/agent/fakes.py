"""Fakes for the agent's unit tests: a signing server, an OpenSM host that programs what it reads.

`FakeHost` behaves like OpenSM on a tiny fabric: a SIGHUP makes it read partitions.conf from the
conf dir and program the P_Key tables `expected_tables` says; `lie_for` makes one port's table
read back wrong (once or always).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.client import ServerError
from agent.cycle import AgentSettings
from agent.manifest import MANIFEST_TYPE, PAYLOAD_TYPE
from agent.sm import SmError, SmProcess
from agent.trust import Trust
from policies.evidence.dsse import sign_envelope
from policies.infiniband.deploy import expected_tables
from policies.infiniband.parse_partitions import parse_partitions_conf
from policies.infiniband.render import DEFAULT_STATEMENT

FABRIC = "ib-east"
SM_GUID = 0x99
PORTS = [(0xA1, 1), (0xA2, 2), (0xB1, 3), (0xB2, 4), (SM_GUID, 5)]
OPTIONS = "qos TRUE\npart_enforce both\nallow_both_pkeys FALSE\nm_key 0x00000000000000ab\n"


def partitions(*statements: str) -> str:
    return "\n".join(["# rendered", DEFAULT_STATEMENT, *statements]) + "\n"


ACME = "tenant_acme=0x0101, ipoib :\n    0x00000000000000a1=full,\n    0x00000000000000a2=full ;"
GLOBEX = "tenant_globex=0x0102, ipoib :\n    0x00000000000000b1=full ;"


def bundle(
    parts: str, options: str = OPTIONS, qos: str = "qos-ulps\nend-qos-ulps\n"
) -> dict[str, bytes]:
    return {
        "opensm/opensm.conf": options.encode(),
        "opensm/partitions.conf": parts.encode(),
        "opensm/qos-policy.conf": qos.encode(),
    }


def sign(document: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    return sign_envelope(document, key, PAYLOAD_TYPE)


def manifest_document(
    files: dict[str, bytes], fabric: str = FABRIC, sequence: int = 1, digest: str | None = None
) -> dict[str, Any]:
    digest = digest or "sha256:" + hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()
    listed = [
        {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        for path, data in sorted(files.items())
    ]
    return {
        "_type": MANIFEST_TYPE,
        "fabric": fabric,
        "snapshot_digest": digest,
        "files": listed,
        "sequence": sequence,
    }


@dataclass
class FakeServer:
    """Serves one signed snapshot at a time; keeps every snapshot's files by digest.

    Each `publish` signs with the next `sequence` (the service's audit index of the change), unless
    the test names one. `digest` names the snapshot (default: a hash of the files): the service
    re-signs a snapshot with another opensm.conf when the M_Key changes.
    """

    key: Ed25519PrivateKey
    snapshots: dict[str, dict[str, bytes]] = field(default_factory=dict)
    envelope: dict[str, Any] = field(default_factory=dict)
    reports: list[dict[str, Any]] = field(default_factory=list)
    heartbeats: int = 0  # reports that repeated the last one (the server only moves last-seen)
    tamper: dict[str, bytes] = field(default_factory=dict)
    down: bool = False
    reports_down: bool = False
    sequence: int = 0
    transitions: list[dict[str, Any]] = field(default_factory=list)
    transitions_down: bool = False

    def publish(
        self,
        files: dict[str, bytes],
        *,
        key: Ed25519PrivateKey | None = None,
        sequence: int | None = None,
        digest: str | None = None,
        epoch: int | None = None,
    ) -> str:
        self.sequence = self.sequence + 1 if sequence is None else sequence
        document = manifest_document(files, sequence=self.sequence, digest=digest)
        if epoch is not None:
            document["epoch"] = epoch
        self.snapshots[document["snapshot_digest"]] = dict(files)
        self.envelope = sign(document, key or self.key)
        return str(document["snapshot_digest"])

    def key_transitions(self) -> list[Any]:
        if self.down or self.transitions_down:
            raise ServerError("connection refused")
        return list(self.transitions)

    def signed_manifest(self) -> dict[str, Any]:
        if self.down:
            raise ServerError("connection refused")
        return self.envelope

    def artifact(self, digest: str, path: str) -> bytes:
        if self.down:
            raise ServerError("connection refused")
        return self.tamper.get(path, self.snapshots[digest][path])

    def post_report(self, report: dict[str, Any]) -> dict[str, Any]:
        if self.reports_down:
            raise ServerError("503 Service Unavailable", 503)
        if self.reports and _same_state(self.reports[-1], report):
            self.heartbeats += 1  # as the service does: a repeat changes no state
            return {"id": len(self.reports), **report, "changed_state": False}
        self.reports.append(report)
        return {"id": len(self.reports), **report}

    @property
    def states(self) -> list[str]:
        return [r["state"] for r in self.reports]


@dataclass
class FakeHost:
    """OpenSM on a five-port fabric, reading `conf_dir` at every SIGHUP."""

    conf_dir: Path
    role_name: str = "master"
    running: bool = True
    start_ticks: int = 100
    started_at: float = 0.0
    argv: tuple[str, ...] = ()
    log_lines: list[str] = field(default_factory=list)
    sweep_errors: list[str] = field(default_factory=list)
    programmed: dict[int, frozenset[int]] = field(default_factory=dict)
    lie_for: int | None = None
    lie_times: int = 0
    hups: int = 0
    reads: int = 0

    def __post_init__(self) -> None:
        if not self.argv:
            d = self.conf_dir
            self.argv = ("/usr/sbin/opensm", "-F", f"{d}/opensm.conf", "-P", f"{d}/partitions.conf")
            self.argv += ("-Q", "-Y", f"{d}/qos-policy.conf", "-f", f"{d}/opensm.log")
        self.program()

    def program(self) -> None:
        path = self.conf_dir / "partitions.conf"
        text = path.read_text() if path.exists() else ""
        model = parse_partitions_conf(text)
        self.programmed = expected_tables(model, [g for g, _ in PORTS], SM_GUID)

    def process(self) -> SmProcess:
        if not self.running:
            raise SmError("OpenSM is not running: no process 4242")
        return SmProcess(4242, self.start_ticks, self.started_at, self.argv, self.conf_dir)

    def hup(self, process: SmProcess) -> None:
        self.hups += 1
        self.program()
        self.log_lines += [*self.sweep_errors, "SUBNET UP"]

    def role(self, m_key: int | None) -> tuple[str, int | None]:
        return self.role_name, SM_GUID

    def log_offset(self) -> int:
        return len(self.log_lines)

    def wait_for_sweep(self, offset: int, timeout: float, process: SmProcess) -> str:
        text = "\n".join(self.log_lines[offset:])
        if "SUBNET UP" not in text:
            raise SmError("no 'SUBNET UP' within the timeout")
        return text

    def ca_ports(self) -> list[tuple[int, int]]:
        return list(PORTS)

    def pkey_tables(self, ports, m_key):
        self.reads += len(ports)
        tables = {guid: sorted(self.programmed.get(guid, ())) for guid, _ in ports}
        if self.lie_for in tables and self.lie_times:
            self.lie_times -= 1
            tables[self.lie_for] = [*tables[self.lie_for], 0x8777]
        return tables


class Clock:
    """A monotonic clock tests move by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def settings(conf_dir: Path, key: Ed25519PrivateKey, **changes: Any) -> AgentSettings:
    base = AgentSettings(
        conf_dir=conf_dir, fabric=FABRIC, keys=Trust.of([key.public_key()]), full=True
    )
    return AgentSettings(**{**base.__dict__, **changes})


def _same_state(last: dict[str, Any], report: dict[str, Any]) -> bool:
    fields = ("state", "digest", "observed_digest", "role", "mismatches")
    return all(last.get(name) == report.get(name) for name in fields)
