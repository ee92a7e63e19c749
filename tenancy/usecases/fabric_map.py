"""Where each owner's ports are on a fabric: the console's fabric map and its matrix's owners.

Read-only aggregate queries, one transaction each, never a snapshot load or a verification: the
map of the 100k-port benchmark fabric (3,128 leaves) must load within 2 s. The map
reads the host ports per leaf grouped by owner (`leaf_use`), and only for the leaves it draws
port by port, each port (`leaf_ports`). A node's owner is whoever holds it right now (its
`NodeAssignment`: an allocation's tenant or a service); a port of a node nobody holds is free.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, func
from sqlalchemy import select as columns_of
from sqlmodel import col, select

from policies.model import FabricKind, NodeRole, Owner
from tenancy import models as m
from tenancy.record import snapshot_log
from tenancy.store.lookups import fabric_named, tenant_named
from tenancy.store.uow import Tx, UnitOfWork

FREE = "free"
# A management node's ports (the SM's host, monitoring): never held, so never free to allocate.
MANAGEMENT = "management"
# Layouts kept per committed state (service, fabric, snapshot digest): the digest covers every
# port's host, HCA, switch and port and every node's owner (the snapshot's ports and
# partitions), so a layout is a function of it, as the verdict is (tenancy/store/read_cache.py).
LAYOUTS_KEPT = 8
_layouts: OrderedDict[tuple[int, int, str], FabricLayout] = OrderedDict()
_layouts_lock = threading.Lock()
# The HCA (or NIC) index ends its name: mlx5_3 is on rail 3 of a rail-optimised fabric, where
# HCA k of every host is cabled to the rail-k leaves (NVIDIA's DGX SuperPOD reference design).
_INDEX = re.compile(r"(\d+)$")


@dataclass(frozen=True, slots=True)
class LeafUse:
    """Host ports on one leaf: how many each owner holds (owner, `FREE` or `MANAGEMENT`) per HCA.

    `rail` is the HCA index most of the leaf's ports have (None: no index in their names);
    `ports` and the ports per owner are derived once, when the leaf is made.
    """

    leaf: str
    counts: tuple[tuple[str, str, int], ...]  # (hca or NIC name, owner, ports)
    rail: int | None = field(init=False)
    ports: int = field(init=False)
    _owners: dict[str, int] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        votes: dict[int, int] = {}
        owners: dict[str, int] = {}
        for hca, owner, count in self.counts:
            owners[owner] = owners.get(owner, 0) + count
            index = hca_index(hca)
            if index is not None:
                votes[index] = votes.get(index, 0) + count
        rail = max(sorted(votes), key=lambda i: votes[i]) if votes else None
        object.__setattr__(self, "rail", rail)
        object.__setattr__(self, "ports", sum(owners.values()))
        object.__setattr__(self, "_owners", owners)

    def by_owner(self) -> dict[str, int]:
        """Ports per owner on this leaf (a copy)."""
        return dict(self._owners)

    def holds(self, owner: str) -> int:
        """Ports `owner` holds on this leaf."""
        return self._owners.get(owner, 0)


@dataclass(frozen=True, slots=True)
class PortUse:
    """One host port on a leaf: its switch port, host, HCA (or NIC) and owner."""

    leaf: str
    port: str
    node: str
    hca: str
    owner: str


@dataclass(frozen=True, slots=True)
class FabricLayout:
    """A fabric's switches and the host ports per leaf, grouped by owner."""

    fabric: str
    kind: str
    spines: tuple[str, ...]  # switches with no host port (InfiniBand) or role spine (RoCE)
    leaves: tuple[LeafUse, ...]  # sorted by name


def hca_index(name: str) -> int | None:
    """The index that ends an HCA or NIC name (``mlx5_3`` -> 3, ``eth1`` -> 1), else None."""
    found = _INDEX.search(name)
    return int(found.group(1)) if found else None


