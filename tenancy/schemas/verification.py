"""Verification results, reachability and the artifact manifest."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

DIGEST = "the snapshot digest, 'v2:' (or 'sha256:' for older states) and 64 hex digits"


class EndpointView(BaseModel):
    """One side of a counterexample: a port, its host and the host's owner (``tenant:acme``)."""

    guid: str | None = Field(
        description="Port GUID on InfiniBand, 0x-prefixed 16-digit lower-case hex; null on RoCE"
    )
    node: str = Field(description="The name of the host the port is on")
    owner: str = Field(
        description="Who holds the host: 'tenant:<name>', 'service:<name>' or 'unassigned:<node>'"
    )
    port: str | None = Field(
        default=None, description="RoCE: the leaf port, 'leaf01:Ethernet0'; null on InfiniBand"
    )


class CounterexampleView(BaseModel):
    """A concrete refutation of `rule`: the endpoints involved and the segment that links them.

    `partition` is the segment: a P_Key on InfiniBand, a VNI on RoCE. It and the endpoints are
    null when the rule is not about a segment or a pair of ports.
    """

    rule: str = Field(description="The refuted rule's name, one of the verdict's `rules`")
    message: str = Field(description="What is wrong, in one sentence for people")
    partition: str | None = Field(
        description="The segment: a P_Key ('0x0101') on InfiniBand, a VNI ('50001') on RoCE; "
        "null when the rule is not about a segment"
    )
    a: EndpointView | None = Field(description="One endpoint; null when no port is involved")
    b: EndpointView | None = Field(
        description="The other endpoint; null when the rule is about one port or none"
    )


class EdgeView(BaseModel):
    """`from` and `to` can communicate through `segment`; `allowed` says whether intent permits it.

    An edge that is not allowed refutes a rule (cross-tenant reachability and the like), so the
    verdict does not hold.
    """

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    source: str = Field(
        alias="from",
        description="One end: 'tenant:<name>', 'service:<name>' or 'unassigned:<node>'",
    )
    target: str = Field(alias="to", description="The other end, written like `from`")
    segment: str = Field(
        description="The segment that links them: a P_Key ('0x0100') on InfiniBand, a VNI "
        "('50000') on RoCE"
    )
    allowed: bool = Field(description="Whether intent (self, grants, peerings) permits the edge")


class UnobservedView(BaseModel):
    """A virtual GUID's membership: in the files, but no read-back can see whether it holds."""

    guid: str = Field(description="The virtual GUID, 0x and 16 lower-case hex digits")
    partition: str = Field(description="The partition's P_Key, e.g. 0x0104")
    name: str = Field(description="The partition's name in partitions.conf")
    tenant: str = Field(description="The tenant it is bound to")
    membership: str = Field(description="'full' or 'limited'")
    state: str = Field(
        default="unobserved",
        description="Always 'unobserved': only NVIDIA's SM enforces virtual GUIDs and nothing "
        "isofabric reads back shows their tables",
    )


def _none_listed(value: object) -> bool:
    return not value


class VerificationView(BaseModel):
    """Response of verifying a fabric's current state.

    `holds` is true iff no rule in `rules` has a counterexample (at most 100 are listed per rule);
    `reachability` is the whole who-reaches-whom relation; `snapshot_digest` names the verified
    state, as audit entries and artifacts do.
    """

    holds: bool = Field(description="True iff no rule has a counterexample")
    snapshot_digest: str = Field(description="The verified state: " + DIGEST)
    counterexamples: list[CounterexampleView] = Field(
        description="Refutations, at most 100 per rule; empty when the verdict holds"
    )
    reachability: list[EdgeView] = Field(description="Every edge of who reaches whom")
    rules: list[str] = Field(description="Names of the rules checked, in checking order")
    alarm: str | None = Field(
        default=None,
        description="Set when the last full re-verification disagreed with the committed "
        "digest or verdict (`isofabric verify --full`); null otherwise",
    )
    unobserved: list[UnobservedView] = Field(
        default_factory=list,
        exclude_if=_none_listed,
        description="InfiniBand: memberships of virtual GUIDs, which the verdict cannot see "
        "held (left out when there are none)",
    )


class ArtifactFile(BaseModel):
    """One rendered file: its path in the bundle, the hex SHA-256 of its content and its size."""

    path: str = Field(
        description="Path in the bundle, e.g. 'opensm/partitions.conf' or 'frr/leaf01/frr.conf'"
    )
    sha256: str = Field(description="SHA-256 of the content, 64 lower-case hex digits")
    bytes: int = Field(description="Size of the content in bytes")


class ArtifactsView(BaseModel):
    """The manifest of a fabric's rendered files and the digest of the snapshot they render.

    OpenSM files on InfiniBand, SONiC and FRR files on RoCE; only a snapshot that verifies is
    rendered.
    """

    fabric: str = Field(description="The fabric's name")
    snapshot_digest: str = Field(description="The rendered state: " + DIGEST)
    files: list[ArtifactFile] = Field(description="The rendered files, sorted by path")


class FabricReachabilityView(BaseModel):
    """A tenant's edges on one fabric (the tenant at either end) and whether the verdict holds."""

    fabric: str = Field(description="The fabric's name")
    holds: bool = Field(description="Whether the fabric's whole isolation verdict holds")
    snapshot_digest: str = Field(description="The verified state: " + DIGEST)
    edges: list[EdgeView] = Field(description="The edges with the tenant at either end")


class TenantReachabilityView(BaseModel):
    """Response of a tenant's reachability: one entry per fabric where it holds a segment."""

    tenant: str = Field(description="The tenant's name")
    fabrics: list[FabricReachabilityView] = Field(
        description="One entry per fabric where the tenant holds a segment, by fabric name"
    )
