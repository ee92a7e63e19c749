"""Topology import: reconcile a fabric's inventory with `ibnetdiscover` output.

New ports are added; ports that vanished are removed, except those of held nodes, which are
kept (and reported) so that an allocation never loses ports silently. A known port GUID that now
claims another host moves only under the rule of `tenancy.port_identity`. Nodes and switches are
never deleted: those an import no longer lists are kept, marked absent, until one lists them again.
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
    DiscoveredTopology,
    is_reserved_guid,
    parse_ibnetdiscover,
)
from policies.model import FabricKind
from policies.node_state import keeps_ports
from tenancy import models as m
from tenancy.db import fetch_all
from tenancy.documents import parse_inventory
from tenancy.fabrics import count_where
from tenancy.locks import lock_fabric
from tenancy.lookups import fabric_named
from tenancy.node_states import count_listed_nodes, mark_presence
from tenancy.port_identity import ib_moves, settle_moves
from tenancy.roce_inventory import reconcile_inventory, validate_inventory
from tenancy.schemas import (
    RoceInventory,
    SwitchChange,
    TopologyImportResult,
    TopologyPortChange,
)
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
    with uow.transaction(read_only=True) as tx:
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
    """Reconcile a RoCE fabric with an inventory document; verified before commit.

    Raises:
        InvalidValueError: the document's parts do not fit together; nothing was written.
        PortMovedError: a known NIC is re-cabled, or a switch port claimed by another host,
            while a host involved guards its ports; nothing was written.
    """
    validate_inventory(inventory)
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        require_kind(fabric, FabricKind.ROCE, "PUT ibnetdiscover output as text/plain")
        result = reconcile_inventory(tx, fabric, inventory)
        commit_gate(tx, fabric, "topology.import", f"fabrics/{fabric.name}/topology")
        return result


def import_topology(uow: UnitOfWork, *, fabric_name: str, text: str) -> TopologyImportResult:
    """Parse `text` (ibnetdiscover output) and reconcile the fabric's switches, nodes and ports.

    Raises:
        InputFormatError: the text is malformed (naming the line); nothing was written.
        PortMovedError: a known port GUID claims another host while either host guards its
            ports (held, storage or management); nothing was written.
    """
    discovered = parse_ibnetdiscover(text)
    with uow.transaction() as tx:
        fabric = lock_fabric(tx.session, fabric_named(tx.session, fabric_name))
        require_kind(
            fabric,
            FabricKind.INFINIBAND,
            "PUT its inventory as application/json or application/yaml",
        )
        result = _reconcile(tx.session, m.pk(fabric), discovered)
        commit_gate(tx, fabric, "topology.import", f"fabrics/{fabric.name}/topology")
        return result


def _reconcile(
    session: Session, fabric_id: int, discovered: DiscoveredTopology
) -> TopologyImportResult:
    # Moves are checked before anything is written: a refusal changes nothing.
    moved = settle_moves(session, fabric_id, ib_moves(session, fabric_id, discovered.ca_ports))
    absent_switches = _upsert_switches(session, fabric_id, discovered.switches)
    hostnames = {p.hostname for p in discovered.ca_ports}
    node_ids = _ensure_nodes(session, fabric_id, hostnames)
    added = _upsert_ports(session, fabric_id, node_ids, discovered.ca_ports)
    missing = _reconcile_missing(session, fabric_id, discovered)
    absent_nodes = mark_presence(session, fabric_id, hostnames)
    return TopologyImportResult(
        switches=len(discovered.switches),
        nodes=count_listed_nodes(session, fabric_id),
        ports=count_where(session, m.Port, fabric_id),
        added=added,
        missing=missing,
        moved=moved,
        absent_nodes=absent_nodes,
        absent_switches=absent_switches,
    )


def _upsert_switches(
    session: Session, fabric_id: int, switches: Iterable[DiscoveredSwitch]
) -> list[SwitchChange]:
    """Insert new switches, update listed ones; those not listed are kept, marked absent."""
    existing = _known_switches(session, fabric_id)
    new_rows = []
    for switch in switches:
        guid, values = format_guid(switch.guid), (switch.name, switch.ports, False)
        if guid not in existing:
            new_rows.append({"fabric_id": fabric_id, "guid": guid, **_switch_values(values)})
        elif existing.pop(guid) != values:
            _update_switch(session, fabric_id, guid, _switch_values(values))
    if new_rows:
        session.connection().execute(insert(m.Switch), new_rows)
    # What is left was not listed.
    for guid, (name, ports, absent) in existing.items():
        if not absent:
            _update_switch(session, fabric_id, guid, _switch_values((name, ports, True)))
    return [SwitchChange(name=name, guid=guid) for guid, (name, *_) in sorted(existing.items())]


def _known_switches(session: Session, fabric_id: int) -> dict[str, tuple[str, int, bool]]:
    """The fabric's switches by GUID: (name, ports, absent)."""
    rows = fetch_all(
        session,
        core_select(
            col(m.Switch.guid), col(m.Switch.name), col(m.Switch.ports), col(m.Switch.absent)
        ).where(col(m.Switch.fabric_id) == fabric_id),
    )
    return {guid: (name, ports, bool(absent)) for guid, name, ports, absent in rows}


