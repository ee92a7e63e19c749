"""The one place where rows become engine snapshots: one loader per technology.

`load_snapshot` dispatches on the fabric's kind; each loader reads the fabric with a handful of
bulk queries (never per-row ORM loads) inside the caller's transaction, so a pending change is
part of what gets verified.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlmodel import Session

from policies.infiniband.model import IbSnapshot
from policies.model import FabricKind
from policies.roce.model import RoceSnapshot
from tenancy import models as m
from tenancy.record.snapshot.common import Context
from tenancy.record.snapshot.infiniband import load_ib_snapshot
from tenancy.record.snapshot.roce import load_roce_snapshot

__all__ = ["Snapshot", "load_ib_snapshot", "load_roce_snapshot", "load_snapshot"]

Snapshot = IbSnapshot | RoceSnapshot

_LOADERS: dict[FabricKind, Callable[[Session, m.Fabric, Context | None], Snapshot]] = {
    FabricKind.INFINIBAND: load_ib_snapshot,
    FabricKind.ROCE: load_roce_snapshot,
}


def load_snapshot(session: Session, fabric: m.Fabric, context: Context | None = None) -> Snapshot:
    """The engine's view of `fabric`, InfiniBand or RoCE, including this transaction's changes.

    With a `context`, the scoped snapshot of its owners and nodes (tenancy/gate/change_check.py).
    """
    return _LOADERS[FabricKind(fabric.kind)](session, fabric, context)
