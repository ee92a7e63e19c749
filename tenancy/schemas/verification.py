"""Verification results, reachability and the artifact manifest."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)


class EndpointView(BaseModel):
    guid: str | None = Field(description="Port GUID on InfiniBand; null on RoCE")
    node: str
    owner: str
    port: str | None = Field(default=None, description="RoCE: the leaf port, 'leaf01:Ethernet0'")


class CounterexampleView(BaseModel):
    rule: str
    message: str
    partition: str | None
    a: EndpointView | None
    b: EndpointView | None


class EdgeView(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    source: str = Field(alias="from")
    target: str = Field(alias="to")
    segment: str
    allowed: bool


class VerificationView(BaseModel):
    holds: bool
    snapshot_digest: str
    counterexamples: list[CounterexampleView]
    reachability: list[EdgeView]
    rules: list[str]


class ArtifactFile(BaseModel):
    path: str
    sha256: str
    bytes: int


class ArtifactsView(BaseModel):
    fabric: str
    snapshot_digest: str
    files: list[ArtifactFile]


class FabricReachabilityView(BaseModel):
    fabric: str
    holds: bool
    snapshot_digest: str
    edges: list[EdgeView]


class TenantReachabilityView(BaseModel):
    tenant: str
    fabrics: list[FabricReachabilityView]
