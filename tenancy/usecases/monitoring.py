"""What the service's /metrics reports at scrape time, read in one read-only transaction.

Per fabric: its verdict, identifier pools, nodes by state, deploy targets' sync and (RoCE) the
leaves that carry owners' ports without a target; for the service: the audit log's size and
newest checkpoint, and the usage feed's lag. Everything comes from stored state or the read
cache in a handful of aggregate queries: a scrape never loads a snapshot, verifies or renders
(those cost seconds on a large fabric, and a scraper asks every 15 s). The result is plain data
(api/metrics_state.py turns it into Prometheus families).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from ipaddress import IPv4Network
from typing import NamedTuple

from sqlalchemy import func
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from policies import usage as metering
from policies.enforcement import untargeted
from policies.model import FabricKind, NodeRole
from policies.node_state import NodeState
from tenancy import models as m
from tenancy.gate.cached_reads import cached_verdict
from tenancy.record import snapshot_log
from tenancy.record.roce_leaves import carrying_leaves
from tenancy.record.vrf_segments import RD_POOL
from tenancy.store.db import fetch_all
from tenancy.store.read_cache import CachedFile
from tenancy.store.uow import Tx, UnitOfWork

# A target's sync state: it enforces the desired snapshot (in_sync); it last reported applying
# or installing an older one (pending); its last report was a refusal, failure or rollback
# (failed); it never reported (unreported).
SYNC_STATES = ("in_sync", "pending", "failed", "unreported")
# Node counts: by state, except management nodes (the SM's host: never held, never free), which
# count apart so that `free` is what tenants can be given.
MANAGEMENT_NODES = "management"
NODE_COUNT_KEYS = (*(state.value for state in NodeState), MANAGEMENT_NODES)
_PENDING = frozenset({"applied", "restart_required"})


@dataclass(frozen=True, slots=True)
class PoolUse:
    """An identifier pool of a fabric: values held (active or quarantined) and its size."""

    pool: str
    used: int
    size: int


@dataclass(frozen=True, slots=True)
class TargetSync:
    """A deploy target's sync state and the seconds since it last could have been in sync."""

    name: str
    sync: str
    seconds_since_in_sync: float


@dataclass(frozen=True, slots=True)
class FabricState:
    """One fabric as /metrics reports it; None where the stored state does not say."""

    name: str
    kind: str
    holds: bool | None
    counterexamples: int | None
    alarm: bool
    pools: tuple[PoolUse, ...]
    nodes: dict[str, int]
    targets: tuple[TargetSync, ...]
    # RoCE: leaves that carry held nodes' ports and have no target (sync's `untargeted`).
    untargeted: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ServiceState:
    """Everything a scrape reports from the database, at one transaction's time."""

    fabrics: tuple[FabricState, ...]
    audit_entries: int
    checkpoint_size: int | None
    checkpoint_age_seconds: float | None
    usage_lag_seconds: float


def service_state(uow: UnitOfWork) -> ServiceState:
    """Read the state /metrics reports (read-only; no verification, no rendering)."""
    with uow.transaction(read_only=True) as tx:
        rows = list(tx.session.exec(_FABRICS))
        targets = _targets(tx, {m.pk(f): digest for f, digest in rows})
        counts = _Counts(
            _pool_use(tx.session), _nodes(tx.session), targets, _untargeted(tx.session, targets)
        )
        fabrics = tuple(_fabric_state(uow, tx, fabric, digest, counts) for fabric, digest in rows)
        entries, size, age = _audit(tx)
        # The feed publishes hours that ended before complete_until (tenancy/usecases/usage.py).
        lag = (tx.now - metering.complete_until(tx.now)).total_seconds()
    return ServiceState(fabrics, entries, size, age, lag)


_FABRICS = select(m.Fabric, snapshot_log.newest_digest()).order_by(col(m.Fabric.name))


class _Counts(NamedTuple):
    """The aggregates read once for every fabric, by fabric id (pools by (id, pool))."""

    pools: dict[tuple[int, str], int]
    nodes: dict[int, dict[str, int]]
    targets: dict[int, list[TargetSync]]
    untargeted: dict[int, tuple[str, ...]]


