"""Which IPv4 addresses and prefixes a RoCE fabric may use: loopbacks, VTEPs, tenant subnets.

Tenant subnets carry host traffic behind an anycast gateway, and a leaf's loopback is its router
ID, its route distinguisher and (as VTEP) the source of every VXLAN packet: all of them must be
routable unicast. A range that is not unicast anywhere is refused by name.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

# Ranges that never carry unicast traffic between hosts. `IPv4Network.is_multicast` and its
# siblings hold only when the whole network lies in the range, so 0.0.0.0/0 would pass them;
# overlap with an explicit table catches a pool that merely contains one.
NOT_UNICAST: tuple[tuple[IPv4Network, str], ...] = (
    (IPv4Network("0.0.0.0/8"), "'this network' (RFC 1122 §3.2.1.3)"),
    (IPv4Network("127.0.0.0/8"), "loopback (RFC 1122 §3.2.1.3)"),
    (IPv4Network("169.254.0.0/16"), "link-local (RFC 3927)"),
    (IPv4Network("224.0.0.0/4"), "multicast (RFC 5771)"),
    # Class E, with the limited broadcast address 255.255.255.255 (RFC 919) at its end.
    (IPv4Network("240.0.0.0/4"), "reserved (RFC 1112 §4)"),
)


# RFC 1918's largest private block, 10.0.0.0/8, is the widest range one operator holds as a unit;
# a wider pool necessarily spans address space the operator does not own.
MIN_POOL_PREFIX_LENGTH = 8


def address_problem(address: IPv4Address, what: str = "address") -> str | None:
    """Why `address` cannot be a loopback or VTEP (not routable unicast), or None when it can."""
    for network, label in NOT_UNICAST:
        if address in network:
            return f"{what} {address} is {label}, not a unicast address"
    return None


def prefix_pool_problem(pool: IPv4Network, what: str = "tenant prefix pool") -> str | None:
    """Why `pool` cannot hand out tenant subnets, or None when it can.

    A pool must be no wider than a /8 and overlap none of the ranges in `NOT_UNICAST`.
    """
    if pool.prefixlen < MIN_POOL_PREFIX_LENGTH:
        return f"{what} {pool} is wider than a /{MIN_POOL_PREFIX_LENGTH}"
    for network, label in NOT_UNICAST:
        if pool.overlaps(network):
            return f"{what} {pool} overlaps {network}, which is {label}"
    return None
