"""The fabric's sync status: which targets hold the desired snapshot and, on RoCE, its phase.

On RoCE the service publishes the desired snapshot in two phases (`policies.roce.rollout`):
phase 1 while a leaf that must remove access (its deployed snapshot's files have VLAN members
or route-target imports the desired one's lack) has applied neither phase of it, then phase 2.
Whether a leaf must remove access depends only on the two snapshots' files for it, so it is
computed once per (deployed digest, desired digest, leaf) and kept in memory, bounded.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from policies.enforcement import untargeted
from policies.errors import IsofabricError
from policies.model import FabricKind
from policies.roce.ownership import OWNERSHIP_FILE
from policies.roce.rollout import (
    LeafFiles,
    TargetProgress,
    applied_phase,
    fabric_phase,
    removes_access,
)
from tenancy import models as m
from tenancy.record.roce_leaves import carrying_leaves
from tenancy.record.snapshot_log import latest
from tenancy.schemas import PortMismatch, SyncTargetView, SyncView
from tenancy.store.lookups import fabric_named
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import snapshot_history

# (fabric id, deployed digest, desired digest, leaf) -> removes access. An entry is a few
# dozen bytes; 64 leaves times a few hundred snapshot pairs fit.
_CACHE_SIZE = 16_384
_CacheKey = tuple[int, str, str, str]


class _RemovalCache:
    """A bounded, thread-safe LRU of `removes_access` answers (pure in the snapshots' files)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[_CacheKey, bool] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _CacheKey) -> bool | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: _CacheKey, value: bool) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)


_REMOVALS = _RemovalCache(_CACHE_SIZE)


@dataclass(frozen=True)
class _Target:
    """What the sync status reads of a target, detached from the session."""

    name: str
    kind: str
    deployed: str | None
    state: str | None
    reported_at: datetime | None
    mismatches: str
    phase: int | None
    phase_digest: str | None
    covers: str | None
    frr_digest: str | None

    @property
    def deploys_frr(self) -> bool:
        return self.covers is None or "frr" in self.covers.split(",")


@dataclass(frozen=True)
class _Fabric:
    """What the sync status reads of a fabric: its kind, desired digest, targets and leaves."""

    id: int
    kind: str
    desired: str
    targets: list[_Target]
    carrying: list[str]  # RoCE: the leaves that carry held nodes' ports


def sync_status(uow: UnitOfWork, *, fabric_name: str) -> SyncView:
    """Whether every target applied the fabric's current snapshot, and who is behind.

    On RoCE also the phase published for it, each leaf's phase and whether it must remove
    access first, and the leaves that carry owners' ports with no target (`untargeted`): they
    enforce nothing the service can observe, so the fabric is not in sync while one exists.

    Raises:
        NotFoundError: no fabric has this name.
    """
    fabric = _read(uow, fabric_name)
    desired = fabric.desired
    views = [_target_view(uow, fabric_name, fabric.id, t, desired) for t in fabric.targets]
    missing = untargeted(fabric.carrying, (t.name for t in fabric.targets))
    applied = all(v.state == "applied" and not v.behind for v in views)
    in_sync = bool(views) and applied and not missing
    phase = None
    if fabric.kind == FabricKind.ROCE:
        phase = fabric_phase(TargetProgress(v.affected, v.phase) for v in views)
    behind = [v.name for v in views if v.behind]
    return SyncView(
        desired=desired,
        in_sync=in_sync,
        phase=phase,
        behind=behind,
        untargeted=list(missing),
        targets=views,
    )


def _read(uow: UnitOfWork, fabric_name: str) -> _Fabric:
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        newest = latest(tx.session, m.pk(fabric))
        carrying = []
        if fabric.kind == FabricKind.ROCE:
            carrying = carrying_leaves(tx.session, m.pk(fabric)).get(m.pk(fabric), [])
        desired = newest.digest if newest is not None else ""
        targets = _targets_of(tx.session, m.pk(fabric))
        return _Fabric(m.pk(fabric), fabric.kind, desired, targets, carrying)


def _targets_of(session: Session, fabric_id: int) -> list[_Target]:
    query = select(m.DeployTarget).where(m.DeployTarget.fabric_id == fabric_id)
    return [
        _Target(
            r.name,
            r.kind,
            r.deployed,
            r.state,
            r.reported_at,
            r.mismatches,
            r.phase,
            r.phase_digest,
            r.covers,
            r.frr_digest,
        )
        for r in session.exec(query.order_by(col(m.DeployTarget.name)))
    ]


def _target_view(
    uow: UnitOfWork, fabric_name: str, fabric_id: int, target: _Target, desired: str
) -> SyncTargetView:
    sonic = target.kind == "sonic"
    frr_in_place = _frr_in_place(uow, fabric_name, target, desired) if sonic else None
    phase = None
    if sonic and frr_in_place:
        phase = applied_phase(
            desired=desired,
            deployed=target.deployed,
            phase=target.phase,
            phase_digest=target.phase_digest,
        )
    return SyncTargetView(
        name=target.name,
        kind=target.kind,
        deployed=target.deployed,
        state=target.state,
        reported_at=target.reported_at,
        mismatches=[PortMismatch.model_validate(item) for item in json.loads(target.mismatches)],
        phase=phase,
        behind=target.deployed != desired or frr_in_place is False,
        affected=sonic and _affected(uow, fabric_name, fabric_id, target, desired),
        covers=target.covers.split(",") if target.covers is not None else None,
        frr_in_place=frr_in_place,
    )


def _frr_in_place(uow: UnitOfWork, fabric_name: str, target: _Target, desired: str) -> bool:
    """Whether `desired`'s frr.conf for the leaf is what the leaf runs, as far as it is known.

    Known when the leaf's agent deploys and reads back FRR; otherwise only when it equals the
    frr.conf of the last snapshot an agent read back there: an agent that leaves frr.conf alone
    must not make a revoked route-target import count as removed.
    """
    if target.deploys_frr or target.frr_digest == desired:
        return True
    if target.frr_digest is None or not desired:
        return False
    wanted = _leaf_frr(uow, fabric_name, desired, target.name)
    return wanted is not None and wanted == _leaf_frr(
        uow, fabric_name, target.frr_digest, target.name
    )


def _leaf_frr(uow: UnitOfWork, fabric_name: str, digest: str, leaf: str) -> bytes | None:
    """The leaf's frr.conf in snapshot `digest`, or None if it cannot be read."""
    path = f"frr/{leaf}/frr.conf"
    try:
        files = snapshot_history.snapshot_files(
            uow, fabric_name=fabric_name, digest=digest, paths=[path]
        )
    except IsofabricError:  # not retained, no such file, or the fabric does not verify now
        return None
    return files[0].content


def _affected(
    uow: UnitOfWork, fabric_name: str, fabric_id: int, target: _Target, desired: str
) -> bool:
    """Whether the leaf must remove access on its way from its deployed snapshot to `desired`.

    A leaf that never deployed holds nothing to remove, nor does one that `desired` has no files
    for (it left the topology: nothing is published for it, so it could never report phase 1).
    When its deployed snapshot's files cannot be read (pruned, or from before ownership.json),
    the answer is yes: phase 1 then waits for that leaf, which at worst delays phase 2, never
    lets it come first.
    """
    if target.deployed is None or not desired or target.deployed == desired:
        return False
    key = (fabric_id, target.deployed, desired, target.name)
    known = _REMOVALS.get(key)
    if known is not None:
        return known
    wanted = _leaf_files(uow, fabric_name, desired, target.name)
    if wanted is None:
        return False
    deployed = _leaf_files(uow, fabric_name, target.deployed, target.name)
    if deployed is None:
        return True
    try:
        answer = removes_access(deployed, wanted)
    except IsofabricError:  # a malformed ownership.json: unknown, so assumed affected
        return True
    _REMOVALS.put(key, answer)
    return answer


def _leaf_files(uow: UnitOfWork, fabric_name: str, digest: str, leaf: str) -> LeafFiles | None:
    """The leaf's three files of snapshot `digest`, or None if any cannot be read."""
    paths = (
        f"sonic/{leaf}/config_db.json",
        f"frr/{leaf}/frr.conf",
        f"sonic/{leaf}/{OWNERSHIP_FILE}",
    )
    try:
        files = snapshot_history.snapshot_files(
            uow, fabric_name=fabric_name, digest=digest, paths=paths
        )
    except IsofabricError:  # not retained, no such file, or the fabric does not verify now
        return None
    config_db, frr_conf, ownership = (f.content.decode() for f in files)
    return LeafFiles(config_db=config_db, frr_conf=frr_conf, ownership=ownership)
