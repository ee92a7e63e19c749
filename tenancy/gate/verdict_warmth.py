"""Which fabrics' current verdicts are not in the read cache, and computing one into it.

The commit gate verifies a change incrementally and leaves no whole verdict in the
read cache (tenancy/gate/cached_reads.py), so the first read of a changed fabric's verdict (GET
verification, the console's matrix) would pay a whole verification. The API's warmer
(api/verdict_warmer.py) calls these two functions off the request path so that readers find it
cached. Both are safe to call at any time: the check reads, the computation is a cached read.
"""

from __future__ import annotations

from sqlalchemy.pool import StaticPool
from sqlmodel import col, select

from tenancy import models as m
from tenancy.gate import cached_reads
from tenancy.record import snapshot_log
from tenancy.store.uow import UnitOfWork


def background_safe(uow: UnitOfWork) -> bool:
    """Whether a thread of its own may read the database beside the requests.

    Not on in-memory SQLite: its one connection is shared by every thread (tenancy/store/db.py), so
    a background transaction would interleave with a request's on that connection.
    """
    return not isinstance(uow.engine.pool, StaticPool)


def stale_verdicts(uow: UnitOfWork) -> list[str]:
    """Names of the fabrics whose current committed state has no whole verdict cached, sorted.

    Cheap: one query names every fabric's current state digest (the read cache's key), then a
    memory look-up each (on PostgreSQL a miss also looks in the replicas' shared store). A
    fabric with no logged state yet is left out: nothing would be kept for it.
    """
    with uow.transaction(read_only=True) as tx:
        query = select(m.Fabric, snapshot_log.newest_digest()).order_by(col(m.Fabric.name))
        rows = list(tx.session.exec(query))
        return [
            fabric.name
            for fabric, digest in rows
            if digest is not None and cached_reads.cached_verdict(uow, tx, fabric, digest) is None
        ]


def warm_verdict(uow: UnitOfWork, fabric_name: str) -> None:
    """Compute the fabric's current whole verdict into the read cache, unless it is there.

    Exactly what a read of GET verification does (same key, same bytes, one computation for
    concurrent misses), without answering anyone.

    Raises:
        NotFoundError: no fabric has this name (it was deleted meanwhile).
    """
    cached_reads.verification_json(uow, fabric_name=fabric_name)
