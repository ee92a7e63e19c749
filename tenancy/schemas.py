"""Request and response shapes shared by the use cases and the REST API (pydantic v2).

Validation here is the edge: names are slugs, P_Keys and GUIDs lower-case hex, so nothing a
client sends can inject a line or a separator into an artifact.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from policies.model import MAX_TENANT_PKEY, MIN_PKEY, format_pkey

SLUG_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"
NODE_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
HEX_PKEY_PATTERN = r"^0[xX][0-9a-fA-F]{1,4}$"
# OpenSM 3.3.23 rate codes 2..22 (IB_PATH_RECORD_RATE_*; 23/24 arrived in 3.3.24).
IB_RATE_CODES = range(2, 23)

Slug = Annotated[str, Field(pattern=SLUG_PATTERN, examples=["acme"])]
NodeName = Annotated[str, Field(pattern=NODE_NAME_PATTERN, examples=["gpu0001"])]
T = TypeVar("T")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _pkey_value(text: str) -> int:
    value = int(text, 16)
    if not MIN_PKEY <= value <= MAX_TENANT_PKEY:
        raise ValueError(
            f"P_Key must be between {format_pkey(MIN_PKEY)} and {format_pkey(MAX_TENANT_PKEY)}"
        )
    return value


PKeyText = Annotated[str, Field(pattern=HEX_PKEY_PATTERN, examples=["0x0101"])]
PKeyInput = Annotated[PKeyText, AfterValidator(lambda text: format_pkey(_pkey_value(text)))]


class Page(BaseModel, Generic[T]):
    """The list envelope every list endpoint returns."""

    data: list[T]
    count: int = Field(description="Total number of items matching the filters")
    next: str | None = Field(description="Cursor of the next page, null on the last page")


class PKeyRange(Strict):
    first: PKeyInput = "0x0001"
    last: PKeyInput = "0x7ffe"

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if int(self.first, 16) > int(self.last, 16):
            raise ValueError("pkey_range.first must not be above pkey_range.last")
        return self


class FabricCreate(Strict):
    name: Slug
    kind: Literal["infiniband"]
    pkey_range: PKeyRange = PKeyRange()
    pkeys_per_port: int = Field(
        default=128,
        ge=2,
        le=65536,
        description="P_Key table entries per port (default partition included); mlx5 has 128",
    )


class FabricView(BaseModel):
    name: str
    kind: str
    pkey_range: PKeyRange
    pkeys_per_port: int
    created_at: datetime


class TopologyPortChange(BaseModel):
    guid: str
    node: str
    hca: str
    port: int
    allocated: bool = False
    action: Literal["added", "removed", "kept"] = "added"


class TopologyImportResult(BaseModel):
    switches: int
    nodes: int
    ports: int
    added: list[TopologyPortChange]
    missing: list[TopologyPortChange]


class PortView(BaseModel):
    guid: str
    hca: str
    port: int
    switch: str | None
    switch_port: int | None


class NodeView(BaseModel):
    name: str
    role: str
    tenant: str | None
    service: str | None = None
    ports: list[PortView]


class NodePatch(Strict):
    role: Literal["compute", "storage", "management"]


class QosClassCreate(Strict):
    name: Slug
    ib_sl: int = Field(ge=0, le=15, description="InfiniBand service level")
    ib_rate: int = Field(
        default=3,
        ge=IB_RATE_CODES.start,
        le=IB_RATE_CODES.stop - 1,
        description="OpenSM rate code of the IPoIB group (3 = 10 Gb/s, 16 = 100, 21 = 400)",
    )
    ib_mtu: int = Field(default=4, ge=1, le=5, description="MTU code (4 = 2048, 5 = 4096)")
    vlarb_weight: int = Field(default=32, ge=1, le=255, description="VL arbitration weight")


class QosClassView(QosClassCreate):
    pass


class TenantCreate(Strict):
    name: Slug
    kind: Literal["internal", "external"]
    qos_class: Slug = "bronze"


class TenantView(BaseModel):
    name: str
    kind: str
    status: str
    qos_class: str
    created_at: datetime
    offboarded_at: datetime | None


class SegmentView(BaseModel):
    kind: Literal["ib_partition"] = "ib_partition"
    pkey: str


class AllocationCreate(Strict):
    fabric: Slug
    nodes: list[NodeName] | None = Field(default=None, min_length=1, max_length=100_000)
    count: int | None = Field(default=None, ge=1, le=100_000)

    @model_validator(mode="after")
    def _nodes_or_count(self) -> Self:
        if (self.nodes is None) == (self.count is None):
            raise ValueError("give exactly one of 'nodes' or 'count'")
        if self.nodes is not None and len(set(self.nodes)) != len(self.nodes):
            raise ValueError("'nodes' lists a node twice")
        return self


class AllocationView(BaseModel):
    id: str
    tenant: str
    fabric: str
    nodes: list[str]
    segment: SegmentView
    created_at: datetime
    released_at: datetime | None = None


class ServiceCreate(Strict):
    name: Slug
    nodes: list[NodeName] = Field(min_length=1, max_length=10_000)


class ServiceView(BaseModel):
    name: str
    fabric: str
    nodes: list[str]
    segment: SegmentView
    created_at: datetime


class GrantCreate(Strict):
    fabric: Slug
    service: Slug


class GrantView(BaseModel):
    id: str
    tenant: str
    fabric: str
    service: str
    segment: SegmentView
    created_at: datetime
    revoked_at: datetime | None = None


class EndpointView(BaseModel):
    guid: str
    node: str
    owner: str


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


def problem_extensions(model: BaseModel) -> dict[str, Any]:
    """A model as a JSON-ready dict (used for problem+json extension members)."""
    return model.model_dump(mode="json", by_alias=True)
