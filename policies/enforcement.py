"""Where a fabric's files are enforced: what a drain before reuse waits for, and uncovered leaves.

A released node stays draining until the fabric is seen enforcing a snapshot without its
previous owner (`policies.node_state`: draining -> free). What "seen" means depends on who
enforces the files:

- InfiniBand: the OpenSM targets enforce the whole fabric. Every target must hold such a
  snapshot (a standby that takes over must not bring the old key back) and a master's read-back
  must have matched one.
- RoCE: each leaf enforces its own ports. Every leaf target's read-back must have matched such a
  snapshot, and every leaf the host is cabled to must have a target: a leaf without one is read
  back by nobody, so no report can show the host's ports left its previous owner's VLAN there.
  Only an operator's force-drain ends such a drain.

Snapshots are history row ids, increasing with every commit; None means nothing known yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from policies.model import FabricKind

__all__ = ["DrainWait", "Enforcement", "drain_wait", "enforced_up_to", "untargeted"]

_REMOVAL = "a snapshot without the node's previous owner"


@dataclass(frozen=True, slots=True)
class Enforcement:
    """What one deploy target enforces, as snapshot history ids (None: nothing yet).

    `held`: the snapshot whose files it holds; `observed`: the one its read-back last matched
    (an OpenSM master's read-back, or a leaf's after a whole snapshot).
    """

    name: str
    held: int | None
    observed: int | None


@dataclass(frozen=True, slots=True)
class DrainWait:
    """Why a draining node is not free yet.

    `waiting_for`: the targets that do not enforce its removal yet; `untargeted`: (RoCE) the
    host's leaves without a target; `reason`: both said for people.
    """

    waiting_for: tuple[str, ...]
    untargeted: tuple[str, ...]
    reason: str


def enforced_up_to(kind: FabricKind, targets: Sequence[Enforcement]) -> int | None:
    """The newest snapshot the fabric is seen enforcing by the module's rule, or None if none.

    A drain waiting for this snapshot or an older one may end, unless (RoCE) one of the host's
    leaves has no target (`untargeted`).
    """
    if not targets:
        return None
    if kind == FabricKind.ROCE:
        observed = [t.observed for t in targets]
        return None if None in observed else min(o for o in observed if o is not None)
    held = [t.held for t in targets]
    seen = [t.observed for t in targets if t.observed is not None]
    if None in held or not seen:
        return None
    return min(min(h for h in held if h is not None), max(seen))


def untargeted(leaves: Iterable[str], targets: Iterable[str]) -> tuple[str, ...]:
    """The leaves among `leaves` that no target is named after (a leaf's target is its name)."""
    return tuple(sorted(set(leaves) - set(targets)))


def drain_wait(
    kind: FabricKind,
    targets: Sequence[Enforcement],
    snapshot: int | None,
    host_leaves: Iterable[str] = (),
) -> DrainWait:
    """What a drain waiting for `snapshot` (the first without the node's owner) still waits for.

    `host_leaves` (RoCE) are the leaves the node is cabled to. A `snapshot` of None (not stamped
    yet) is waited for on every target.
    """
    roce = kind == FabricKind.ROCE
    uncovered = untargeted(host_leaves, (t.name for t in targets)) if roce else ()
    waiting = tuple(t.name for t in targets if not _enforces(roce, t, snapshot))
    read_back = any(_at_least(t.observed, snapshot) for t in targets)
    return DrainWait(waiting, uncovered, _reason(roce, waiting, uncovered, read_back))


def _enforces(roce: bool, target: Enforcement, snapshot: int | None) -> bool:
    return _at_least(target.observed if roce else target.held, snapshot)


def _at_least(value: int | None, snapshot: int | None) -> bool:
    return value is not None and snapshot is not None and value >= snapshot


def _reason(
    roce: bool, waiting: tuple[str, ...], uncovered: tuple[str, ...], read_back: bool
) -> str:
    parts = []
    if uncovered:
        one = len(uncovered) == 1
        parts.append(
            f"{'leaf' if one else 'leaves'} {', '.join(uncovered)} "
            f"{'carries' if one else 'carry'} the host's ports and "
            f"{'has' if one else 'have'} no deploy target: no read-back can show the ports out "
            "of the previous owner's VLAN there; register the target and run its agent, or "
            "force-drain the node with a reason"
        )
    if waiting:
        enforce = "read back" if roce else "hold"
        parts.append(f"waiting for {', '.join(waiting)} to {enforce} {_REMOVAL}")
    if not roce and not read_back:
        parts.append(f"waiting for a master's read-back to match {_REMOVAL}")
    return "; ".join(parts) or f"every target enforces {_REMOVAL}: the next report frees it"
