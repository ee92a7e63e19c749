"""Tenants and what they hold: QoS classes, allocations, segments, shared services, grants."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Self

from pydantic import (
    BaseModel,
    Field,
    StrictBool,
    StrictInt,
    model_validator,
)

from tenancy.schemas.common import (
    IB_RATE_CODES,
    BillingAccount,
    NodeName,
    Slug,
    Strict,
)

# sonic-wred-profile YANG: thresholds are uint64 bytes of queue depth, but no switch buffers 2 GiB
# per queue, and the columns are 32-bit integers (PostgreSQL refuses more: a 500, not a 422).
MAX_QUEUE_BYTES = 2**31 - 1


class QosClassCreate(Strict):
    """Body that defines a QoS class, unique by name: how its tenants' traffic is treated.

    The ``ib_*`` and ``vlarb_weight`` members apply on InfiniBand; ``roce_*``, ``lossless``,
    ``ets_weight`` and ``ecn_*`` on RoCE.
    """

    name: Slug = Field(description="The class's name, unique, e.g. 'gold'; tenants name it")
    # IBA: the SL is 4 bits (OpenSM qos-policy.conf "sl: 0..15").
    ib_sl: StrictInt = Field(ge=0, le=15, description="InfiniBand service level (SL), 0-15")
    ib_rate: StrictInt = Field(
        default=3,
        ge=IB_RATE_CODES.start,
        le=IB_RATE_CODES.stop - 1,
        description="OpenSM rate code of the IPoIB group (3 = 10 Gb/s, 16 = 100, 21 = 400)",
    )
    # IBA MTU codes (ib_types.h): 1 = 256 ... 5 = 4096.
    ib_mtu: StrictInt = Field(default=4, ge=1, le=5, description="MTU code (4 = 2048, 5 = 4096)")
    # OpenSM qos_vlarb_*: weight 0..255 in 64-byte credits; 0 would never serve the VL.
    vlarb_weight: StrictInt = Field(
        default=32, ge=1, le=255, description="VL arbitration weight, 1-255 (units of 64 bytes)"
    )
    # RFC 2474: the DSCP is 6 bits (sonic DSCP_TO_TC_MAP keys 0..63).
    roce_dscp: StrictInt = Field(
        default=0, ge=0, le=63, description="DSCP the class's RoCE traffic uses, 0-63"
    )
    # IEEE 802.1Q / 802.1Qbb: 8 priorities, which PFC and the queues follow.
    roce_tc: StrictInt = Field(
        default=0, ge=0, le=7, description="Traffic class, 0-7: also its 802.1p priority and queue"
    )
    lossless: StrictBool = Field(default=False, description="PFC (and ECN) on the class's priority")
    # sonic-scheduler YANG: DWRR weight 1..100.
    ets_weight: StrictInt = Field(default=10, ge=1, le=100, description="DWRR weight in percent")
    ecn_min_bytes: StrictInt = Field(
        default=153_600,
        ge=1,
        le=MAX_QUEUE_BYTES,
        description="WRED/ECN green minimum threshold, bytes of queue depth",
    )
    ecn_max_bytes: StrictInt = Field(
        default=1_536_000,
        ge=1,
        le=MAX_QUEUE_BYTES,
        description="WRED/ECN green maximum threshold, bytes of queue depth",
    )
    # sonic-wred-profile YANG: drop probability 0..100 percent; 0 would never mark.
    ecn_probability: StrictInt = Field(
        default=5, ge=1, le=100, description="ECN marking probability, percent (1-100)"
    )


class QosClassView(QosClassCreate):
    """A QoS class as stored: the members of the request that defined it."""

    pass


class TenantCreate(Strict):
    """Body that onboards a tenant; its name stays taken forever, even after offboarding."""

    name: Slug = Field(description="The tenant's name, unique forever (also after offboarding)")
    kind: Literal["internal", "external"] = Field(
        description="internal (the operator's own teams) or external (customers): picks the "
        "policy's rules for the tenant"
    )
    qos_class: Slug = Field(
        default="bronze",
        description="Name of an existing QoS class the policy allows for the kind",
    )
    billing_account: BillingAccount | None = Field(
        default=None, description="The account usage is billed to; defaults to the tenant name"
    )


class TenantPatch(Strict):
    """Body of PATCH /v1/tenants/{tenant} (operators): each member given is changed.

    `max_nodes` is the tenant's own node quota across all fabrics (null: its kind's quota).
    """

    max_nodes: StrictInt | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="The tenant's own node quota across all fabrics, 0-2147483647; null: its "
        "kind's quota in the policy; omitted: unchanged",
    )
    qos_class: Slug | None = Field(
        default=None, description="Name of the new QoS class; omitted: unchanged (null refused)"
    )
    billing_account: BillingAccount | None = Field(
        default=None, description="The new billing account; omitted: unchanged (null refused)"
    )

    @model_validator(mode="after")
    def _no_null_names(self) -> Self:
        for name in ("qos_class", "billing_account"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"'{name}' cannot be null; omit it to keep the current one")
        return self


class TenantView(BaseModel):
    """A tenant; `status` is ``active``, or ``offboarded`` with `offboarded_at` set.

    `max_nodes` is its own node quota (null: its kind's quota in the policy applies).
    """

    name: str = Field(description="The tenant's name (a slug)")
    kind: str = Field(description="'internal' or 'external'")
    status: str = Field(description="'active' or 'offboarded'")
    qos_class: str = Field(description="Name of its QoS class")
    created_at: datetime = Field(description="When it was onboarded, RFC 3339 UTC")
    offboarded_at: datetime | None = Field(
        description="When it was offboarded, RFC 3339 UTC; null while active"
    )
    billing_account: str = Field(description="The account its usage is billed to")
    max_nodes: int | None = Field(
        default=None,
        description="Its own node quota across all fabrics; null: its kind's quota applies",
    )


class SegmentView(BaseModel):
    """An owner's InfiniBand partition by P_Key (``0x0101``); empty while it holds no segment."""

    kind: Literal["ib_partition"] = Field(
        default="ib_partition", description="'ib_partition': an InfiniBand segment"
    )
    pkey: str = Field(
        description="The partition's P_Key, 0x-prefixed 4-digit lower-case hex in 0x0001-0x7ffe"
    )


class AllocationCreate(Strict):
    """Body that allocates nodes to a tenant on one fabric.

    Give exactly one of `nodes` (named free compute nodes, each listed once) or `count` (that many
    free compute nodes, picked in name order).
    """

    fabric: Slug = Field(description="The fabric's name")
    nodes: list[NodeName] | None = Field(
        default=None,
        min_length=1,
        max_length=100_000,
        description="Names of free compute nodes to allocate (1-100000, each once); or `count`",
    )
    count: StrictInt | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="How many free compute nodes to allocate (1-100000), first by name; or `nodes`",
    )

    @model_validator(mode="after")
    def _nodes_or_count(self) -> Self:
        if (self.nodes is None) == (self.count is None):
            raise ValueError("give exactly one of 'nodes' or 'count'")
        if self.nodes is not None and len(set(self.nodes)) != len(self.nodes):
            raise ValueError("'nodes' lists a node twice")
        return self