def _switch_values(values: tuple[str, int, bool]) -> dict[str, Any]:
    return dict(zip(("name", "ports", "absent"), values, strict=True))


def _update_switch(session: Session, fabric_id: int, guid: str, values: dict[str, Any]) -> None:
    session.connection().execute(
        update(m.Switch)
        .where(col(m.Switch.fabric_id) == fabric_id, col(m.Switch.guid) == guid)
        .values(**values)
    )


def _ensure_nodes(session: Session, fabric_id: int, hostnames: set[str]) -> dict[str, int]:
    query = core_select(col(m.Node.name), col(m.Node.id)).where(col(m.Node.fabric_id) == fabric_id)
    known = dict(fetch_all(session, query))
    new_rows = [
        {"fabric_id": fabric_id, "name": name, "role": "compute", "state": "free"}
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
    session: Session, fabric_id: int, discovered: DiscoveredTopology
) -> list[TopologyPortChange]:
    """Remove the ports the import no longer lists; a held node's are kept (and reported).

    A held node's port is removed all the same when it cannot be right: the import lists another
    GUID in its place (same host, HCA and port number), or its GUID can identify no port (reserved,
    or a switch's). So a corrected import always replaces a bad record (issue 10, item 5).
    """
    seen = {format_guid(p.guid) for p in discovered.ca_ports}
    corrected = {(p.hostname, p.hca, p.port) for p in discovered.ca_ports}
    impossible = _switch_guids(session, fabric_id)
    missing, doomed = [], []
    for port_id, guid, node, hca, port_num, state in _port_rows(session, fabric_id):
        if guid in seen:
            continue
        held = keeps_ports(state)
        wrong = (node, hca, port_num) in corrected or guid in impossible
        kept = held and not (wrong or is_reserved_guid(int(guid, 16)))
        missing.append(
            TopologyPortChange(
                guid=guid,
                node=node,
                hca=hca,
                port=port_num,
                allocated=held,
                action="kept" if kept else "removed",
            )
        )
        doomed += [] if kept else [port_id]
    if doomed:
        session.connection().execute(delete(m.Port).where(col(m.Port.id).in_(doomed)))
    return sorted(missing, key=lambda change: change.guid)


def _port_rows(session: Session, fabric_id: int) -> list[tuple[Any, ...]]:
    """Every port of the fabric with its slot (host, HCA, port number) and its node's state."""
    return fetch_all(
        session,
        core_select(
            col(m.Port.id),
            col(m.Port.guid),
            col(m.Node.name),
            col(m.Port.hca),
            col(m.Port.port_num),
            col(m.Node.state),
        )
        .join(m.Node, col(m.Node.id) == col(m.Port.node_id))
        .where(col(m.Port.fabric_id) == fabric_id),
    )


def _switch_guids(session: Session, fabric_id: int) -> set[str]:
    query = core_select(col(m.Switch.guid)).where(col(m.Switch.fabric_id) == fabric_id)
    return {guid for (guid,) in fetch_all(session, query)}
