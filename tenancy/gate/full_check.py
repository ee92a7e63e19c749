"""Full re-verification: the whole-fabric verifier re-derives what the incremental gate committed.

The incremental gate (tenancy/gate/change_check.py) trusts that every committed state held and that
each change touched only what its scope names. This check is the independent reference: it loads
the whole fabric, verifies it and recomputes the v2 digest from scratch, then compares both with
the stored ones. A mismatch is an alarm: logged at ERROR and kept on the fabric's digest row
(shown by GET /v1/fabrics/{fabric}/verification) until a later check agrees again. `serve` runs it
every `ISOFABRIC_FULL_VERIFY_INTERVAL_SECONDS`; `isofabric verify --full` runs it on demand.
"""

from __future__ import annotations

import logging

from pydantic import BaseModel
from sqlmodel import col, select

from policies.digest import is_v2
from policies.verdict import Verdict
from tenancy import models as m
from tenancy.record import digest_state, snapshot_log
from tenancy.record.snapshot import load_snapshot
from tenancy.store.locks import lock_fabric
from tenancy.store.lookups import fabric_named
from tenancy.store.observers import FULL, timed_verification
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.technology import verify_snapshot

log = logging.getLogger(__name__)


class FullCheckView(BaseModel):
    """The outcome of one full re-verification of a fabric."""

    fabric: str
    holds: bool
    digest: str
    stored_digest: str | None
    matches: bool
    alarm: str | None


def full_check(uow: UnitOfWork, *, fabric_name: str) -> FullCheckView:
    """Verify the whole fabric and compare verdict and digest with the stored incremental ones.

    Runs under the fabric's lock, so no change lands between the load and the comparison. A
    fabric without a stored digest (before its first change since the upgrade) gets one when it
    holds. Never raises for a mismatch: it records and reports it.
    """
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        with timed_verification(tx.session, fabric.name, FULL):
            snapshot = load_snapshot(tx.session, fabric)
            hashes = digest_state.whole_hashes(snapshot)
            verdict = verify_snapshot(snapshot, digest=digest_state.digest_of_whole(hashes))
        row = digest_state.current(tx.session, m.pk(fabric))
        if row is None and verdict.holds:
            row = digest_state.rebuild(tx, fabric, snapshot, hashes)
        stored = row.digest if row is not None else None
        alarm = _alarm(fabric, verdict, row)
        if row is not None:
            _record(tx, row, verdict, alarm)
    return FullCheckView(
        fabric=fabric_name,
        holds=verdict.holds,
        digest=verdict.snapshot_digest,
        stored_digest=stored,
        matches=alarm is None,
        alarm=alarm,
    )


def upgrade_digests(uow: UnitOfWork) -> list[str]:
    """Name each fabric's current state by its v2 digest, once, where the log still has v1.

    For every fabric whose newest history row carries a ``sha256:`` digest (written before
    v2 digests), verify the whole fabric and, if it holds, audit ``snapshot.digest-upgrade`` from
    the old name to the new one: the audit chain, the snapshot history, deploy sync and the read
    cache then agree on the state's name. Idempotent, and safe for replicas starting together
    (each fabric under its lock). Returns the fabrics upgraded.
    """
    with uow.transaction(read_only=True) as tx:
        query = select(m.Fabric.name, snapshot_log.newest_digest()).order_by(col(m.Fabric.name))
        stale = [name for name, digest in tx.session.exec(query) if digest and not is_v2(digest)]
    return [name for name in stale if _upgrade(uow, name)]


def _upgrade(uow: UnitOfWork, fabric_name: str) -> bool:
    from tenancy.gate.verification import commit_gate  # the gate's module reads this one's peers

    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        newest = snapshot_log.latest(tx.session, m.pk(fabric))
        if newest is None or is_v2(newest.digest):
            return False
        if not verify_snapshot(load_snapshot(tx.session, fabric)).holds:
            log.error("fabric %s does not verify: its digest stays v1 until fixed", fabric_name)
            return False
        commit_gate(tx, fabric, "snapshot.digest-upgrade", f"fabrics/{fabric.name}")
        return True


def full_check_all(uow: UnitOfWork) -> list[FullCheckView]:
    """`full_check` every fabric, one at a time (each under its own lock)."""
    with uow.transaction(read_only=True) as tx:
        names = [f.name for f in tx.session.exec(select(m.Fabric).order_by(col(m.Fabric.name)))]
    return [full_check(uow, fabric_name=name) for name in names]


def _alarm(fabric: m.Fabric, verdict: Verdict, row: m.FabricDigest | None) -> str | None:
    if row is None:
        return (
            f"fabric {fabric.name} does not verify ({len(verdict.counterexamples)} counterexamples)"
        )
    problems = []
    if row.digest != verdict.snapshot_digest:
        problems.append(
            f"stored digest {row.digest} but the whole fabric is {verdict.snapshot_digest}"
        )
    if row.holds != verdict.holds:
        problems.append(
            f"stored verdict holds={row.holds} but the whole fabric holds={verdict.holds}"
        )
    if not problems:
        return None
    message = f"full re-verification of fabric {fabric.name} disagrees: " + "; ".join(problems)
    log.error(message)
    return message


def _record(tx: Tx, row: m.FabricDigest, verdict: Verdict, alarm: str | None) -> None:
    row.checked_at, row.checked_digest, row.alarm = tx.now, verdict.snapshot_digest, alarm
    if alarm is not None:
        # Off the fast path: the next change is verified whole, which rebuilds the digest state.
        row.holds = False
    tx.session.add(row)
