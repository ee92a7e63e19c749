"""Numbers and addresses of request bodies and documents: strict, and bounded by their standard.

FastAPI validates a parsed body in pydantic's Python mode, where a lax ``int`` takes ``true``,
``"2"`` and ``2.0``; every number a client sends is a `StrictInt`, so only a JSON integer is one.
Each bound is the range of the standard the value feeds (a SONiC YANG leaf, an RFC, the IBA), so
nothing outside it reaches the database or an artifact.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from typing import Annotated

from pydantic import AfterValidator, Field, StrictInt

from policies.roce.addresses import address_problem, prefix_pool_problem
from policies.roce.model import MAX_SWITCH_MTU, MAX_VNI, MIN_SWITCH_MTU
from policies.roce.settings import MAX_RT_ASN, MAX_VLAN, MIN_VLAN
from tenancy.schemas.common import IntRange, Ipv4NetworkText, Ipv4Text

# sonic-vlan YANG: vlanid 2..4094 (IEEE 802.1Q: VLAN 1 is the default VLAN, 4095 reserved).
VlanId = Annotated[StrictInt, Field(ge=MIN_VLAN, le=MAX_VLAN)]


# RFC 7348 §5 and sonic-types vnid_type 1..16777215: a VNI is 24 bits and 0 is none.
Vni = Annotated[StrictInt, Field(ge=1, le=MAX_VNI)]


# sonic-port YANG: PORT mtu 68..9216 (68 is IPv4's minimum, RFC 791).
Mtu = Annotated[StrictInt, Field(ge=MIN_SWITCH_MTU, le=MAX_SWITCH_MTU)]


# RFC 4360 §3.1: the administrator of a type-0 route target is a 2-byte ASN (0 reserved, RFC 7607).
RouteTargetAsn = Annotated[StrictInt, Field(ge=1, le=MAX_RT_ASN)]


# RFC 6793: 4-byte ASNs; 0 is reserved (RFC 7607) and so is 4294967295 (RFC 7300).
Asn = Annotated[StrictInt, Field(ge=1, le=4_294_967_294)]


class VlanRange(IntRange):
    """An inclusive range of VLAN IDs, both ends in 2-4094; `first` must not be above `last`."""

    first: VlanId = Field(description="Lowest VLAN ID of the range, 2-4094")
    last: VlanId = Field(description="Highest VLAN ID of the range, 2-4094, not below `first`")


class VniRange(IntRange):
    """An inclusive range of VNIs, both ends in 1-16777215; `first` must not be above `last`."""

    first: Vni = Field(description="Lowest VNI of the range, 1-16777215 (24 bits)")
    last: Vni = Field(description="Highest VNI of the range, 1-16777215, not below `first`")


def _unicast(address: IPv4Address) -> IPv4Address:
    problem = address_problem(address)
    if problem is not None:
        raise ValueError(problem)
    return address


def _tenant_pool(pool: IPv4Network) -> IPv4Network:
    problem = prefix_pool_problem(pool)
    if problem is not None:
        raise ValueError(problem)
    return pool


# A loopback or VTEP: routable unicast (policies/roce/addresses.py says which ranges are not).
UnicastIpv4 = Annotated[Ipv4Text, AfterValidator(_unicast)]


# Where tenant subnets come from: unicast space no wider than a /8.
TenantPrefixPool = Annotated[Ipv4NetworkText, AfterValidator(_tenant_pool)]