def leaf_use(uow: UnitOfWork, *, fabric_name: str) -> FabricLayout:
    """The fabric's spines and, per leaf, its host ports counted by HCA and owner.

    Computed once per committed state of the fabric (one indexed query finds it), then kept.

    Raises:
        NotFoundError: no fabric has this name.
    """
    with uow.transaction(read_only=True) as tx:
        query = select(m.Fabric, snapshot_log.newest_digest()).where(m.Fabric.name == fabric_name)
        row = tx.session.exec(query).first()
        fabric, digest = row if row is not None else (fabric_named(tx.session, fabric_name), None)
        key = None if digest is None else (id(uow.reads), m.pk(fabric), digest)
        with _layouts_lock:
            kept = _layouts.get(key) if key is not None else None
        if kept is not None:
            return kept
        layout = _layout(tx, fabric)
    if key is not None:
        with _layouts_lock:
            _layouts[key] = layout
            while len(_layouts) > LAYOUTS_KEPT:
                _layouts.popitem(last=False)
    return layout


def _layout(tx: Tx, fabric: m.Fabric) -> FabricLayout:
    """Host ports per leaf, HCA and owner (one grouped query), and the spines."""
    leaf, hca, _ = _columns(fabric.kind)
    # Ports without a switch (ibnetdiscover saw no peer) are on no leaf: not drawn.
    query = (
        _owned(fabric, [leaf, hca, func.count()])
        .where(leaf.is_not(None))
        .group_by(leaf, hca, col(m.Tenant.name), col(m.Service.name), col(m.Node.role))
    )
    ports: dict[str, dict[tuple[str, str], int]] = {}
    for row in tx.session.execute(query):
        on_leaf = ports.setdefault(row[0], {})
        key = (row[1], _owner(row[3], row[4], row[5]))  # free compute and storage ports add up
        on_leaf[key] = on_leaf.get(key, 0) + int(row[2])
    leaves = tuple(
        LeafUse(n, tuple((hca, owner, count) for (hca, owner), count in ports[n].items()))
        for n in sorted(ports)
    )
    return FabricLayout(fabric.name, fabric.kind, _spines(tx, fabric, set(ports)), leaves)


def leaf_ports(uow: UnitOfWork, *, fabric_name: str, leaves: Collection[str]) -> list[PortUse]:
    """Every host port on `leaves`, by leaf and port, with its host, HCA and owner.

    Raises:
        NotFoundError: no fabric has this name.
    """
    if not leaves:
        return []
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        return _ports(tx, fabric, _columns(fabric.kind)[0].in_(leaves))


def tenant_ports(uow: UnitOfWork, *, tenant_name: str, fabric_name: str) -> list[PortUse]:
    """The host ports of the nodes `tenant_name` holds on the fabric, by leaf and port.

    Nothing about other owners: a tenant's own view of the fabric (its footprint).

    Raises:
        NotFoundError: no tenant or no fabric has this name.
    """
    with uow.transaction(read_only=True) as tx:
        tenant = tenant_named(tx.session, tenant_name)
        fabric = fabric_named(tx.session, fabric_name)
        leaf = _columns(fabric.kind)[0]
        return _ports(tx, fabric, (col(m.Tenant.id) == m.pk(tenant)) & leaf.is_not(None))


def fabric_owners(uow: UnitOfWork, *, fabric_name: str) -> tuple[str, list[str]]:
    """The fabric's kind and its owners as the verdict names them, in `Owner` order.

    Tenants holding an active segment on the fabric, then its services.

    Raises:
        NotFoundError: no fabric has this name.
    """
    with uow.transaction(read_only=True) as tx:
        fabric = fabric_named(tx.session, fabric_name)
        held = select(m.Segment.tenant_id).where(
            m.Segment.fabric_id == m.pk(fabric), m.Segment.state == "active"
        )
        tenants = tx.session.exec(select(m.Tenant.name).where(col(m.Tenant.id).in_(held))).all()
        services = tx.session.exec(
            select(m.Service.name).where(m.Service.fabric_id == m.pk(fabric))
        ).all()
    owners = [Owner.tenant(t) for t in tenants] + [Owner.service(s) for s in services]
    return fabric.kind, [str(o) for o in sorted(set(owners), key=lambda o: o.sort_key)]


