"""A RoCE fabric's pools and limits, and the standards' bounds they must respect.

Checked once when a fabric is created (`check_roce_settings`); the MTU budget is also a rule of
every verdict.
"""

from __future__ import annotations

from policies.roce.addresses import prefix_pool_problem
from policies.roce.model import (
    MAX_SWITCH_MTU,
    MAX_VNI,
    MIN_SWITCH_MTU,
    VXLAN_OVERHEAD,
    RoceSettings,
)

# IEEE 802.1Q / sonic-vlan YANG: VLAN 1 is the default VLAN and 4095 is reserved.
MIN_VLAN, MAX_VLAN = 2, 4094


# Linux IFNAMSIZ: a VRF is a netdev, its name at most 15 characters (sonic-vrf YANG).
MAX_VRF_NAME = 15


# RFC 4364 §4.2: the assigned-number field of a type-1 RD (``<loopback>:<n>``) is 2 bytes.
MAX_RD_INDEX = 65535


# RFC 4360 §3.1: a type-0 route target has a 2-byte ASN administrator field.
MAX_RT_ASN = 65535


# A /30 is the smallest subnet with room for the anycast gateway and one host.
MAX_TENANT_PREFIX_LENGTH = 30


# IEEE 802.1Qbb: PFC has 8 priorities.
PFC_PRIORITIES = 8


# ECN marking probability is a WRED drop/mark percentage (sonic-wred-profile YANG: 0..100).
MAX_ECN_PROBABILITY = 100


MAX_ETS_WEIGHT_TOTAL = 100


def mtu_problem(settings: RoceSettings) -> str | None:
    """Why the underlay cannot carry a host frame plus VXLAN overhead, or None when it can."""
    if settings.host_mtu < MIN_SWITCH_MTU:
        return f"host MTU {settings.host_mtu} is below {MIN_SWITCH_MTU} (sonic-port YANG)"
    # VXLAN adds 50 bytes to every tenant frame; the underlay must carry it (docs/facts/roce.md §7).
    needed = settings.host_mtu + VXLAN_OVERHEAD
    if needed <= settings.underlay_mtu <= MAX_SWITCH_MTU:
        return None
    return (
        f"underlay MTU {settings.underlay_mtu} must be at least host MTU {settings.host_mtu} + "
        f"{VXLAN_OVERHEAD} (VXLAN) = {needed} and at most {MAX_SWITCH_MTU}"
    )


def check_roce_settings(settings: RoceSettings) -> list[str]:
    """Problems with a RoCE fabric's pools and limits, checked once when the fabric is created.

    Contract: returns an empty list iff the VLAN range lies in 2-4094, both VNI ranges in
    1-2^24-1, every range is ordered and the L2VNI and L3VNI ranges are disjoint, `rt_asn` is a
    2-byte ASN, the tenant prefix pool is unicast space no wider than a /8, the tenant prefix
    length lies between the pool's and /30, the host MTU is at least 68 and the underlay carries
    it plus VXLAN overhead, and 1-8 lossless priorities are allowed.

    Returns:
        One sentence per problem, in a fixed order.
    """
    problems = [
        *_range_problems("VLAN", settings.vlan_first, settings.vlan_last, MIN_VLAN, MAX_VLAN),
        *_range_problems("L2VNI", settings.l2vni_first, settings.l2vni_last, 1, MAX_VNI),
        *_range_problems("L3VNI", settings.l3vni_first, settings.l3vni_last, 1, MAX_VNI),
    ]
    problems += _pool_problems(settings)
    mtu = mtu_problem(settings)
    if mtu:
        problems.append(mtu)
    if not 1 <= settings.max_lossless_priorities <= PFC_PRIORITIES:
        problems.append(
            f"max_lossless_priorities {settings.max_lossless_priorities} is outside "
            f"1-{PFC_PRIORITIES}"
        )
    return problems


def _pool_problems(settings: RoceSettings) -> list[str]:
    problems = []
    l2 = range(settings.l2vni_first, settings.l2vni_last + 1)
    l3 = range(settings.l3vni_first, settings.l3vni_last + 1)
    if l2 and l3 and max(l2.start, l3.start) < min(l2.stop, l3.stop):
        problems.append(f"L2VNI range {_span(l2)} and L3VNI range {_span(l3)} overlap")
    if not 1 <= settings.rt_asn <= MAX_RT_ASN:
        problems.append(f"rt_asn {settings.rt_asn} is outside 1-{MAX_RT_ASN}")
    pool = settings.tenant_prefix_pool
    unusable = prefix_pool_problem(pool)
    if unusable:
        problems.append(unusable)
    if not pool.prefixlen <= settings.tenant_prefix_length <= MAX_TENANT_PREFIX_LENGTH:
        problems.append(
            f"tenant prefix length /{settings.tenant_prefix_length} must be between the pool's "
            f"/{pool.prefixlen} and /{MAX_TENANT_PREFIX_LENGTH}"
        )
    return problems


def _range_problems(label: str, first: int, last: int, low: int, high: int) -> list[str]:
    if first > last:
        return [f"{label} range {first}-{last} is empty (first > last)"]
    if first < low or last > high:
        return [f"{label} range {first}-{last} is outside {low}-{high}"]
    return []


def _span(values: range) -> str:
    return f"{values.start}-{values.stop - 1}"
