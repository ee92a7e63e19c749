"""Fabrics: creation requests (InfiniBand and RoCE) and the fabric resource."""

from __future__ import annotations

from datetime import datetime
from ipaddress import IPv4Network
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    model_serializer,
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
)


class PKeyRange(Strict):
    """The inclusive range of P_Keys an InfiniBand fabric hands to tenants and services.

    Both ends lie in 0x0001-0x7ffe (0x7fff is the default partition) and `first` must not be
    above `last`; the default is the whole range.
    """

    first: PKeyInput = "0x0001"
    last: PKeyInput = "0x7ffe"

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if int(self.first, 16) > int(self.last, 16):
            raise ValueError("pkey_range.first must not be above pkey_range.last")
        return self


class FabricCreate(Strict):
    """Body that registers an InfiniBand fabric: P_Key range and per-port budget, fixed for good."""

    name: Slug
    kind: Literal["infiniband"]
    pkey_range: PKeyRange = PKeyRange()
    # IBA: a P_Key table is at most 2048 blocks of 32 entries (reference/infiniband.md §2.3).
    pkeys_per_port: StrictInt = Field(
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


class RoceFabricCreate(Strict):
    """Body that registers a RoCE (EVPN-VXLAN) fabric: its VLAN, VNI and prefix pools and limits.

    They are checked together on creation (disjoint VNI ranges, MTU headroom for VXLAN and so
    on; a 422 lists every problem) and fixed for good once the fabric exists.
    """

    name: Slug
    kind: Literal["roce"]
    vlan_range: VlanRange = VlanRange(first=100, last=3999)
    l2vni_range: VniRange = VniRange(first=10000, last=19999)
    l3vni_range: VniRange = VniRange(first=50000, last=59999)
    tenant_prefix_pool: TenantPrefixPool = IPv4Network("10.64.0.0/10")
    # A subnet of the pool (no wider than a /8); a /30 is the smallest with a gateway and a host.
    tenant_prefix_length: StrictInt = Field(
        default=24, ge=MIN_POOL_PREFIX_LENGTH, le=MAX_TENANT_PREFIX_LENGTH
    )
    rt_asn: RouteTargetAsn = Field(
        default=65000, description="2-byte ASN of the type-0 route targets"
    )
    host_mtu: Mtu = Field(default=9000, description="Host-facing ports and tenant VLANs")
    underlay_mtu: Mtu = Field(default=9216, description="Fabric links: at least host MTU + 50")
    anycast_gateway_mac: str = Field(default="00:00:5e:00:01:01", pattern=MAC_PATTERN)
    # IEEE 802.1Qbb: PFC has 8 priorities.
    max_lossless_priorities: StrictInt = Field(default=2, ge=1, le=PFC_PRIORITIES)


class RoceFabricSettingsView(BaseModel):
    """The RoCE members of a fabric resource: pools as ranges, limits as stored."""

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


AnyFabricCreate = Annotated[FabricCreate | RoceFabricCreate, Field(discriminator="kind")]