class AllocationView(BaseModel):
    """An allocation's nodes and the tenant's segment on the fabric.

    All of a tenant's allocations on one fabric share that segment; it is released with the last
    of them.
    """

    id: str = Field(description="The allocation's id, a UUID")
    tenant: str = Field(description="The tenant's name")
    fabric: str = Field(description="The fabric's name")
    nodes: list[str] = Field(description="Names of the allocated nodes, sorted")
    segment: SegmentView | RoceSegmentView | None = Field(
        description="The tenant's segment on the fabric; null once the allocation is released "
        "(the segment may since have been released or reissued)."
    )
    created_at: datetime = Field(description="When the nodes were allocated, RFC 3339 UTC")
    released_at: datetime | None = Field(
        default=None, description="When they were released, RFC 3339 UTC; null while current"
    )


class ServiceCreate(Strict):
    """Body that creates a shared service on free compute or storage nodes of the fabric."""

    name: Slug = Field(description="The service's name, unique on the fabric, e.g. 'storage'")
    nodes: list[NodeName] = Field(
        min_length=1,
        max_length=10_000,
        description="Names of the free compute or storage nodes that serve it (1-10000); their "
        "ports are full members of its segment",
    )


class ServiceView(BaseModel):
    """A shared service: the nodes it holds and its own segment, which granted tenants reach."""

    name: str = Field(description="The service's name (a slug)")
    fabric: str = Field(description="The fabric's name")
    nodes: list[str] = Field(description="Names of the nodes it holds, sorted")
    segment: SegmentView | RoceSegmentView = Field(
        description="Its own segment (P_Key or VRF), which granted tenants reach"
    )
    created_at: datetime = Field(description="When it was created, RFC 3339 UTC")


class GrantCreate(Strict):
    """Body that lets a tenant reach a shared service; one active grant per tenant and service."""

    fabric: Slug = Field(description="The fabric's name")
    service: Slug = Field(description="The shared service's name on that fabric")


class GrantView(BaseModel):
    """A tenant's access to a shared service; `segment` is the service's segment it reaches.

    On InfiniBand the tenant's ports join the service partition as limited members, so tenants
    granted the same service still cannot reach each other.
    """

    id: str = Field(description="The grant's id, a UUID")
    tenant: str = Field(description="The tenant's name")
    fabric: str = Field(description="The fabric's name")
    service: str = Field(description="The shared service's name")
    segment: SegmentView | RoceSegmentView = Field(
        description="The service's segment the tenant reaches"
    )
    created_at: datetime = Field(description="When it was granted, RFC 3339 UTC")
    revoked_at: datetime | None = Field(
        default=None, description="When it was revoked, RFC 3339 UTC; null while active"
    )


class RoceSegmentView(BaseModel):
    """An owner's VRF segment on a RoCE fabric.

    The VRF is named after its L3VNI (``Vrf50001``), which has its own VLAN; the L2 segment is
    `vlan` and `l2vni`; `subnet` is taken from the fabric's tenant prefix pool.
    """

    kind: Literal["roce_vrf"] = Field(default="roce_vrf", description="'roce_vrf': a RoCE segment")
    vrf: str = Field(description="The VRF's name: 'Vrf' and its L3VNI, e.g. 'Vrf50001'")
    l3vni: int = Field(description="The VRF's L3VNI, from the fabric's l3vni_range")
    l3vni_vlan: int = Field(description="The VLAN ID the L3VNI is bound to, from vlan_range")
    vlan: int = Field(description="The L2 segment's VLAN ID, from vlan_range")
    l2vni: int = Field(description="The L2 segment's VNI, from the fabric's l2vni_range")
    subnet: str = Field(description="The segment's IPv4 subnet (CIDR), from tenant_prefix_pool")


class TenantSummary(Strict):
    """What the billing role sees of a tenant: its name and billing account, nothing else.

    Strict, so no fuller view ever validates as it.
    """

    name: str = Field(description="The tenant's name")
    billing_account: str = Field(description="The account its usage is billed to")
