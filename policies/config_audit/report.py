"""What an audit reports: the formats, drift per segment, the report and its verdict."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from policies.findings import Finding, Severity
from policies.verdict import Counterexample, ReachabilityEdge


class AuditFormat(StrEnum):
    """The configuration files an audit accepts."""

    PARTITIONS = "partitions"
    CONFIG_DB = "config_db"
    FRR = "frr"


# What an audit's reachability is derived from, per format: an empty list means "none of this".
REACHABILITY_SCOPE = {
    AuditFormat.PARTITIONS: "every P_Key's members (the whole fabric)",
    AuditFormat.CONFIG_DB: "this leaf's VLAN members (L2 only: routed reachability is in the "
    "leaf's frr.conf)",
    AuditFormat.FRR: "this leaf's VRF route-target imports",
}


@dataclass(frozen=True, slots=True)
class Drift:
    """What the file adds to (`added`) or lacks from (`missing`) one owner's segment.

    `owner` is ``tenant:acme`` (None for a segment no owner holds); `segment` is the P_Key
    (``0x0101``), the VLAN (``Vlan102``) or the VRF (``Vrf50001``). Items are port GUIDs, switch
    ports or route targets; `changed` lists GUIDs whose membership (full/limited) differs.
    """

    owner: str | None
    segment: str
    added: tuple[str, ...]
    missing: tuple[str, ...]
    changed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AuditReport:
    """The outcome of one audit; `holds` iff the file allows no isolation violation."""

    findings: tuple[Finding, ...]
    drift: tuple[Drift, ...]
    counterexamples: tuple[Counterexample, ...]
    reachability: tuple[ReachabilityEdge, ...] = ()

    @property
    def holds(self) -> bool:
        """True when no counterexample was found."""
        return not self.counterexamples

    @property
    def critical(self) -> bool:
        """True when any finding is critical."""
        return any(f.severity is Severity.CRITICAL for f in self.findings)
