"""Fabrics: creation requests (InfiniBand and RoCE) and the fabric resource."""

from __future__ import annotations

from datetime import datetime
from ipaddress import IPv4Network
from typing import Annotated, Literal, Self

from pydantic import (
    BaseModel,
    Field,
    StrictInt,
    model_validator,
)

from policies.roce.addresses import MIN_POOL_PREFIX_LENGTH
from policies.roce.settings import MAX_TENANT_PREFIX_LENGTH, PFC_PRIORITIES
from tenancy.schemas.bounds import (
    Mtu,
    RouteTargetAsn,
    TenantPrefixPool,
    VlanRange,
    VniRange,
)
from tenancy.schemas.common import (
    MAC_PATTERN,
    IntRange,
    PKeyInput,
    Slug,
    Strict,
    left_out,
)
from tenancy.schemas.partitions import VirtualGuidSetting


class PKeyRange(Strict):
    """The inclusive range of P_Keys an InfiniBand fabric hands to tenants and services.

    Both ends lie in 0x0001-0x7ffe (0x7fff is the default partition) and `first` must not be
    above `last`; the default is the whole range.
    """

    first: PKeyInput = Field(
        default="0x0001",
        description="Lowest P_Key of the range, 0x-prefixed hex in 0x0001-0x7ffe (written "
        "back as 4 lower-case digits, e.g. 0x0101)",
    )
    last: PKeyInput = Field(
        default="0x7ffe",
        description="Highest P_Key of the range, 0x-prefixed hex in 0x0001-0x7ffe, not below "
        "`first`",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if int(self.first, 16) > int(self.last, 16):
            raise ValueError("pkey_range.first must not be above pkey_range.last")
        return self


class FabricCreate(Strict):
    """Body that registers an InfiniBand fabric: P_Key range and per-port budget, fixed for good."""

    name: Slug = Field(
        description="The fabric's name, unique among fabrics; it names the fabric in paths"
    )
    kind: Literal["infiniband"] = Field(description="'infiniband': the body's discriminator")
    pkey_range: PKeyRange = Field(
        default=PKeyRange(),
        description="P_Keys the service may hand out on this fabric (default 0x0001-0x7ffe)",
    )
    # IBA: a P_Key table is at most 2048 blocks of 32 entries (docs/facts/infiniband.md §2.3).
    pkeys_per_port: StrictInt = Field(
        default=128,
        ge=2,
        le=65536,
        description="P_Key table entries per port (default partition included); mlx5 has 128",
    )
    virtual_guids: VirtualGuidSetting = Field(
        default_factory=VirtualGuidSetting,
        description="Virtual GUIDs (SR-IOV) partitions may list; off unless enabled",
    )


class FabricView(BaseModel):
    """A fabric; InfiniBand fabrics carry the P_Key fields, RoCE fabrics the RoCE ones.

    Members of the other technology are left out of the JSON (never sent as null).
    """

    name: str = Field(description="The fabric's name (a slug), e.g. 'ib-east'")
    kind: str = Field(description="'infiniband' or 'roce'")
    pkey_range: PKeyRange | None = Field(
        default=None,
        exclude_if=left_out,
        description="InfiniBand: the P_Keys the service hands out",
    )
    pkeys_per_port: int | None = Field(
        default=None,
        exclude_if=left_out,
        description="InfiniBand: P_Key table entries per port (default partition included)",
    )
    virtual_guids: VirtualGuidSetting | None = Field(
        default=None,
        exclude_if=left_out,
        description="InfiniBand: the virtual GUIDs partitions may list (PATCH changes it)",
    )
    vlan_range: IntRange | None = Field(
        default=None,
        exclude_if=left_out,
        description="RoCE: VLAN IDs for tenant and service segments (2-4094)",
    )
    l2vni_range: IntRange | None = Field(
        default=None,
        exclude_if=left_out,
        description="RoCE: VXLAN VNIs of L2 segments (1-16777215)",
    )
    l3vni_range: IntRange | None = Field(
        default=None,
        exclude_if=left_out,
        description="RoCE: VXLAN VNIs of VRFs (L3VNIs), disjoint from the L2VNIs",
    )
    tenant_prefix_pool: str | None = Field(
        default=None,
        exclude_if=left_out,
        description="RoCE: IPv4 CIDR the segments' subnets are cut from",
    )
    tenant_prefix_length: int | None = Field(
        default=None,
        exclude_if=left_out,
        description="RoCE: prefix length of each segment's subnet (8-30)",
    )
    rt_asn: int | None = Field(
        default=None,
        exclude_if=left_out,
        description="RoCE: 2-byte ASN of the type-0 route targets (1-65535)",
    )
    host_mtu: int | None = Field(
        default=None,
        exclude_if=left_out,
        description="RoCE: MTU of host-facing ports and tenant VLANs, in bytes",
    )
    underlay_mtu: int | None = Field(
        default=None,
        exclude_if=left_out,
        description="RoCE: MTU of fabric links, in bytes (host MTU + 50 or more)",
    )
    anycast_gateway_mac: str | None = Field(
        default=None,
        exclude_if=left_out,
        description="RoCE: the MAC of every leaf's anycast gateway, lower-case",
    )
    max_lossless_priorities: int | None = Field(
        default=None,
        exclude_if=left_out,
        description="RoCE: how many priorities may be lossless (PFC), 1-8",
    )
    created_at: datetime = Field(description="When the fabric was registered, RFC 3339 UTC")


class RoceFabricCreate(Strict):
    """Body that registers a RoCE (EVPN-VXLAN) fabric: its VLAN, VNI and prefix pools and limits.

    They are checked together on creation (disjoint VNI ranges, MTU headroom for VXLAN and so
    on; a 422 lists every problem) and fixed for good once the fabric exists.
    """

    name: Slug = Field(
        description="The fabric's name, unique among fabrics; it names the fabric in paths"
    )
    kind: Literal["roce"] = Field(description="'roce': the body's discriminator")
    vlan_range: VlanRange = Field(
        default=VlanRange(first=100, last=3999),
        description="VLAN IDs the service hands to segments (each VRF takes two: its L2 "
        "segment's and its L3VNI's)",
    )
    l2vni_range: VniRange = Field(
        default=VniRange(first=10000, last=19999),
        description="VXLAN VNIs of L2 segments; must not overlap `l3vni_range`",
    )
    l3vni_range: VniRange = Field(
        default=VniRange(first=50000, last=59999),
        description="VXLAN VNIs of VRFs (L3VNIs); must not overlap `l2vni_range`",
    )
    tenant_prefix_pool: TenantPrefixPool = Field(
        default=IPv4Network("10.64.0.0/10"),
        description="IPv4 CIDR (unicast, no wider than a /8) each segment's subnet is cut from",
    )
    # A subnet of the pool (no wider than a /8); a /30 is the smallest with a gateway and a host.
    tenant_prefix_length: StrictInt = Field(
        default=24,
        ge=MIN_POOL_PREFIX_LENGTH,
        le=MAX_TENANT_PREFIX_LENGTH,
        description="Prefix length of each segment's subnet, 8-30 and not shorter than the pool's",
    )
    rt_asn: RouteTargetAsn = Field(
        default=65000, description="2-byte ASN of the type-0 route targets (1-65535)"
    )
    host_mtu: Mtu = Field(
        default=9000, description="MTU of host-facing ports and tenant VLANs, bytes (68-9216)"
    )
    underlay_mtu: Mtu = Field(
        default=9216,
        description="MTU of fabric links, bytes (68-9216): at least host MTU + 50 (VXLAN)",
    )
    anycast_gateway_mac: str = Field(
        default="00:00:5e:00:01:01",
        pattern=MAC_PATTERN,
        description="MAC of the anycast gateway on every leaf, six lower-case hex pairs "
        "separated by ':'",
    )
    # IEEE 802.1Qbb: PFC has 8 priorities.
    max_lossless_priorities: StrictInt = Field(
        default=2,
        ge=1,
        le=PFC_PRIORITIES,
        description="How many priorities QoS classes may make lossless (PFC), 1-8",
    )


class RoceFabricSettingsView(BaseModel):
    """The RoCE members of a fabric resource: pools as ranges, limits as stored."""

    vlan_range: IntRange = Field(description="VLAN IDs for segments (2-4094)")
    l2vni_range: IntRange = Field(description="VXLAN VNIs of L2 segments")
    l3vni_range: IntRange = Field(description="VXLAN VNIs of VRFs (L3VNIs)")
    tenant_prefix_pool: str = Field(description="IPv4 CIDR the segments' subnets are cut from")
    tenant_prefix_length: int = Field(description="Prefix length of each segment's subnet")
    rt_asn: int = Field(description="2-byte ASN of the type-0 route targets")
    host_mtu: int = Field(description="MTU of host-facing ports and tenant VLANs, bytes")
    underlay_mtu: int = Field(description="MTU of fabric links, bytes")
    anycast_gateway_mac: str = Field(description="MAC of every leaf's anycast gateway")
    max_lossless_priorities: int = Field(description="How many priorities may be lossless")


AnyFabricCreate = Annotated[
    FabricCreate | RoceFabricCreate,
    Field(
        discriminator="kind",
        description="An InfiniBand fabric (`kind` 'infiniband') or a RoCE fabric ('roce')",
    ),
]
