"""Request and response shapes shared by the use cases and the REST API (pydantic v2).

Validation here is the edge: names are slugs, P_Keys and GUIDs lower-case hex, so nothing a
client sends can inject a line or a separator into an artifact.
"""

from __future__ import annotations

from datetime import datetime
from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Any, Generic, Literal, Self, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    model_serializer,
    model_validator,
)

from policies.infiniband.model import MAX_TENANT_PKEY, MIN_PKEY, format_pkey

SLUG_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"
NODE_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
HEX_PKEY_PATTERN = r"^0[xX][0-9a-fA-F]{1,4}$"
# OpenSM 3.3.23 rate codes 2..22 (IB_PATH_RECORD_RATE_*; 23/24 arrived in 3.3.24).
IB_RATE_CODES = range(2, 23)

Slug = Annotated[str, Field(pattern=SLUG_PATTERN, examples=["acme"])]
BILLING_ACCOUNT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
BillingAccount = Annotated[str, Field(pattern=BILLING_ACCOUNT_PATTERN, examples=["acct:acme-01"])]
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
    """A fabric; InfiniBand fabrics carry the P_Key fields, RoCE fabrics the RoCE ones."""

    name: str
    kind: str
    pkey_range: PKeyRange | None = None
    pkeys_per_port: int | None = None
    vlan_range: IntRange | None = None
    l2vni_range: IntRange | None = None
    l3vni_range: IntRange | None = None
    tenant_prefix_pool: str | None = None
    tenant_prefix_length: int | None = None
    rt_asn: int | None = None
    host_mtu: int | None = None
    underlay_mtu: int | None = None
    anycast_gateway_mac: str | None = None
    max_lossless_priorities: int | None = None
    created_at: datetime

    @model_serializer(mode="wrap")
    def _only_this_technology(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if value is not None}


class TopologyPortChange(BaseModel):
    guid: str
    node: str
    hca: str
    port: int
    allocated: bool = False
    action: Literal["added", "removed", "kept"] = "added"


class NicChange(BaseModel):
    node: str
    nic: str
    switch: str | None = None
    port: str | None = None
    allocated: bool = False
    action: Literal["added", "removed", "kept"] = "added"


class TopologyImportResult(BaseModel):
    """Counts after the import; `added` and `missing` list HCA ports (InfiniBand) or NICs (RoCE)."""

    switches: int
    nodes: int
    ports: int
    added: list[TopologyPortChange] | list[NicChange]
    missing: list[TopologyPortChange] | list[NicChange]


class PortView(BaseModel):
    guid: str
    hca: str
    port: int
    switch: str | None
    switch_port: int | None


