"""What-if answers (issue 12, item 4): a change's verdict, reachability delta and file diffs."""

from __future__ import annotations

from pydantic import BaseModel

from tenancy.schemas.verification import CounterexampleView, EdgeView


class ArtifactChange(BaseModel):
    """One file before and after; `diff` is unified, secrets redacted, null when unchanged."""

    path: str
    sha256_before: str | None
    sha256_after: str | None
    diff: str | None = None


class ReachabilityDelta(BaseModel):
    """Edges the change adds and removes."""

    added: list[EdgeView]
    removed: list[EdgeView]


class FabricWhatIf(BaseModel):
    """What the change would do to one fabric."""

    fabric: str
    holds: bool
    snapshot_digest_before: str
    snapshot_digest_after: str
    counterexamples: list[CounterexampleView]
    reachability: ReachabilityDelta
    artifacts: list[ArtifactChange]


class DryRunView(BaseModel):
    """The answer to a mutating request sent with ``?dry_run=true``: what it would do.

    One entry per fabric the request touches; nothing was written (no row, no audit entry).
    """

    dry_run: bool = True
    holds: bool
    fabrics: list[FabricWhatIf]
