"""Deferred verification for a change set: many operations, one verification per fabric.

Inside `deferred_gate`, the commit gate appends each operation's audit entry at once (so the log
keeps the operations' order) but postpones verification. When the block ends, each touched
fabric is verified once over the union of the operations' scopes; a refusal raises and the
caller's transaction rolls back whole. The entries then get the verified digest: the first of a
fabric goes from the state before the change set to the verified one, the next ones stay on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tenancy import models as m
from tenancy.gate.change_check import ChangeScope
from tenancy.store.uow import Tx

_KEY = "isofabric.change_batch"


@dataclass
class FabricChanges:
    """What the batch's operations changed on one fabric, and their audit entries."""

    fabric: m.Fabric
    scope: ChangeScope | None
    entries: list[m.AuditEntry] = field(default_factory=list)


@dataclass
class ChangeBatch:
    """The fabrics a change set touched so far, in first-touch order."""

    fabrics: dict[int, FabricChanges] = field(default_factory=dict)

    def add(self, fabric: m.Fabric, scope: ChangeScope | None, entry: m.AuditEntry) -> None:
        """Record one gated change; a change without a scope makes the fabric's check whole."""
        known = self.fabrics.get(m.pk(fabric))
        if known is None:
            known = self.fabrics[m.pk(fabric)] = FabricChanges(fabric, scope)
        elif known.scope is not None:
            known.scope = None if scope is None else known.scope | scope
        known.entries.append(entry)


def active_batch(tx: Tx) -> ChangeBatch | None:
    """The change batch of the transaction, if it runs a change set."""
    batch = tx.session.info.get(_KEY)
    return batch if isinstance(batch, ChangeBatch) else None


@contextmanager
def deferred_gate(tx: Tx, close: Callable[[Tx, ChangeBatch], None]) -> Iterator[ChangeBatch]:
    """Collect the gate's work while the block runs, then `close` it (verify, restate digests)."""
    batch = ChangeBatch()
    tx.session.info[_KEY] = batch
    try:
        yield batch
    finally:
        tx.session.info.pop(_KEY, None)
    close(tx, batch)
