"""A small rail-optimised fabric, on InfiniBand and on RoCE, for the policy rules (issue 13).

Three leaf groups of two rails: a compute node's HCA (or NIC) ``i`` is cabled to leaf
``leaf-g<group>-r<i>``, so the nodes of a group share exactly that group's two leaves.

    group 1: gpu01 ext-a, gpu02 ext-a, gpu03 free, stor01 (storage, rail 0)
    group 2: gpu04 int-a, gpu05 int-b, gpu06 free, tel01 (telemetry, rail 1)
    group 3: gpu07 ext-b, gpu08 free, sm01 (management, rail 0)

`POLICY` puts external tenants on dedicated leaves with gold/silver, internal ones on shared
leaves with bronze, lets internal tenants peer, and keeps telemetry internal. The fabric as built
satisfies it; each test changes one thing to refute one rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from ipaddress import IPv4Address, IPv4Network

from policies.infiniband.intent import plan_partitions
from policies.infiniband.model import IbPort, IbSettings, IbSnapshot
from policies.model import Grant, Node, NodeRole, Owner
from policies.policy import (
    Isolation,
    Peering,
    Policy,
    TenantFacts,
    TenantKind,
    TenantKindPolicy,
    Visibility,
)
from policies.roce.model import (
    Link,
    Nic,
    RoceSettings,
    RoceSnapshot,
    Switch,
    SwitchPort,
    SwitchRole,
    VrfSegment,
    with_grant_imports,
)
from tests.policies.roce_snapshots import BRONZE, GOLD, SILVER
from tests.policies.snapshots import BRONZE as IB_BRONZE
from tests.policies.snapshots import GOLD as IB_GOLD

POLICY = Policy(
    version=3,
    internal=TenantKindPolicy(qos_classes=("bronze",), peering=(TenantKind.INTERNAL,)),
    external=TenantKindPolicy(isolation=Isolation.DEDICATED_LEAF, qos_classes=("gold", "silver")),
    services=(("storage", Visibility.ALL), ("telemetry", Visibility.INTERNAL)),
)

# node -> (leaves it is cabled to, one per HCA/NIC in order, role)
CABLING: dict[str, tuple[tuple[str, ...], NodeRole]] = {
    **{
        f"gpu{n:02d}": ((f"leaf-g{g}-r0", f"leaf-g{g}-r1"), NodeRole.COMPUTE)
        for g, numbers in ((1, (1, 2, 3)), (2, (4, 5, 6)), (3, (7, 8)))
        for n in numbers
    },
    "stor01": (("leaf-g1-r0",), NodeRole.STORAGE),
    "tel01": (("leaf-g2-r1",), NodeRole.STORAGE),
    "sm01": (("leaf-g3-r0",), NodeRole.MANAGEMENT),
}
LEAVES = tuple(f"leaf-g{g}-r{r}" for g in (1, 2, 3) for r in (0, 1))

HOLDERS: dict[str, Owner] = {
    "gpu01": Owner.tenant("ext-a"),
    "gpu02": Owner.tenant("ext-a"),
    "gpu04": Owner.tenant("int-a"),
    "gpu05": Owner.tenant("int-b"),
    "gpu07": Owner.tenant("ext-b"),
    "stor01": Owner.service("storage"),
    "tel01": Owner.service("telemetry"),
}

TENANTS = (
    TenantFacts("ext-a", TenantKind.EXTERNAL, "gold"),
    TenantFacts("ext-b", TenantKind.EXTERNAL, "silver"),
    TenantFacts("int-a", TenantKind.INTERNAL, "bronze"),
    TenantFacts("int-b", TenantKind.INTERNAL, "bronze"),
)
GRANTS = (Grant("ext-a", "storage"), Grant("int-a", "storage"), Grant("int-a", "telemetry"))

# Segments per owner: (InfiniBand P_Key, index used for the RoCE identifiers).
TENANT_KEYS = {"ext-a": 0x0101, "ext-b": 0x0102, "int-a": 0x0103, "int-b": 0x0104}
SERVICE_KEYS = {"storage": 0x0100, "telemetry": 0x0105}
PEERING_KEY = 0x0106
INT_PEERING = Peering("int-a", "int-b")


def nodes(holders: Mapping[str, Owner] = HOLDERS) -> tuple[Node, ...]:
    """Every host with its holder (none when free)."""
    return tuple(
        Node(name, role, (holders[name],) if name in holders else ())
        for name, (_, role) in CABLING.items()
    )


def facts(**changes: str | None) -> tuple[TenantFacts, ...]:
    """`TENANTS` with some tenants' QoS class changed (``facts(**{"ext-a": "bronze"})``)."""
    return tuple(replace(t, qos_class=changes[t.name]) if t.name in changes else t for t in TENANTS)


# --- InfiniBand ----------------------------------------------------------------------------------


def ib_guid(node: str, hca: int) -> int:
    return 0x0002C90300000000 + 0x100 * (list(CABLING).index(node) + 1) + hca


