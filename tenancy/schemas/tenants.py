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

    name: Slug
    # IBA: the SL is 4 bits (OpenSM qos-policy.conf "sl: 0..15").
    ib_sl: StrictInt = Field(ge=0, le=15, description="InfiniBand service level")
    ib_rate: StrictInt = Field(
        default=3,
        ge=IB_RATE_CODES.start,
        le=IB_RATE_CODES.stop - 1,
        description="OpenSM rate code of the IPoIB group (3 = 10 Gb/s, 16 = 100, 21 = 400)",
    )
    # IBA MTU codes (ib_types.h): 1 = 256 ... 5 = 4096.
    ib_mtu: StrictInt = Field(default=4, ge=1, le=5, description="MTU code (4 = 2048, 5 = 4096)")
    # OpenSM qos_vlarb_*: weight 0..255 in 64-byte credits; 0 would never serve the VL.
    vlarb_weight: StrictInt = Field(default=32, ge=1, le=255, description="VL arbitration weight")
    # RFC 2474: the DSCP is 6 bits (sonic DSCP_TO_TC_MAP keys 0..63).
    roce_dscp: StrictInt = Field(
        default=0, ge=0, le=63, description="DSCP the class's RoCE traffic uses"
    )
    # IEEE 802.1Q / 802.1Qbb: 8 priorities, which PFC and the queues follow.
    roce_tc: StrictInt = Field(
        default=0, ge=0, le=7, description="Traffic class = priority = queue"
    )
    lossless: StrictBool = Field(default=False, description="PFC (and ECN) on the class's priority")
    # sonic-scheduler YANG: DWRR weight 1..100.
    ets_weight: StrictInt = Field(default=10, ge=1, le=100, description="DWRR weight in percent")
    ecn_min_bytes: StrictInt = Field(
        default=153_600, ge=1, le=MAX_QUEUE_BYTES, description="WRED/ECN green minimum"
    )
    ecn_max_bytes: StrictInt = Field(
        default=1_536_000, ge=1, le=MAX_QUEUE_BYTES, description="WRED/ECN green maximum"
    )
    # sonic-wred-profile YANG: drop probability 0..100 percent; 0 would never mark.
    ecn_probability: StrictInt = Field(default=5, ge=1, le=100, description="ECN marking percent")


class QosClassView(QosClassCreate):
    """A QoS class as stored: the members of the request that defined it."""

    pass


class TenantCreate(Strict):
    """Body that onboards a tenant; its name stays taken forever, even after offboarding."""

    name: Slug
    kind: Literal["internal", "external"]
    qos_class: Slug = "bronze"
    billing_account: BillingAccount | None = Field(
        default=None, description="The account usage is billed to; defaults to the tenant name"
    )


class TenantPatch(Strict):
    """Body of PATCH /v1/tenants/{tenant} (operators): each member given is changed.

    `max_nodes` is the tenant's own node quota across all fabrics (null: its kind's quota).
    """

    max_nodes: StrictInt | None = Field(default=None, ge=0, le=2**31 - 1)
    qos_class: Slug | None = None
    billing_account: BillingAccount | None = None

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

    name: str
    kind: str
    status: str
    qos_class: str
    created_at: datetime
    offboarded_at: datetime | None
    billing_account: str
    max_nodes: int | None = None


class SegmentView(BaseModel):
    """An owner's InfiniBand partition by P_Key (``0x0101``); empty while it holds no segment."""

    kind: Literal["ib_partition"] = "ib_partition"
    pkey: str


class AllocationCreate(Strict):
    """Body that allocates nodes to a tenant on one fabric.

    Give exactly one of `nodes` (named free compute nodes, each listed once) or `count` (that many
    free compute nodes, picked in name order).
    """

    fabric: Slug
    nodes: list[NodeName] | None = Field(default=None, min_length=1, max_length=100_000)
    count: StrictInt | None = Field(default=None, ge=1, le=100_000)

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

    id: str
    tenant: str
    fabric: str
    nodes: list[str]
    segment: SegmentView | RoceSegmentView | None = Field(
        description="The tenant's segment on the fabric; null once the allocation is released "
        "(the segment may since have been released or reissued)."
    )
    created_at: datetime
    released_at: datetime | None = None


class ServiceCreate(Strict):
    """Body that creates a shared service on free compute or storage nodes of the fabric."""

    name: Slug
    nodes: list[NodeName] = Field(min_length=1, max_length=10_000)


class ServiceView(BaseModel):
    """A shared service: the nodes it holds and its own segment, which granted tenants reach."""

    name: str
    fabric: str
    nodes: list[str]
    segment: SegmentView | RoceSegmentView
    created_at: datetime


class GrantCreate(Strict):
    """Body that lets a tenant reach a shared service; one active grant per tenant and service."""

    fabric: Slug
    service: Slug


class GrantView(BaseModel):
    """A tenant's access to a shared service; `segment` is the service's segment it reaches.

    On InfiniBand the tenant's ports join the service partition as limited members, so tenants
    granted the same service still cannot reach each other.
    """

    id: str
    tenant: str
    fabric: str
    service: str
    segment: SegmentView | RoceSegmentView
    created_at: datetime
    revoked_at: datetime | None = None


class RoceSegmentView(BaseModel):
    """An owner's VRF segment on a RoCE fabric.

    The VRF is named after its L3VNI (``Vrf50001``), which has its own VLAN; the L2 segment is
    `vlan` and `l2vni`; `subnet` is taken from the fabric's tenant prefix pool.
    """

    kind: Literal["roce_vrf"] = "roce_vrf"
    vrf: str
    l3vni: int
    l3vni_vlan: int
    vlan: int
    l2vni: int
    subnet: str


class TenantSummary(Strict):
    """What the billing role sees of a tenant: its name and billing account, nothing else.

    See issues 4 and 6. Strict, so no fuller view ever validates as it.
    """

    name: str
    billing_account: str