def _fabric_state(
    uow: UnitOfWork, tx: Tx, fabric: m.Fabric, digest: str | None, counts: _Counts
) -> FabricState:
    fabric_id, pools = m.pk(fabric), counts.pools
    stored = tx.session.get(m.FabricDigest, fabric_id)
    holds, counterexamples = _verdict(uow, tx, fabric, digest, stored)
    counted = counts.nodes.get(fabric_id, {})
    by_state = {key: counted.get(key, 0) for key in NODE_COUNT_KEYS}
    return FabricState(
        name=fabric.name,
        kind=fabric.kind,
        holds=holds,
        counterexamples=counterexamples,
        alarm=stored is not None and stored.alarm is not None,
        pools=tuple(
            PoolUse(name, pools.get((fabric_id, name), 0), size)
            for name, size in _pool_sizes(tx.session, fabric)
        ),
        nodes=by_state,
        targets=tuple(counts.targets.get(fabric_id, ())),
        untargeted=counts.untargeted.get(fabric_id, ()),
    )


def _verdict(
    uow: UnitOfWork, tx: Tx, fabric: m.Fabric, digest: str | None, stored: m.FabricDigest | None
) -> tuple[bool | None, int | None]:
    """Whether the current state holds and its counterexamples, as far as stored state says.

    The whole-fabric verdict of exactly this state when the read cache has it (computed by a
    read of the verification or the artifacts); else the stored verdict of the commit gate and
    the last full re-verification (`FabricDigest.holds`, false while an alarm stands), whose
    counterexamples are 0 when it holds and unknown otherwise.
    """
    document = cached_verdict(uow, tx, fabric, digest)
    if document is not None:
        return _summary(document)
    if stored is None:
        return None, None
    holds = stored.holds and stored.alarm is None
    return holds, 0 if holds else None


# (holds, counterexamples) by the sha256 of a verdict document: parsed once per state, and the
# documents themselves (megabytes on a large fabric) are not kept here.
_SUMMARIES: dict[str, tuple[bool, int]] = {}
_MAX_SUMMARIES = 1024


def _summary(document: CachedFile) -> tuple[bool, int]:
    """(holds, number of counterexamples) of a cached verdict document."""
    found = _SUMMARIES.get(document.sha256)
    if found is None:
        body = json.loads(document.content)
        found = bool(body["holds"]), len(body["counterexamples"])
        if len(_SUMMARIES) >= _MAX_SUMMARIES:
            _SUMMARIES.clear()  # a bound, not a policy: a scrape parses again
        _SUMMARIES[document.sha256] = found
    return found


# --- pools ---------------------------------------------------------------------------------------


def _pool_use(session: Session) -> dict[tuple[int, str], int]:
    """Values held per (fabric id, pool), in one pass over the claims (tenancy/record/pools.py).

    A claim holds its value while active or quarantined (neither can be claimed). VLANs are one
    pool for both purposes (a segment's VLAN and its L3VNI's VLAN); L2 and L3 VNIs share the
    uniqueness scope but are drawn from disjoint ranges (tenancy/record/vrf_segments.py), so by
    purpose.
    """
    segment = m.Segment
    query = core_select(
        col(segment.fabric_id), col(segment.kind), col(segment.purpose), func.count()
    ).group_by(col(segment.fabric_id), col(segment.kind), col(segment.purpose))
    used: dict[tuple[int, str], int] = defaultdict(int)
    for fabric_id, kind, purpose, count in fetch_all(session, query):
        used[(int(fabric_id), purpose if kind == "vni" else kind)] += int(count)
    return used


def _pool_sizes(session: Session, fabric: m.Fabric) -> list[tuple[str, int]]:
    """The fabric's pools and their sizes: P_Keys on InfiniBand, the VRF segment's on RoCE."""
    if fabric.kind == FabricKind.INFINIBAND:
        return [("pkey", fabric.pkey_last - fabric.pkey_first + 1)]
    row = session.get(m.RoceFabricSettings, fabric.id)
    if row is None:
        return []
    prefix = IPv4Network(row.tenant_prefix_pool).prefixlen
    return [
        ("vlan", row.vlan_last - row.vlan_first + 1),
        ("l2vni", row.l2vni_last - row.l2vni_first + 1),
        ("l3vni", row.l3vni_last - row.l3vni_first + 1),
        ("subnet", 2 ** (row.tenant_prefix_length - prefix)),
        ("rd", RD_POOL[1] - RD_POOL[0] + 1),
    ]


