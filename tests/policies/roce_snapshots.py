"""A literal RoCE fabric shared by the RoCE engine, renderer and conformance tests.

Two leaves (rail-optimised: NIC eth0 of every node on leaf01, eth1 on leaf02), one spine,
tenants acme (gold) and globex (bronze), a storage service on stor01 granted to acme.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from policies.model import Grant, Node, NodeRole, Owner
from policies.roce.model import (
    Link,
    Nic,
    RoceQos,
    RoceSettings,
    RoceSnapshot,
    Switch,
    SwitchPort,
    SwitchRole,
    VrfSegment,
    with_grant_imports,
)

GOLD = RoceQos("gold", dscp=26, tc=3, lossless=True, ets_weight=50)
SILVER = RoceQos("silver", dscp=28, tc=4, lossless=True, ets_weight=30)
BRONZE = RoceQos("bronze", dscp=10, tc=1, lossless=False, ets_weight=20)
SETTINGS = RoceSettings(name="roce-west")
HOSTS = ("gpu0001", "gpu0002", "gpu0003", "gpu0004", "stor01")


def _ports(count: int, uplinks: int) -> tuple[SwitchPort, ...]:
    host_ports = tuple(
        SwitchPort(f"Ethernet{8 * i}", ",".join(str(8 * i + k) for k in range(4)), 400000)
        for i in range(count)
    )
    uplink_ports = tuple(
        SwitchPort(
            f"Ethernet{248 - 8 * i}",
            ",".join(str(248 - 8 * i + k) for k in range(4)),
            400000,
            "40m",
        )
        for i in range(uplinks)
    )
    return host_ports + uplink_ports


def switches() -> tuple[Switch, ...]:
    leaves = tuple(
        Switch(
            f"leaf0{n}",
            SwitchRole.LEAF,
            65100 + n,
            IPv4Address(f"10.0.0.{n}"),
            IPv4Address(f"10.0.1.{n}"),
            _ports(len(HOSTS), 1),
        )
        for n in (1, 2)
    )
    spine = Switch(
        "spine01", SwitchRole.SPINE, 65000 + 1, IPv4Address("10.0.0.101"), None, _ports(0, 2)
    )
    return (*leaves, spine)


def links() -> tuple[Link, ...]:
    return (
        Link("leaf01", "Ethernet248", "spine01", "Ethernet248"),
        Link("leaf02", "Ethernet248", "spine01", "Ethernet240"),
    )


def nics() -> tuple[Nic, ...]:
    return tuple(
        Nic(host, f"eth{rail}", f"leaf0{rail + 1}", f"Ethernet{8 * index}")
        for index, host in enumerate(HOSTS)
        for rail in (0, 1)
    )


def nodes() -> tuple[Node, ...]:
    return (
        Node("gpu0001", NodeRole.COMPUTE, (Owner.tenant("acme"),)),
        Node("gpu0002", NodeRole.COMPUTE, (Owner.tenant("acme"),)),
        Node("gpu0003", NodeRole.COMPUTE, (Owner.tenant("globex"),)),
        Node("gpu0004", NodeRole.COMPUTE),
        Node("stor01", NodeRole.STORAGE, (Owner.service("storage"),)),
    )


def segments() -> tuple[VrfSegment, ...]:
    return (
        VrfSegment(
            Owner.tenant("acme"),
            "Vrf50001",
            50001,
            3001,
            100,
            10000,
            IPv4Network("10.64.0.0/24"),
            1,
            "gold",
        ),
        VrfSegment(
            Owner.tenant("globex"),
            "Vrf50002",
            50002,
            3002,
            101,
            10001,
            IPv4Network("10.64.1.0/24"),
            2,
            "bronze",
        ),
        VrfSegment(
            Owner.service("storage"),
            "Vrf50000",
            50000,
            3000,
            102,
            10002,
            IPv4Network("10.64.2.0/24"),
            3,
            None,
        ),
    )


def roce_snapshot(grants: tuple[Grant, ...] = (Grant("acme", "storage"),)) -> RoceSnapshot:
    return RoceSnapshot(
        fabric=SETTINGS,
        switches=switches(),
        links=links(),
        nodes=nodes(),
        nics=nics(),
        segments=with_grant_imports(segments(), grants, SETTINGS.rt_asn),
        grants=grants,
        qos_classes=(GOLD, SILVER, BRONZE),
    )
