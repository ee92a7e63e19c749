"""Topology import: reconcile a fabric's inventory with `ibnetdiscover` output.

New ports are added; ports that vanished are removed, except those of allocated nodes, which are
kept (and reported) so that an allocation never loses ports silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, insert, update
from sqlalchemy import select as core_select
from sqlmodel import Session, col

from policies.errors import UnsupportedMediaTypeError
from policies.infiniband.model import format_guid
from policies.infiniband.parse_ibnetdiscover import (
    DiscoveredCaPort,
    DiscoveredSwitch,
    parse_ibnetdiscover,
)
from policies.model import FabricKind
from tenancy import models as m
from tenancy.db import fetch_all
from tenancy.documents import parse_inventory
from tenancy.fabrics import count_where
from tenancy.locks import lock_fabric
from tenancy.lookups import fabric_named
from tenancy.roce_inventory import reconcile_inventory, validate_inventory
from tenancy.schemas import RoceInventory, TopologyImportResult, TopologyPortChange
from tenancy.technology import require_kind, technology_of
from tenancy.uow import UnitOfWork
from tenancy.verification import commit_gate


def import_document(
    uow: UnitOfWork, *, fabric_name: str, media_type: str, text: str
) -> TopologyImportResult:
    """Import an inventory in the format the fabric takes; any other format is a 415.

    InfiniBand takes ibnetdiscover output (text/plain); RoCE takes an inventory document
    (application/json or application/yaml).
    """
    with uow.transaction() as tx:
        technology = technology_of(fabric_named(tx.session, fabric_name).kind)
    if not technology.accepts_topology(media_type):
        raise UnsupportedMediaTypeError(
            f"fabric '{fabric_name}' is {technology.kind}: its topology is "
            f"{technology.topology_wanted}, not '{media_type}'"
        )
    if technology.kind is FabricKind.ROCE:
        inventory = parse_inventory(text, media_type)
        return import_roce_inventory(uow, fabric_name=fabric_name, inventory=inventory)
    return import_topology(uow, fabric_name=fabric_name, text=text)


def import_roce_inventory(
    uow: UnitOfWork, *, fabric_name: str, inventory: RoceInventory
) -> TopologyImportResult:
    """Reconcile a RoCE fabric with an inventory document; verified before commit."""
    validate_inventory(inventory)
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        require_kind(fabric, FabricKind.ROCE, "PUT ibnetdiscover output as text/plain")
        result = reconcile_inventory(tx, fabric, inventory)
        _drop_empty_free_nodes(tx.session, m.pk(fabric))
        commit_gate(tx, fabric, "topology.import", f"fabrics/{fabric.name}/topology")
        # Nodes left without NICs (and free) are gone now: count what remains.
        return result.model_copy(update={"nodes": count_where(tx.session, m.Node, m.pk(fabric))})


def import_topology(uow: UnitOfWork, *, fabric_name: str, text: str) -> TopologyImportResult:
    """Parse `text` (ibnetdiscover output) and reconcile the fabric's switches, nodes and ports.

    Raises InputFormatError (naming the line) before anything is written if the text is malformed.
    """
    discovered = parse_ibnetdiscover(text)
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        require_kind(
            fabric,
            FabricKind.INFINIBAND,
            "PUT its inventory as application/json or application/yaml",
        )
        fabric_id = m.pk(fabric)
        _upsert_switches(tx.session, fabric_id, discovered.switches)
        node_ids = _ensure_nodes(tx.session, fabric_id, {p.hostname for p in discovered.ca_ports})
        added = _upsert_ports(tx.session, fabric_id, node_ids, discovered.ca_ports)
        seen = {format_guid(p.guid) for p in discovered.ca_ports}
        missing = _reconcile_missing(tx.session, fabric_id, seen)
        _drop_empty_free_nodes(tx.session, fabric_id)
        commit_gate(tx, fabric, "topology.import", f"fabrics/{fabric.name}/topology")
        return TopologyImportResult(
            switches=count_where(tx.session, m.Switch, fabric_id),
            nodes=count_where(tx.session, m.Node, fabric_id),
            ports=count_where(tx.session, m.Port, fabric_id),
            added=added,
            missing=missing,
        )


def _upsert_switches(
    session: Session, fabric_id: int, switches: Iterable[DiscoveredSwitch]
) -> None:
    existing = {
        guid: (row_id, name, ports)
        for row_id, guid, name, ports in fetch_all(
            session,
            core_select(
                col(m.Switch.id), col(m.Switch.guid), col(m.Switch.name), col(m.Switch.ports)
            ).where(col(m.Switch.fabric_id) == fabric_id),
        )
    }
    new_rows = []
    for switch in switches:
        guid = format_guid(switch.guid)
        if guid not in existing:
            new_rows.append(
                {"fabric_id": fabric_id, "guid": guid, "name": switch.name, "ports": switch.ports}
            )
        elif existing[guid][1:] != (switch.name, switch.ports):
            session.connection().execute(
                update(m.Switch)
                .where(col(m.Switch.id) == existing[guid][0])
                .values(name=switch.name, ports=switch.ports)
            )
    if new_rows:
        session.connection().execute(insert(m.Switch), new_rows)


def _ensure_nodes(session: Session, fabric_id: int, hostnames: set[str]) -> dict[str, int]:
    query = core_select(col(m.Node.name), col(m.Node.id)).where(col(m.Node.fabric_id) == fabric_id)
    known = dict(fetch_all(session, query))
    new_rows = [
        {"fabric_id": fabric_id, "name": name, "role": "compute"}
        for name in sorted(hostnames - known.keys())
    ]
    if new_rows:
        session.connection().execute(insert(m.Node), new_rows)
        known = dict(fetch_all(session, query))
    return known


def _existing_ports(session: Session, fabric_id: int) -> dict[str, tuple[Any, ...]]:
    rows = fetch_all(
        session,
        core_select(
            col(m.Port.guid),
            col(m.Port.id),
            col(m.Port.node_id),
            col(m.Port.hca),
            col(m.Port.port_num),
            col(m.Port.switch_guid),
            col(m.Port.switch_name),
            col(m.Port.switch_port),
        ).where(col(m.Port.fabric_id) == fabric_id),
    )
    return {row[0]: row[1:] for row in rows}


def _port_values(port: DiscoveredCaPort, node_id: int) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "hca": port.hca,
        "port_num": port.port,
        "switch_guid": format_guid(port.switch_guid) if port.switch_guid is not None else None,
        "switch_name": port.switch_name,
        "switch_port": port.switch_port,
    }


def _upsert_ports(
    session: Session,
    fabric_id: int,
    node_ids: dict[str, int],
    ports: Iterable[DiscoveredCaPort],
) -> list[TopologyPortChange]:
    existing = _existing_ports(session, fabric_id)
    new_rows, added = [], []
    for port in ports:
        guid, values = format_guid(port.guid), _port_values(port, node_ids[port.hostname])
        if guid not in existing:
            new_rows.append({"fabric_id": fabric_id, "guid": guid, **values})
            added.append(
                TopologyPortChange(guid=guid, node=port.hostname, hca=port.hca, port=port.port)
            )
        elif tuple(existing[guid][1:]) != tuple(values.values()):
            session.connection().execute(
                update(m.Port).where(col(m.Port.id) == existing[guid][0]).values(**values)
            )
    if new_rows:
        session.connection().execute(insert(m.Port), new_rows)
    return sorted(added, key=lambda change: change.guid)


def _reconcile_missing(
    session: Session, fabric_id: int, seen: set[str]
) -> list[TopologyPortChange]:
    rows = fetch_all(
        session,
        core_select(
            col(m.Port.id),
            col(m.Port.guid),
            col(m.Node.name),
            col(m.Port.hca),
            col(m.Port.port_num),
            col(m.NodeAssignment.node_id),
        )
        .join(m.Node, col(m.Node.id) == col(m.Port.node_id))
        .outerjoin(m.NodeAssignment, col(m.NodeAssignment.node_id) == col(m.Node.id))
        .where(col(m.Port.fabric_id) == fabric_id),
    )
    missing, doomed = [], []
    for port_id, guid, node, hca, port_num, assigned in rows:
        if guid in seen:
            continue
        held = assigned is not None
        missing.append(
            TopologyPortChange(
                guid=guid,
                node=node,
                hca=hca,
                port=port_num,
                allocated=held,
                action="kept" if held else "removed",
            )
        )
        if not held:
            doomed.append(port_id)
    if doomed:
        session.connection().execute(delete(m.Port).where(col(m.Port.id).in_(doomed)))
    return sorted(missing, key=lambda change: change.guid)


def _drop_empty_free_nodes(session: Session, fabric_id: int) -> None:
    with_ports = core_select(col(m.Port.node_id)).where(col(m.Port.fabric_id) == fabric_id)
    with_nics = core_select(col(m.Nic.node_id)).where(col(m.Nic.fabric_id) == fabric_id)
    held = core_select(col(m.NodeAssignment.node_id))
    session.connection().execute(
        delete(m.Node).where(
            col(m.Node.fabric_id) == fabric_id,
            col(m.Node.id).not_in(with_ports),
            col(m.Node.id).not_in(with_nics),
            col(m.Node.id).not_in(held),
        )
    )
