"""What-if answers: a change's verdict, reachability delta and file diffs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tenancy.schemas.verification import CounterexampleView, EdgeView


class ArtifactChange(BaseModel):
    """One file before and after; `diff` is unified, secrets redacted, null when unchanged."""

    path: str = Field(description="Path in the bundle, e.g. 'opensm/partitions.conf'")
    sha256_before: str | None = Field(
        description="SHA-256 (hex) of the file today; null when the change creates it, and "
        "in the tenant view (the files are not a tenant's to read)"
    )
    sha256_after: str | None = Field(
        description="SHA-256 (hex) of the file after the change; null when it removes it, "
        "and in the tenant view"
    )
    diff: str | None = Field(
        default=None,
        description="Unified diff (a/<path>, b/<path>), secrets redacted, cut after "
        "2,000 lines; null when unchanged. In the tenant view, the diff of the lines about "
        "the tenant's own and shared services' segments only; null when those are unchanged",
    )


class ReachabilityDelta(BaseModel):
    """Edges the change adds and removes."""

    added: list[EdgeView] = Field(description="Edges that exist after the change only")
    removed: list[EdgeView] = Field(description="Edges that exist before the change only")


class FabricWhatIf(BaseModel):
    """What the change would do to one fabric."""

    fabric: str = Field(description="The fabric's name")
    holds: bool = Field(description="Whether the fabric would still verify after the change")
    snapshot_digest_before: str = Field(description="Digest of the fabric's state today")
    snapshot_digest_after: str = Field(description="Digest of the state after the change")
    counterexamples: list[CounterexampleView] = Field(
        description="What the change would break; empty when `holds`"
    )
    reachability: ReachabilityDelta = Field(description="Edges the change adds and removes")
    artifacts: list[ArtifactChange] = Field(
        description="Every rendered file before or after, by path"
    )


class DryRunView(BaseModel):
    """The answer to a mutating request sent with ``?dry_run=true``: what it would do.

    One entry per fabric the request touches; nothing was written (no row, no audit entry).
    """

    dry_run: bool = Field(default=True, description="Always true: nothing was written")
    view: Literal["full", "tenant"] = Field(
        default="full",
        description="'full' for operators; 'tenant' for a tenant role, which sees only what "
        "it may read: edges and counterexamples of its tenant and shared services, and each "
        "file's lines about those, without hashes",
    )
    holds: bool = Field(description="Whether every fabric touched would still verify")
    fabrics: list[FabricWhatIf] = Field(description="One entry per fabric the request touches")
