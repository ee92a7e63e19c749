"""What-if: what a change would do, computed in its transaction, never kept.

`preview` runs a change inside a savepoint with the commit gate deferred, reads each touched
fabric's pending state (verdict, reachability, artifacts), rolls the savepoint back, reads the
committed state the same way and compares: the verdict after, the reachability delta and, per
artifact, the sha256 before and after with a unified diff. The caller then rolls its whole
transaction back (`DryRunDone`), so a dry run writes nothing: no row, no audit entry, no claimed
Idempotency-Key. Secrets never reach a diff: the subnet keys in opensm.conf are redacted.

What a dry run answers a role never exceeds what that role may read without it. A tenant role
gets the tenant view (`DryRunView.view`): the verdict, the reachability edges and the
counterexamples that involve only its tenant and shared services, and each changed file as the
diff of its projection to the lines about the tenant's own segments
(policies/evidence/tenant_files.py), without the files' hashes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TypeVar

from sqlalchemy.orm import SessionTransaction

from policies.artifacts import Artifact
from policies.authz import TENANT_ROLES, Role
from policies.evidence.tenant_files import TenantFileView, tenant_file_view
from policies.model import Owner, OwnerKind
from policies.verdict import ReachabilityEdge, Verdict
from tenancy import models as m
from tenancy.gate.change_batch import deferred_gate
from tenancy.record.snapshot import Snapshot, load_snapshot
from tenancy.schemas.verification import CounterexampleView, EdgeView
from tenancy.schemas.what_if import ArtifactChange, DryRunView, FabricWhatIf, ReachabilityDelta
from tenancy.store.uow import Tx, UnitOfWork
from tenancy.technology import render_snapshot, verify_snapshot

T = TypeVar("T")

# opensm.conf carries the subnet's management keys (docs/facts/infiniband.md §4): a diff shows
# that a key line changed, never its value.
_SECRET_LINE = re.compile(r"^(\s*(?:m_key|sm_key|sa_key)\s+)\S+", re.MULTILINE)
MAX_DIFF_LINES = 2_000


class DryRunDone(Exception):  # noqa: N818 - control flow, not an error
    """Raised out of a dry run's transaction to roll it back, carrying the answer."""

    def __init__(self, answer: object) -> None:
        super().__init__("dry run: rolled back")
        self.answer = answer


@dataclass(frozen=True)
class _State:
    snapshot: Snapshot
    verdict: Verdict
    artifacts: dict[str, Artifact]


def preview(tx: Tx, change: Callable[[], T]) -> tuple[T, list[FabricWhatIf]]:
    """Run `change` in a savepoint, then undo it; return its result and what it would do."""
    savepoint = tx.session.begin_nested()
    with deferred_gate(tx, lambda _tx, _batch: None) as batch:
        result = change()
    return result, _report(tx, savepoint, [c.fabric for c in batch.fabrics.values()])


@contextmanager
def rehearse(tx: Tx) -> Iterator[None]:
    """Run the block like `preview`, then raise `DryRunDone` with a `DryRunView` of its effect.

    The block's own errors propagate unchanged (a dry run of a bad request is the same 4xx).
    """
    savepoint = tx.session.begin_nested()
    with deferred_gate(tx, lambda _tx, _batch: None) as batch:
        yield
    tenant = _viewing_tenant(tx)
    fabrics = _report(tx, savepoint, [c.fabric for c in batch.fabrics.values()], tenant)
    view = "full" if tenant is None else "tenant"
    raise DryRunDone(DryRunView(view=view, holds=all(f.holds for f in fabrics), fabrics=fabrics))


def rehearsing(uow: UnitOfWork) -> UnitOfWork:
    """`uow` for a what-if request: each of its write transactions is rehearsed (`rehearse`)."""
    return replace(uow, rehearsal=rehearse)


def committing(uow: UnitOfWork) -> UnitOfWork:
    """`uow` whose write transactions commit (no rehearsal)."""
    return replace(uow, rehearsal=None)


def _viewing_tenant(tx: Tx) -> str | None:
    """The tenant whose view the answer is (a tenant role's); None for the full view."""
    principal = tx.principal
    return principal.tenant if Role(principal.role) in TENANT_ROLES else None


def _report(
    tx: Tx, savepoint: SessionTransaction, fabrics: list[m.Fabric], tenant: str | None = None
) -> list[FabricWhatIf]:
    after = [_state(tx, fabric) for fabric in fabrics]
    savepoint.rollback()
    before = [_state(tx, fabric) for fabric in fabrics]
    compared = zip(fabrics, before, after, strict=True)
    if tenant is None:
        return [_compare(f, b, a) for f, b, a in compared]
    return [_tenant_compare(f, b, a, tenant) for f, b, a in compared]