class NodeView(BaseModel):
    """A host: its HCA ports on InfiniBand, its NICs (and no ports) on RoCE."""

    name: str
    role: str
    tenant: str | None
    service: str | None = None
    ports: list[PortView]
    nics: list[NicView] | None = None

    @model_serializer(mode="wrap")
    def _without_absent_nics(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("nics") is None:
            data.pop("nics", None)
        return data


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
    roce_dscp: int = Field(default=0, ge=0, le=63, description="DSCP the class's RoCE traffic uses")
    roce_tc: int = Field(default=0, ge=0, le=7, description="Traffic class = priority = queue")
    lossless: StrictBool = Field(default=False, description="PFC (and ECN) on the class's priority")
    ets_weight: int = Field(default=10, ge=1, le=100, description="DWRR weight in percent")
    ecn_min_bytes: int = Field(default=153_600, ge=1, description="WRED/ECN green minimum")
    ecn_max_bytes: int = Field(default=1_536_000, ge=1, description="WRED/ECN green maximum")
    ecn_probability: int = Field(default=5, ge=1, le=100, description="ECN marking percent")


class QosClassView(QosClassCreate):
    pass


class TenantCreate(Strict):
    name: Slug
    kind: Literal["internal", "external"]
    qos_class: Slug = "bronze"
    billing_account: BillingAccount | None = Field(
        default=None, description="The account usage is billed to; defaults to the tenant name"
    )


class TenantView(BaseModel):
    name: str
    kind: str
    status: str
    qos_class: str
    created_at: datetime
    offboarded_at: datetime | None
    billing_account: str


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
    segment: SegmentView | RoceSegmentView
    created_at: datetime
    released_at: datetime | None = None


class ServiceCreate(Strict):
    name: Slug
    nodes: list[NodeName] = Field(min_length=1, max_length=10_000)


class ServiceView(BaseModel):
    name: str
    fabric: str
    nodes: list[str]
    segment: SegmentView | RoceSegmentView
    created_at: datetime


class GrantCreate(Strict):
    fabric: Slug
    service: Slug


class GrantView(BaseModel):
    id: str
    tenant: str
    fabric: str
    service: str
    segment: SegmentView | RoceSegmentView
    created_at: datetime
    revoked_at: datetime | None = None


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


def problem_extensions(model: BaseModel) -> dict[str, Any]:
    """A model as a JSON-ready dict (used for problem+json extension members)."""
    return model.model_dump(mode="json", by_alias=True)


# --- RoCE ------------------------------------------------------------------------------------


def _text_only(value: Any) -> Any:
    # ipaddress accepts integers (and bools, which are ints): an address must be written as text.
    if not isinstance(value, str | IPv4Address | IPv4Network):
        raise ValueError("must be a string in dotted-quad notation")
    return value


Ipv4Text = Annotated[IPv4Address, BeforeValidator(_text_only)]
Ipv4NetworkText = Annotated[IPv4Network, BeforeValidator(_text_only)]
PORT_NAME_PATTERN = r"^Ethernet[0-9]{1,4}$"
SWITCH_PORT_REF = r"^[a-z0-9][a-z0-9._-]{0,62}:Ethernet[0-9]{1,4}$"
MAC_PATTERN = r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$"


class IntRange(Strict):
    first: int
    last: int

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.first > self.last:
            raise ValueError("first must not be above last")
        return self


class RoceFabricCreate(Strict):
    name: Slug
    kind: Literal["roce"]
    vlan_range: IntRange = IntRange(first=100, last=3999)
    l2vni_range: IntRange = IntRange(first=10000, last=19999)
    l3vni_range: IntRange = IntRange(first=50000, last=59999)
    tenant_prefix_pool: Ipv4NetworkText = IPv4Network("10.64.0.0/10")
    tenant_prefix_length: int = Field(default=24, ge=8, le=30)
    rt_asn: int = Field(default=65000, description="2-byte ASN of the type-0 route targets")
    host_mtu: int = 9000
    underlay_mtu: int = 9216
    anycast_gateway_mac: str = Field(default="00:00:5e:00:01:01", pattern=MAC_PATTERN)
    max_lossless_priorities: int = 2


class RoceFabricSettingsView(BaseModel):
    vlan_range: IntRange
    l2vni_range: IntRange
    l3vni_range: IntRange
    tenant_prefix_pool: str
    tenant_prefix_length: int
    rt_asn: int
    host_mtu: int
    underlay_mtu: int
    anycast_gateway_mac: str
    max_lossless_priorities: int


class InventoryPort(Strict):
    name: str = Field(pattern=PORT_NAME_PATTERN)
    lanes: str = Field(pattern=r"^[0-9]{1,4}(,[0-9]{1,4}){0,15}$")
    speed: int = Field(ge=1000, le=1_600_000, description="Mb/s, as SONiC writes it")
    cable_length: str = Field(default="5m", pattern=r"^[0-9]{1,4}m$")


class InventorySwitch(Strict):
    name: NodeName
    role: Literal["leaf", "spine"]
    asn: int = Field(ge=1, le=4_294_967_294)
    loopback: Ipv4Text
    vtep: Ipv4Text | None = None
    platform: Literal["sonic"] = "sonic"
    ports: list[InventoryPort] = Field(default_factory=list, max_length=1024)


class InventoryLink(Strict):
    a: str = Field(pattern=SWITCH_PORT_REF, examples=["leaf01:Ethernet248"])
    b: str = Field(pattern=SWITCH_PORT_REF, examples=["spine01:Ethernet0"])


class InventoryNic(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,31}$")
    switch: NodeName
    port: str = Field(pattern=PORT_NAME_PATTERN)


class InventoryNode(Strict):
    name: NodeName
    nics: list[InventoryNic] = Field(min_length=1, max_length=64)


class RoceInventory(Strict):
    switches: list[InventorySwitch] = Field(min_length=1, max_length=10_000)
    links: list[InventoryLink] = Field(default_factory=list, max_length=100_000)
    nodes: list[InventoryNode] = Field(default_factory=list, max_length=100_000)


class RoceSegmentView(BaseModel):
    kind: Literal["roce_vrf"] = "roce_vrf"
    vrf: str
    l3vni: int
    l3vni_vlan: int
    vlan: int
    l2vni: int
    subnet: str


class NicView(BaseModel):
    name: str
    switch: str
    port: str


AnyFabricCreate = Annotated[FabricCreate | RoceFabricCreate, Field(discriminator="kind")]


# --- API tokens and tenant reachability (issue 4) ----------------------------------------------

TokenRole = Literal["operator", "auditor", "billing", "tenant-admin", "tenant-viewer"]
TENANT_TOKEN_ROLES = frozenset({"tenant-admin", "tenant-viewer"})


class TokenCreate(Strict):
    name: Slug
    role: TokenRole
    tenant: Slug | None = None
    expires_at: datetime | None = None

    @model_validator(mode="after")
    def _tenant_matches_role(self) -> Self:
        if self.role in TENANT_TOKEN_ROLES and self.tenant is None:
            raise ValueError(f"role '{self.role}' needs a tenant")
        if self.role not in TENANT_TOKEN_ROLES and self.tenant is not None:
            raise ValueError(f"role '{self.role}' is global and cannot have a tenant")
        if self.expires_at is not None and self.expires_at.tzinfo is None:
            raise ValueError("expires_at needs a time zone")
        return self


class TokenView(BaseModel):
    id: str
    name: str
    role: str
    tenant: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class TokenCreated(BaseModel):
    """The only response that carries the secret."""

    id: str
    name: str
    role: str
    tenant: str | None
    token: str


class TenantSummary(Strict):
    """What the billing role sees of a tenant: its name and billing account, nothing else
    (issues 4 and 6). Strict, so no fuller view ever validates as it."""

    name: str
    billing_account: str


class FabricReachabilityView(BaseModel):
    fabric: str
    holds: bool
    snapshot_digest: str
    edges: list[EdgeView]


class TenantReachabilityView(BaseModel):
    tenant: str
    fabrics: list[FabricReachabilityView]


# --- config audits and observed state (issue 5 items 4-5) -------------------------------------

AUDIT_FORMAT_PATTERN = "^(partitions|config_db|frr)$"
HEX_GUID_PATTERN = "^0[xX][0-9a-fA-F]{1,16}$"
HEX_PKEY_PATTERN = "^0[xX][0-9a-fA-F]{1,4}$"


class AuditFindingView(BaseModel):
    code: str
    severity: str
    line: int | None
    message: str


class DriftView(BaseModel):
    owner: str | None
    segment: str
    added: list[str]
    missing: list[str]
    changed: list[str] = []


class ConfigAuditView(BaseModel):
    fabric: str
    format: str
    leaf: str | None
    snapshot_digest: str
    holds: bool
    findings: list[AuditFindingView]
    drift: list[DriftView]
    counterexamples: list[CounterexampleView]


class ObservedPort(Strict):
    guid: Annotated[str, Field(pattern=HEX_GUID_PATTERN)]
    lid: Annotated[int, Field(ge=0, le=0xFFFF)]
    pkeys: Annotated[list[Annotated[str, Field(pattern=HEX_PKEY_PATTERN)]], Field(max_length=128)]


class ObservationCreate(BaseModel):
    """What ``isofabric collect ib`` prints; unknown members are ignored."""

    kind: Literal["infiniband"]
    collected_at: datetime | None = None
    ibnetdiscover: Annotated[str, Field(max_length=16_000_000)] = ""
    ports: Annotated[list[ObservedPort], Field(max_length=100_000)]


class PortDriftView(BaseModel):
    guid: str
    node: str
    owner: str
    missing: list[str]
    unexpected: list[str]


class ObservationView(BaseModel):
    fabric: str
    snapshot_digest: str
    holds: bool
    ports: list[PortDriftView]
    counterexamples: list[CounterexampleView]


class ProofIssue(Strict):
    """Body of POST /v1/tenants/{tenant}/isolation-proofs."""

    fabric: Slug


class ProofCreated(BaseModel):
    """An issued isolation proof: its id and the DSSE envelope (in-toto Statement v1)."""

    id: str
    envelope: dict[str, Any]


# --- usage metering (issue 6) -----------------------------------------------------------------


class UsageRecordsPage(BaseModel):
    """Usage records (documents of policies.usage.record_document), sorted by (period_start, id)."""

    data: list[dict[str, Any]]
    count: int = Field(description="Total number of records in the range")
    complete_until: datetime = Field(description="Records ending at or before this are final")
    next: str | None = Field(description="Cursor of the next page, null on the last page")


class UsageEventsPage(BaseModel):
    """Final hourly usage records as CloudEvents 1.0, in (period_start, id) order."""

    data: list[dict[str, Any]]
    next: str = Field(description="Resume from here; never null (unchanged when nothing is new)")