def _columns(kind: str) -> tuple[Any, Any, Any]:
    """The leaf name, HCA (NIC) name and switch port columns of the fabric's kind."""
    if kind == FabricKind.ROCE:
        return col(m.RoceSwitch.name), col(m.Nic.name), col(m.RoceSwitchPort.name)
    return col(m.Port.switch_name), col(m.Port.hca), col(m.Port.switch_port)


def _ports(tx: Tx, fabric: m.Fabric, condition: Any) -> list[PortUse]:
    """The fabric's host ports meeting `condition`, by leaf and port."""
    leaf, hca, port = _columns(fabric.kind)
    query = _owned(fabric, [leaf, hca, port, col(m.Node.name)]).where(condition)
    rows = [
        PortUse(r[0], str(r[2]), r[3], r[1], _owner(r[4], r[5], r[6]))
        for r in tx.session.execute(query)
    ]
    return sorted(rows, key=lambda p: (p.leaf, _port_order(p.port)))


def _owned(fabric: m.Fabric, columns: Iterable[Any]) -> Select[Any]:
    """SELECT `columns` + tenant name, service name and node role over the host ports."""
    query = columns_of(*columns, col(m.Tenant.name), col(m.Service.name), col(m.Node.role))
    if fabric.kind == FabricKind.ROCE:
        query = (
            query.select_from(m.Nic)
            .join(m.RoceSwitchPort, col(m.RoceSwitchPort.id) == col(m.Nic.switch_port_id))
            .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
            .join(m.Node, col(m.Node.id) == col(m.Nic.node_id))
            .where(col(m.Nic.fabric_id) == m.pk(fabric))
        )
    else:
        query = (
            query.select_from(m.Port)
            .join(m.Node, col(m.Node.id) == col(m.Port.node_id))
            .where(col(m.Port.fabric_id) == m.pk(fabric))
        )
    return (
        query.outerjoin(m.NodeAssignment, col(m.NodeAssignment.node_id) == col(m.Node.id))
        .outerjoin(m.Allocation, col(m.Allocation.id) == col(m.NodeAssignment.allocation_id))
        .outerjoin(m.Tenant, col(m.Tenant.id) == col(m.Allocation.tenant_id))
        .outerjoin(m.Service, col(m.Service.id) == col(m.NodeAssignment.service_id))
    )


def _owner(tenant: str | None, service: str | None, role: str) -> str:
    if tenant is not None:
        return str(Owner.tenant(tenant))
    if service is not None:
        return str(Owner.service(service))
    return MANAGEMENT if role == NodeRole.MANAGEMENT else FREE


def _spines(tx: Tx, fabric: m.Fabric, leaves: set[str]) -> tuple[str, ...]:
    """Switches that are not leaves: RoCE's spines; InfiniBand switches without host ports."""
    if fabric.kind == FabricKind.ROCE:
        query = select(m.RoceSwitch.name).where(
            m.RoceSwitch.fabric_id == m.pk(fabric), m.RoceSwitch.role == "spine"
        )
    else:
        query = select(m.Switch.name).where(
            m.Switch.fabric_id == m.pk(fabric), col(m.Switch.absent).is_(False)
        )
    return tuple(sorted(n for n in tx.session.exec(query) if n not in leaves))


def _port_order(port: str) -> tuple[int, str]:
    """Switch ports in cabling order: Ethernet8 before Ethernet16, 2 before 10."""
    index = hca_index(port)
    return (-1 if index is None else index, port)