def _state(tx: Tx, fabric: m.Fabric) -> _State:
    snapshot = load_snapshot(tx.session, fabric)
    verdict = verify_snapshot(snapshot)
    # A state that does not verify is never rendered (it would be refused): no file to compare.
    files = render_snapshot(tx, fabric, snapshot) if verdict.holds else ()
    return _State(snapshot, verdict, {f.path: f for f in files})


def _compare(fabric: m.Fabric, before: _State, after: _State) -> FabricWhatIf:
    from tenancy.gate.verification import counterexample_view, edge_view  # its module imports ours

    old, new = set(before.verdict.reachability), set(after.verdict.reachability)
    return FabricWhatIf(
        fabric=fabric.name,
        holds=after.verdict.holds,
        snapshot_digest_before=before.verdict.snapshot_digest,
        snapshot_digest_after=after.verdict.snapshot_digest,
        counterexamples=[
            counterexample_view(c, fabric.kind) for c in after.verdict.counterexamples
        ],
        reachability=ReachabilityDelta(
            added=[edge_view(e, fabric.kind) for e in _sorted(new - old)],
            removed=[edge_view(e, fabric.kind) for e in _sorted(old - new)],
        ),
        # A change that does not verify would be refused: its files would never exist.
        artifacts=_artifact_changes(before.artifacts, after.artifacts)
        if after.verdict.holds
        else [],
    )


def _tenant_compare(fabric: m.Fabric, before: _State, after: _State, tenant: str) -> FabricWhatIf:
    """`_compare` as `tenant` may see it: its own edges, and its projection of each file."""
    full = _compare(fabric, before, after)
    files = tenant_file_view((before.snapshot, after.snapshot), tenant)
    reachability = ReachabilityDelta(
        added=_edges_of(full.reachability.added, tenant),
        removed=_edges_of(full.reachability.removed, tenant),
    )
    return full.model_copy(
        update={
            "counterexamples": _counterexamples_of(full.counterexamples, tenant),
            "reachability": reachability,
            "artifacts": _projected_changes(full.artifacts, before, after, files),
        }
    )


def _edges_of(edges: list[EdgeView], tenant: str) -> list[EdgeView]:
    """The edges with the tenant at one end, as its reachability read lists them."""
    owner = str(Owner.tenant(tenant))
    return [edge for edge in edges if owner in (edge.source, edge.target)]


def _counterexamples_of(
    examples: list[CounterexampleView], tenant: str
) -> list[CounterexampleView]:
    """The counterexamples whose every end is the tenant's or a shared service's."""

    def visible(owner: str) -> bool:
        return owner == str(Owner.tenant(tenant)) or owner.startswith(f"{OwnerKind.SERVICE}:")

    return [
        example
        for example in examples
        if all(visible(end.owner) for end in (example.a, example.b) if end is not None)
    ]


def _projected_changes(
    changes: list[ArtifactChange], before: _State, after: _State, files: TenantFileView
) -> list[ArtifactChange]:
    """Each file's change as the diff of the tenant's projections; no hashes (not its files)."""
    projected = []
    for change in changes:
        old, new = before.artifacts.get(change.path), after.artifacts.get(change.path)
        diff = _projected_diff(change.path, old, new, files)
        projected.append(
            ArtifactChange(path=change.path, sha256_before=None, sha256_after=None, diff=diff)
        )
    return projected


def _projected_diff(
    path: str, before: Artifact | None, after: Artifact | None, files: TenantFileView
) -> str | None:
    old = files.project(_redacted(before)).splitlines(keepends=True)
    new = files.project(_redacted(after)).splitlines(keepends=True)
    return _unified(path, old, new) if old != new else None


def _sorted(edges: set[ReachabilityEdge]) -> list[ReachabilityEdge]:
    return sorted(edges, key=lambda e: (e.source.sort_key, e.target.sort_key, e.segment))


def _artifact_changes(
    before: dict[str, Artifact], after: dict[str, Artifact]
) -> list[ArtifactChange]:
    return [
        ArtifactChange(
            path=path,
            sha256_before=before[path].sha256 if path in before else None,
            sha256_after=after[path].sha256 if path in after else None,
            diff=_diff(path, before.get(path), after.get(path)),
        )
        for path in sorted(before.keys() | after.keys())
    ]


def _diff(path: str, before: Artifact | None, after: Artifact | None) -> str | None:
    if before is not None and after is not None and before.sha256 == after.sha256:
        return None
    old = _redacted(before).splitlines(keepends=True)
    new = _redacted(after).splitlines(keepends=True)
    return _unified(path, old, new)


def _unified(path: str, old: list[str], new: list[str]) -> str:
    lines = list(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}"))
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... {len(lines) - MAX_DIFF_LINES} more lines\n"]
    return "".join(lines)


def _redacted(artifact: Artifact | None) -> str:
    if artifact is None:
        return ""
    text = artifact.content.decode("utf-8", errors="replace")
    return _SECRET_LINE.sub(r"\1<redacted>", text)
