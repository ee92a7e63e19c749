"""Verification results, reachability and the artifact manifest."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)


class EndpointView(BaseModel):
    """One side of a counterexample: a port, its host and the host's owner (``tenant:acme``)."""

    guid: str | None = Field(description="Port GUID on InfiniBand; null on RoCE")
    node: str
    owner: str
    port: str | None = Field(default=None, description="RoCE: the leaf port, 'leaf01:Ethernet0'")


class CounterexampleView(BaseModel):
    """A concrete refutation of `rule`: the endpoints involved and the segment that links them.

    `partition` is the segment: a P_Key on InfiniBand, a VNI on RoCE. It and the endpoints are
    null when the rule is not about a segment or a pair of ports.
    """

    rule: str
    message: str
    partition: str | None
    a: EndpointView | None
    b: EndpointView | None


class EdgeView(BaseModel):
    """`from` and `to` can communicate through `segment`; `allowed` says whether intent permits it.

    An edge that is not allowed refutes a rule (cross-tenant reachability and the like), so the
    verdict does not hold.
    """

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    source: str = Field(alias="from")
    target: str = Field(alias="to")
    segment: str
    allowed: bool


class VerificationView(BaseModel):
    """Response of verifying a fabric's current state.

    `holds` is true iff no rule in `rules` has a counterexample (at most 100 are listed per rule);
    `reachability` is the whole who-reaches-whom relation; `snapshot_digest` names the verified
    state, as audit entries and artifacts do.
    """

    holds: bool
    snapshot_digest: str
    counterexamples: list[CounterexampleView]
    reachability: list[EdgeView]
    rules: list[str]
    alarm: str | None = Field(
        default=None,
        description="Set when the last full re-verification disagreed with the committed "
        "digest or verdict (`isofabric verify --full`); null otherwise",
    )


class ArtifactFile(BaseModel):
    """One rendered file: its path in the bundle, the hex SHA-256 of its content and its size."""

    path: str
    sha256: str
    bytes: int


class ArtifactsView(BaseModel):
    """The manifest of a fabric's rendered files and the digest of the snapshot they render.

    OpenSM files on InfiniBand, SONiC and FRR files on RoCE; only a snapshot that verifies is
    rendered.
    """

    fabric: str
    snapshot_digest: str
    files: list[ArtifactFile]


class FabricReachabilityView(BaseModel):
    """A tenant's edges on one fabric (the tenant at either end) and whether the verdict holds."""

    fabric: str
    holds: bool
    snapshot_digest: str
    edges: list[EdgeView]


class TenantReachabilityView(BaseModel):
    """Response of a tenant's reachability: one entry per fabric where it holds a segment."""

    tenant: str
    fabrics: list[FabricReachabilityView]
