"""Builders of engine snapshots with literal, readable data (no database)."""

from __future__ import annotations

from policies.infiniband.intent import plan_partitions
from policies.infiniband.model import (
    IbPort,
    IbSettings,
    IbSnapshot,
    Member,
    Partition,
    QosClass,
)
from policies.model import Grant, Node, NodeRole, Owner

GOLD = QosClass("gold", ib_sl=3, ib_rate=3, ib_mtu=4, vlarb_weight=128)
BRONZE = QosClass("bronze", ib_sl=1, ib_rate=3, ib_mtu=4, vlarb_weight=16)

# Two ports per host: guid = 0x1000 * host index + port index.
HOSTS = {"gpu0001": 1, "gpu0002": 2, "gpu0003": 3, "gpu0004": 4, "stor01": 5, "sm01": 6}


def guid(host: str, hca: int = 0) -> int:
    return 0x0002C90300000000 + 0x1000 * HOSTS[host] + hca


def ports() -> tuple[IbPort, ...]:
    return tuple(
        IbPort(guid(host, hca), host, f"mlx5_{hca}", 1, f"leaf0{hca + 1}", index)
        for host, index in HOSTS.items()
        for hca in (0, 1)
    )


def two_tenant_nodes() -> tuple[Node, ...]:
    """acme holds gpu0001-2, globex gpu0003; gpu0004 is free; stor01 runs 'storage'."""
    return (
        Node("gpu0001", NodeRole.COMPUTE, (Owner.tenant("acme"),)),
        Node("gpu0002", NodeRole.COMPUTE, (Owner.tenant("acme"),)),
        Node("gpu0003", NodeRole.COMPUTE, (Owner.tenant("globex"),)),
        Node("gpu0004", NodeRole.COMPUTE),
        Node("stor01", NodeRole.STORAGE, (Owner.service("storage"),)),
        Node("sm01", NodeRole.MANAGEMENT),
    )


def fabric(pkeys_per_port: int = 128) -> IbSettings:
    return IbSettings("ib-east", pkey_first=0x0100, pkey_last=0x01FF, pkeys_per_port=pkeys_per_port)


def two_tenant_snapshot(
    *,
    grants: tuple[Grant, ...] = (Grant("acme", "storage"),),
    nodes: tuple[Node, ...] | None = None,
    pkeys_per_port: int = 128,
) -> IbSnapshot:
    """The reference fabric: acme (gold) and globex (bronze) with storage granted to acme."""
    nodes = nodes if nodes is not None else two_tenant_nodes()
    partitions = plan_partitions(
        nodes,
        ports(),
        {"acme": (0x0101, "gold"), "globex": (0x0102, "bronze")},
        {"storage": 0x0100},
        grants,
    )
    return IbSnapshot(fabric(pkeys_per_port), nodes, ports(), partitions, grants, (BRONZE, GOLD))


def with_partitions(snapshot: IbSnapshot, *extra: Partition) -> IbSnapshot:
    return IbSnapshot(
        snapshot.fabric,
        snapshot.nodes,
        snapshot.ports,
        snapshot.partitions + extra,
        snapshot.grants,
        snapshot.qos_classes,
        snapshot.default_full,
    )


def member(host: str, hca: int = 0, *, full: bool = True) -> Member:
    return Member(guid(host, hca), full)
