"""On the master: SIGHUP, wait for the sweep, read the P_Key tables back, roll back on a problem.

The model is the one parsed from the signed partitions.conf (`Deployment.parsed`); the agent
trusts nothing else from the server. A read-back covers every CA port with ``--full``, else the
ports whose membership changed plus a random sample of the others (``isofabric collect ib``'s
code, at most 4 smpquery at once). A configuration error in the log written since the SIGHUP,
or any port whose table differs from the model, is a problem: the previous generation of the
files this deployment installed is restored (``<name>.prev``), OpenSM is signalled again and the
tables are read back against the previous model, on the same ports.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent.cycle import AgentSettings, Deployment, Report, SmHost
from agent.install import restore_previous
from agent.manifest import OPTIONS, PARTITIONS
from agent.prepare import read_text
from agent.sm import SmError
from policies.infiniband.deploy import Mismatch, changed_ports, compare_tables, expected_tables
from policies.infiniband.opensm_conf import configuration_errors, management_keys
from policies.infiniband.parse_partitions import ParsedPartitions, parse_partitions_conf

Ports = list[tuple[int, int]]


@dataclass(frozen=True)
class Verification:
    """What the sweep and read-back after an install showed."""

    errors: list[str]
    mismatches: tuple[Mismatch, ...]
    ports: Ports

    @property
    def problem(self) -> str:
        """One line naming the log errors and mismatches ("" when none)."""
        parts = []
        if self.errors:
            first = self.errors[0].strip()
            parts.append(f"OpenSM logged {len(self.errors)} configuration error(s): {first}")
        if self.mismatches:
            parts.append(
                f"{len(self.mismatches)} of {len(self.ports)} port(s) read back differ from "
                "the model"
            )
        return "; ".join(parts)


@dataclass
class Master:
    """Sweep, verify and roll back through the SM host."""

    settings: AgentSettings
    host: SmHost
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)

    def verify(self, deployment: Deployment, self_guid: int | None) -> Verification:
        """SIGHUP, wait for ``SUBNET UP``, read back (`SmError` if a step cannot be done)."""
        errors = configuration_errors(self.hup_and_wait(deployment, "sweep"))
        ports = self.select(deployment, self.host.ca_ports())
        mismatches = self.read_back(deployment, deployment.parsed, self_guid, ports, "readback")
        return Verification(errors, mismatches, ports)

    def hup_and_wait(self, deployment: Deployment, step: str) -> str:
        """SIGHUP OpenSM and return the log text up to the sweep's end; timed as `step`."""
        assert deployment.process is not None
        mark = self.clock()
        offset = self.host.log_offset()
        self.host.hup(deployment.process)
        text = self.host.wait_for_sweep(offset, self.settings.sweep_timeout, deployment.process)
        deployment.durations[step] = self.clock() - mark
        return text

    def read_back(
        self,
        deployment: Deployment,
        model: ParsedPartitions,
        self_guid: int | None,
        ports: Ports,
        step: str,
    ) -> tuple[Mismatch, ...]:
        """The ports of `ports` whose P_Key table differs from `model`; timed as `step`."""
        mark = self.clock()
        tables = self.host.pkey_tables(ports, deployment.m_key)
        expected = expected_tables(model, [guid for guid, _lid in ports], self_guid)
        deployment.durations[step] = self.clock() - mark
        return compare_tables(expected, tables)

    def select(self, deployment: Deployment, ports: Ports) -> Ports:
        """All ports with ``--full``; else the changed ports plus a random sample of the rest."""
        if self.settings.full:
            return ports
        changed = changed_ports(deployment.previous, deployment.parsed)
        rest = [port for port in ports if port[0] not in changed]
        sample = self.rng.sample(rest, min(self.settings.sample, len(rest)))
        return sorted([p for p in ports if p[0] in changed] + sample, key=lambda p: p[1])

    def roll_back(
        self,
        deployment: Deployment,
        found: Verification,
        files: list[str],
        previous_digest: str | None,
        self_guid: int | None,
    ) -> Report:
        """Restore `files` from ``.prev``, sweep, read back against the previous model.

        Returns ``rolled_back`` (observed digest: `previous_digest` when the previous tables
        are back), or ``failed`` when there is no previous generation to restore.
        """
        conf_dir = self.settings.conf_dir
        restored = [name for name in files if restore_previous(conf_dir / name)]
        report = Report(
            "failed", deployment.digest, f"{found.problem}; no previous generation to restore",
            "master", None, found.mismatches, deployment.durations, len(found.ports),
        )  # fmt: skip
        if not restored:
            return report
        report.state, report.ports_read = "rolled_back", 2 * len(found.ports)
        back, verdict = self._verify_previous(deployment, found.ports, self_guid, conf_dir)
        report.observed_digest = previous_digest if back else None
        report.detail = f"{found.problem}; restored {', '.join(restored)}; {verdict}"
        return report

    def _verify_previous(
        self, deployment: Deployment, ports: Ports, self_guid: int | None, conf_dir: Path
    ) -> tuple[bool, str]:
        previous = parse_partitions_conf(read_text(conf_dir / PARTITIONS))
        deployment.m_key = management_keys(read_text(conf_dir / OPTIONS))[0]
        try:
            self.hup_and_wait(deployment, "rollback_sweep")
            again = self.read_back(deployment, previous, self_guid, ports, "rollback_readback")
        except SmError as error:
            return False, f"the previous tables were not verified: {error}"
        if again:
            return False, f"the previous model still mismatches on {len(again)} port(s)"
        return True, f"the previous tables are back on {len(ports)} port(s)"
