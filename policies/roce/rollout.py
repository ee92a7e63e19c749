"""Phased rollout of a RoCE fabric's desired snapshot across its leaves.

Agents pull independently, so a change is N deployments that land in any order. Access is
removed before anything else changes: while some leaf still has to remove access (a port leaving
a tenant VLAN, a route-target import of a revoked grant or peering), the service publishes
phase 1 of the desired snapshot, in which agents apply only those removals; once every such
leaf applied them, phase 2 (the whole snapshot). An onboarding removes nothing, so it goes to
phase 2 at once; a leaf that removes nothing never holds the fabric in phase 1, even when down.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from policies.roce.frr_running import removed_imports
from policies.roce.ownership import LeafOwnership
from policies.roce.patch import access_removals
from policies.roce.render_sonic import ConfigDb

ACCESS_REMOVALS = 1  # phase 1: ports leave tenant VLANs, revoked route-target imports go
WHOLE_SNAPSHOT = 2  # phase 2: everything else


@dataclass(frozen=True)
class LeafFiles:
    """One leaf's artifacts of one snapshot, as rendered: config_db.json, frr.conf, ownership."""

    config_db: str
    frr_conf: str
    ownership: str


@dataclass(frozen=True)
class TargetProgress:
    """What the fabric's phase depends on for one leaf.

    `affected`: going from its deployed snapshot to the desired one removes access on it.
    `applied_phase`: the phase of the desired snapshot it applied (1 or 2), None if neither.
    """

    affected: bool
    applied_phase: int | None


def removes_access(deployed: LeafFiles, desired: LeafFiles) -> bool:
    """Whether moving the leaf from `deployed` to `desired` removes access, so needs phase 1.

    True when `deployed`'s config_db.json has VLAN_MEMBER keys that `desired`'s lacks (what
    `policies.roce.patch.access_removals` removes in phase 1, owned keys per `desired`'s
    ownership.json) or its frr.conf has route-target imports the same block of `desired`'s
    lacks (`policies.roce.frr_running.removed_imports`).

    Raises:
        InvalidValueError: `desired.ownership` is not a leaf ownership document.
    """
    ownership = LeafOwnership.from_json(desired.ownership)
    if (deployed.config_db, deployed.frr_conf) == (desired.config_db, desired.frr_conf):
        return False  # most leaves of a change: their files are byte for byte the same
    running: ConfigDb = json.loads(deployed.config_db)
    target: ConfigDb = json.loads(desired.config_db)
    if access_removals(running, target, ownership):
        return True
    return bool(removed_imports(deployed.frr_conf, desired.frr_conf))


def applied_phase(
    *, desired: str, deployed: str | None, phase: int | None, phase_digest: str | None
) -> int | None:
    """The phase of snapshot `desired` a leaf applied (1, 2), or None if neither.

    2 if it holds `desired`, else the phase it last applied if that was of `desired`
    (`phase_digest`).
    """
    if deployed == desired:
        return WHOLE_SNAPSHOT
    return phase if phase_digest == desired else None


def fabric_phase(targets: Iterable[TargetProgress]) -> int:
    """The phase the service publishes for the desired snapshot.

    1 while an affected leaf has applied neither phase of it, else 2.
    """
    waiting = any(t.affected and t.applied_phase is None for t in targets)
    return ACCESS_REMOVALS if waiting else WHOLE_SNAPSHOT