# --- nodes and deploy targets ----------------------------------------------------------------


def _nodes(session: Session) -> dict[int, dict[str, int]]:
    """Nodes per fabric by state; a management node (never held) counts as `management`."""
    columns = (col(m.Node.fabric_id), col(m.Node.state), col(m.Node.role))
    query = core_select(*columns, func.count()).group_by(*columns)
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    for fabric_id, state, role, count in fetch_all(session, query):
        key = MANAGEMENT_NODES if role == NodeRole.MANAGEMENT else state
        by_key = counts[int(fabric_id)]
        by_key[key] = by_key.get(key, 0) + int(count)
    return counts


def _targets(tx: Tx, desired: dict[int, str | None]) -> dict[int, list[TargetSync]]:
    query = select(m.DeployTarget).order_by(col(m.DeployTarget.fabric_id), col(m.DeployTarget.name))
    found: dict[int, list[TargetSync]] = defaultdict(list)
    for target in tx.session.exec(query):
        found[target.fabric_id].append(_target_sync(tx, target, desired.get(target.fabric_id)))
    return found


def _untargeted(
    session: Session, targets: dict[int, list[TargetSync]]
) -> dict[int, tuple[str, ...]]:
    """RoCE: the leaves that carry held nodes' ports without a target, as sync lists them."""
    return {
        fabric_id: untargeted(leaves, (t.name for t in targets.get(fabric_id, ())))
        for fabric_id, leaves in carrying_leaves(session).items()
    }


def _target_sync(tx: Tx, target: m.DeployTarget, desired: str | None) -> TargetSync:
    """The target's sync state (`SYNC_STATES`) and how long it has not been in sync.

    In sync as tenancy/usecases/deploy_sync.py `sync_status` says: its last report applied the
    fabric's current snapshot (0 s). Otherwise it left sync when the snapshot it holds stopped being
    the fabric's current one or when it reported something else than applied, whichever came
    first; a target that never held a snapshot counts from its registration.
    """
    if target.state is None:
        return TargetSync(target.name, "unreported", _since(tx, target.created_at))
    if target.state == "applied" and target.deployed == desired:
        return TargetSync(target.name, "in_sync", 0.0)
    sync = "pending" if target.state in _PENDING else "failed"
    moments = [_superseded_at(tx.session, target)]
    if target.state != "applied":
        moments.append(target.reported_at)
    left = min((_aware(t) for t in moments if t is not None), default=target.created_at)
    return TargetSync(target.name, sync, _since(tx, left))


def _superseded_at(session: Session, target: m.DeployTarget) -> datetime | None:
    """When the fabric committed its first snapshot after the one the target holds."""
    if target.applied_snapshot_id is None:
        return None
    query = core_select(func.min(col(m.SnapshotRecord.created_at))).where(
        col(m.SnapshotRecord.fabric_id) == target.fabric_id,
        col(m.SnapshotRecord.id) > target.applied_snapshot_id,
    )
    value = fetch_all(session, query)[0][0]
    return None if value is None else _aware(value)


# --- audit log -----------------------------------------------------------------------------------


def _audit(tx: Tx) -> tuple[int, int | None, float | None]:
    """Entries in the log, and the size and age of the newest signed checkpoint (None: none)."""
    # Entries are numbered from 0 without gaps: max + 1 is one index probe, count(*) a scan.
    newest = fetch_all(tx.session, core_select(func.max(col(m.AuditEntry.index))))[0][0]
    checkpoint = core_select(
        func.max(col(m.AuditCheckpoint.size)), func.max(col(m.AuditCheckpoint.created_at))
    )
    size, created = fetch_all(tx.session, checkpoint)[0]
    age = None if created is None else _since(tx, _aware(created))
    return (0 if newest is None else int(newest) + 1), size, age


def _since(tx: Tx, moment: datetime) -> float:
    return max(0.0, (tx.now - _aware(moment)).total_seconds())


def _aware(value: datetime | str) -> datetime:
    """A UTC-aware datetime: SQLite returns aggregates as naive text (no column type applies)."""
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
