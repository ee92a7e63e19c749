"""Verify one change from the part of the fabric it touches: the incremental verifier.

The commit gate hands over the owners and nodes a use case changed (`ChangeScope`). Every
committed state is a verified one (the gate refuses the rest, and `FabricDigest.holds` records
it), and the database keeps the global invariants (a node has one holder, a P_Key, VNI, VLAN,
subnet or RD one owner per fabric: unique keys). So any counterexample a change can create names
a touched owner or node, and its other side lies within their reach (`widen`): verifying the
scoped snapshot of that context finds exactly the whole fabric's counterexamples. The digest
follows by replacing the touched groups' hashes (tenancy/record/digest_state.py).

The whole-fabric verifier stays the reference: a change without a scope (topology import, fabric
creation, QoS classes), a fabric without a stored digest, and `verify_cross_check` use it, and
`tenancy.gate.full_check` re-runs it periodically against the stored digest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from policies.digest import node_key, owner_key
from policies.model import Owner
from policies.verdict import Verdict
from tenancy import models as m
from tenancy.record import digest_state
from tenancy.record.snapshot import load_snapshot
from tenancy.record.snapshot.common import widen
from tenancy.store.observers import INCREMENTAL, WHOLE, timed_verification
from tenancy.store.uow import Tx
from tenancy.technology import verify_snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChangeScope:
    """What a change touched on one fabric.

    `owners`: those whose holdings, segment or grants changed; `nodes`: hosts whose own facts
    (role, ports or NICs) changed.
    """

    owners: frozenset[Owner] = field(default_factory=frozenset)
    nodes: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, owners: Iterable[Owner] = (), nodes: Iterable[str] = ()) -> ChangeScope:
        """A scope from any iterables of owners and node names."""
        return cls(frozenset(owners), frozenset(nodes))

    @classmethod
    def tenant(cls, name: str) -> ChangeScope:
        """The scope of a change to one tenant's nodes, segment or grants."""
        return cls(frozenset({Owner.tenant(name)}))

    def __or__(self, other: ChangeScope) -> ChangeScope:
        return ChangeScope(self.owners | other.owners, self.nodes | other.nodes)


def check_change(tx: Tx, fabric: m.Fabric, scope: ChangeScope | None) -> Verdict:
    """The verdict of the transaction's pending state of `fabric`, with its v2 digest.

    Incremental when a scope is given and the committed state is known to hold; the whole
    fabric otherwise. A verdict that holds is recorded (digest state updated in this
    transaction); the caller refuses one that does not, which rolls everything back. The
    incremental verdict carries no reachability (reads compute it per snapshot).
    """
    row = digest_state.current(tx.session, m.pk(fabric))
    if scope is None or row is None or not row.holds:
        with timed_verification(tx.session, fabric.name, WHOLE):
            return _check_whole(tx, fabric)
    with timed_verification(tx.session, fabric.name, INCREMENTAL):
        verdict = _check_scoped(tx, fabric, row, scope)
    if tx.settings.verify_cross_check:
        _cross_check(tx, fabric, verdict)
    return verdict


def _check_whole(tx: Tx, fabric: m.Fabric) -> Verdict:
    snapshot = load_snapshot(tx.session, fabric)
    # Groups are hashed once: for the verdict's digest and for the stored state.
    hashes = digest_state.whole_hashes(snapshot)
    verdict = verify_snapshot(snapshot, digest=digest_state.digest_of_whole(hashes))
    if verdict.holds:
        digest_state.rebuild(tx, fabric, snapshot, hashes)
    return verdict


def _check_scoped(tx: Tx, fabric: m.Fabric, row: m.FabricDigest, scope: ChangeScope) -> Verdict:
    context = widen(tx.session, fabric, scope.owners, scope.nodes)
    scoped = load_snapshot(tx.session, fabric, context)
    groups = digest_state.groups_of(scoped, owners=scope.owners, nodes=scope.nodes)
    keys = [owner_key(o) for o in scope.owners] + [node_key(n) for n in scope.nodes]
    row = digest_state.replace_groups(tx, row, groups, keys)
    # The verdict reports the whole fabric's digest: the scoped snapshot's own is never hashed.
    verdict = verify_snapshot(scoped, digest=row.digest)
    return replace(verdict, reachability=())


class IncrementalDivergenceError(RuntimeError):
    """The incremental verdict differs from the whole fabric's (a defect, never user input)."""


def _cross_check(tx: Tx, fabric: m.Fabric, incremental: Verdict) -> None:
    whole = verify_snapshot(load_snapshot(tx.session, fabric))
    same = (
        whole.holds == incremental.holds
        and whole.counterexamples == incremental.counterexamples
        and whole.snapshot_digest == incremental.snapshot_digest
    )
    if not same:
        log.error("incremental verification diverged on fabric %s", fabric.name)
        raise IncrementalDivergenceError(
            f"fabric {fabric.name}: incremental {incremental.holds} "
            f"{incremental.snapshot_digest} {incremental.counterexamples} != whole "
            f"{whole.holds} {whole.snapshot_digest} {whole.counterexamples}"
        )