def ib_ports() -> tuple[IbPort, ...]:
    """One HCA port per leaf a node is cabled to; switch ports numbered per leaf."""
    used: dict[str, int] = {}
    found = []
    for node, (leaves, _) in CABLING.items():
        for hca, leaf in enumerate(leaves):
            used[leaf] = used.get(leaf, 0) + 1
            found.append(IbPort(ib_guid(node, hca), node, f"mlx5_{hca}", 1, leaf, used[leaf]))
    return tuple(found)


def ib_snapshot(
    *,
    holders: Mapping[str, Owner] = HOLDERS,
    grants: tuple[Grant, ...] = GRANTS,
    tenants: tuple[TenantFacts, ...] = TENANTS,
    peerings: tuple[Peering, ...] = (),
    policy: Policy = POLICY,
) -> IbSnapshot:
    """The fabric on InfiniBand; each peering gets a shared partition (keys from 0x0106 up)."""
    held = nodes(holders)
    qos = {t.name: t.qos_class for t in tenants}
    partitions = plan_partitions(
        held,
        ib_ports(),
        {name: (key, qos.get(name)) for name, key in TENANT_KEYS.items()},
        SERVICE_KEYS,
        grants,
        {peering: PEERING_KEY + i for i, peering in enumerate(peerings)},
    )
    return IbSnapshot(
        IbSettings("ib-rail", pkey_first=0x0100, pkey_last=0x01FF),
        held,
        ib_ports(),
        partitions,
        grants,
        (IB_BRONZE, IB_GOLD),
        policy=policy,
        tenants=tenants,
        peerings=peerings,
    )


# --- RoCE ----------------------------------------------------------------------------------------


def _leaf_ports() -> dict[str, list[str]]:
    """Per leaf, the hosts cabled to it in order (host port ``Ethernet<8 i>``)."""
    hosts: dict[str, list[str]] = {leaf: [] for leaf in LEAVES}
    for node, (leaves, _) in CABLING.items():
        for leaf in leaves:
            hosts[leaf].append(node)
    return hosts


def roce_switches() -> tuple[Switch, ...]:
    ports = tuple(SwitchPort(f"Ethernet{8 * i}", str(8 * i), 400000) for i in range(5))
    uplink = (SwitchPort("Ethernet248", "248", 400000, "40m"),)
    leaves = tuple(
        Switch(
            leaf,
            SwitchRole.LEAF,
            65101 + i,
            IPv4Address(f"10.0.0.{i + 1}"),
            IPv4Address(f"10.0.1.{i + 1}"),
            ports + uplink,
        )
        for i, leaf in enumerate(LEAVES)
    )
    spine_ports = tuple(SwitchPort(f"Ethernet{8 * i}", str(8 * i), 400000) for i in range(6))
    spine = Switch("spine01", SwitchRole.SPINE, 65001, IPv4Address("10.0.0.101"), None, spine_ports)
    return (*leaves, spine)


def roce_links() -> tuple[Link, ...]:
    return tuple(
        Link(leaf, "Ethernet248", "spine01", f"Ethernet{8 * i}") for i, leaf in enumerate(LEAVES)
    )


def roce_nics() -> tuple[Nic, ...]:
    found = []
    for leaf, hosts in _leaf_ports().items():
        for i, host in enumerate(hosts):
            rail = CABLING[host][0].index(leaf)
            found.append(Nic(host, f"eth{rail}", leaf, f"Ethernet{8 * i}"))
    return tuple(sorted(found, key=lambda n: (n.node, n.name)))


def roce_segments(tenants: tuple[TenantFacts, ...]) -> tuple[VrfSegment, ...]:
    qos = {t.name: t.qos_class for t in tenants}
    owners = [Owner.tenant(name) for name in TENANT_KEYS] + [
        Owner.service(name) for name in SERVICE_KEYS
    ]
    return tuple(
        VrfSegment(
            owner,
            f"Vrf{50001 + i}",
            50001 + i,
            3001 + i,
            100 + i,
            10001 + i,
            IPv4Network(f"10.64.{i}.0/24"),
            i + 1,
            qos.get(owner.name) if owner.kind.value == "tenant" else None,
        )
        for i, owner in enumerate(owners)
    )


def l3vni(owner: Owner) -> int:
    owners = [Owner.tenant(name) for name in TENANT_KEYS] + [
        Owner.service(name) for name in SERVICE_KEYS
    ]
    return 50001 + owners.index(owner)


def roce_snapshot(
    *,
    holders: Mapping[str, Owner] = HOLDERS,
    grants: tuple[Grant, ...] = GRANTS,
    tenants: tuple[TenantFacts, ...] = TENANTS,
    peerings: tuple[Peering, ...] = (),
    policy: Policy = POLICY,
) -> RoceSnapshot:
    """The fabric on RoCE; grants and peerings import each other's L3VNI RT."""
    settings = RoceSettings(name="roce-rail")
    return RoceSnapshot(
        fabric=settings,
        switches=roce_switches(),
        links=roce_links(),
        nodes=nodes(holders),
        nics=roce_nics(),
        segments=with_grant_imports(roce_segments(tenants), grants, settings.rt_asn, peerings),
        grants=grants,
        qos_classes=(GOLD, SILVER, BRONZE),
        policy=policy,
        tenants=tenants,
        peerings=peerings,
    )
