"""The verdict a reader shows now: the current state's if cached, else an earlier state's.

A page (the console's isolation matrix) must not wait for a whole
verification (3.5 s to 10 s on the 100k-port benchmark fabric) in the seconds after a change,
while the verdict warmer (api/verdict_warmer.py) computes it. So when the current state's
verdict is not cached, the newest cached verdict of an earlier state of the same fabric is
shown instead, named by its own digest and the time that state was committed (verified by the
commit gate), never as current. Only a fabric none of whose verdicts is cached computes here.

Where earlier verdicts are: the in-process read cache keeps entries of every state until
evicted (tenancy/store/read_cache.py); on PostgreSQL the shared store keeps the fabric's one latest
stored state (tenancy/record/read_cache_store.py), which after a change is the previous one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import col, select

from tenancy import models as m
from tenancy.gate import cached_reads
from tenancy.record import read_cache_store, snapshot_log
from tenancy.store.lookups import fabric_named
from tenancy.store.read_cache import CachedFile
from tenancy.store.uow import Tx, UnitOfWork


@dataclass(frozen=True, slots=True)
class ShownVerdict:
    """A verdict document, the fabric's current state, and whether the verdict is of it.

    `earlier_digest` is None for the current state's verdict; otherwise it is the digest of the
    earlier state the document is of, committed (and verified by the commit gate) at
    `verified_at`, while `current_digest` names the fabric's state now, not verified yet.
    """

    document: CachedFile
    current_digest: str | None
    earlier_digest: str | None = None
    verified_at: datetime | None = None

    @property
    def current(self) -> bool:
        """Whether this is the verdict of the fabric's current committed state."""
        return self.earlier_digest is None


def verdict_to_show(uow: UnitOfWork, *, fabric_name: str) -> ShownVerdict:
    """The current state's verdict if cached, else the newest cached earlier one, else computed.

    Never computes while an earlier state's verdict of the fabric is cached (memory, or on
    PostgreSQL the replicas' shared store); computes (as GET verification does) only when none
    is, e.g. at the first load after a start.

    Raises:
        NotFoundError: no fabric has this name.
    """
    with uow.transaction(read_only=True) as tx:
        fabric, current = _current(tx, fabric_name)
        if current is not None and cached_reads.cached_verdict(uow, tx, fabric, current) is None:
            earlier = _newest_earlier(uow, tx, fabric, current)
            if earlier is not None:
                return earlier
    return ShownVerdict(cached_reads.verification_json(uow, fabric_name=fabric_name), current)


def verdict_is_current(uow: UnitOfWork, *, fabric_name: str) -> tuple[bool, str | None]:
    """Whether the fabric's current state's verdict is cached, and that state's digest.

    Cheap (one indexed query and a look-up, never a computation): for a page's poll.

    Raises:
        NotFoundError: no fabric has this name.
    """
    with uow.transaction(read_only=True) as tx:
        fabric, current = _current(tx, fabric_name)
        if current is None:  # nothing is ever kept: a read computes it, so it is "ready"
            return True, None
        return cached_reads.cached_verdict(uow, tx, fabric, current) is not None, current


def _current(tx: Tx, fabric_name: str) -> tuple[m.Fabric, str | None]:
    query = select(m.Fabric, snapshot_log.newest_digest()).where(m.Fabric.name == fabric_name)
    row = tx.session.exec(query).first()
    if row is None:
        return fabric_named(tx.session, fabric_name), None  # raises the one "no such fabric"
    return row


def _newest_earlier(uow: UnitOfWork, tx: Tx, fabric: m.Fabric, current: str) -> ShownVerdict | None:
    """The cached verdict of the fabric's most recently committed state other than `current`."""
    inputs = cached_reads.verdict_fingerprint()
    candidates = set(uow.reads.digests(m.pk(fabric), inputs))
    if read_cache_store.shared(uow):
        stored = (
            select(col(m.CachedRead.digest))
            .distinct()
            .where(m.CachedRead.fabric_id == m.pk(fabric), m.CachedRead.inputs == inputs)
        )
        candidates.update(tx.session.exec(stored))
    candidates.discard(current)
    if not candidates:
        return None
    # Newest first by the snapshot log's order (a state can recur: its newest row counts).
    query = select(m.SnapshotRecord).where(
        m.SnapshotRecord.fabric_id == m.pk(fabric), col(m.SnapshotRecord.digest).in_(candidates)
    )
    for record in tx.session.exec(query.order_by(col(m.SnapshotRecord.id).desc())):
        document = cached_reads.cached_verdict(uow, tx, fabric, record.digest)
        if document is not None:  # else evicted or unusable meanwhile: try an older one
            return ShownVerdict(document, current, record.digest, record.created_at)
    return None
