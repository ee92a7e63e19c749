"""RoCE inventory import: switches, ports, links and host NICs from a JSON or YAML document.

The document is checked as a whole before anything is written (unknown switches or ports, a
port used twice, a leaf without a VTEP, duplicate addresses or names: 422 naming the item). Then
the fabric is reconciled: switches and ports are upserted by name, links replaced, NICs added;
NICs that vanished are removed unless their node is held, in which case they are kept and
reported, as on InfiniBand. A known NIC re-cabled to another switch port, or a switch port now
claimed by another host's NIC, moves only under the rule of `tenancy.record.port_identity`. Nodes
and switches the document no longer lists are kept, marked absent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from policies.errors import InvalidValueError
from policies.node_state import keeps_ports
from tenancy import models as m
from tenancy.record.node_states import count_listed_nodes, mark_presence
from tenancy.record.port_identity import roce_moves, settle_moves
from tenancy.schemas import (
    InventorySwitch,
    NicChange,
    RoceInventory,
    SwitchChange,
    TopologyImportResult,
)
from tenancy.store.db import fetch_all
from tenancy.store.uow import Tx
from tenancy.usecases.fabrics import count_where


def validate_inventory(inventory: RoceInventory) -> None:
    """Refuse a document whose parts do not fit together; the message names the item."""
    switches = {s.name: s for s in inventory.switches}
    _unique("switch name", [s.name for s in inventory.switches])
    _unique("loopback address", [str(s.loopback) for s in inventory.switches])
    _unique("VTEP address", [str(s.vtep) for s in inventory.switches if s.vtep])
    for switch in inventory.switches:
        _unique(f"port of switch '{switch.name}'", [p.name for p in switch.ports])
        if (switch.role == "leaf") != (switch.vtep is not None):
            raise InvalidValueError(
                f"switch '{switch.name}': a leaf needs a 'vtep', a spine has none"
            )
    used: list[str] = []
    for index, link in enumerate(inventory.links):
        for end in (link.a, link.b):
            _known_port(switches, end, f"links[{index}]")
            used.append(end)
    _unique("node name", [n.name for n in inventory.nodes])
    for node in inventory.nodes:
        _unique(f"NIC of node '{node.name}'", [nic.name for nic in node.nics])
        for nic in node.nics:
            end = f"{nic.switch}:{nic.port}"
            _known_port(switches, end, f"node '{node.name}' NIC '{nic.name}'")
            if switches[nic.switch].role != "leaf":
                raise InvalidValueError(
                    f"node '{node.name}' NIC '{nic.name}' is cabled to spine "
                    f"'{nic.switch}'; hosts attach to leaves"
                )
            used.append(end)
    _unique("switch port (cabled twice)", used)


def _known_port(switches: dict[str, InventorySwitch], end: str, where: str) -> None:
    switch, _, port = end.partition(":")
    found = switches.get(switch)
    if found is None:
        raise InvalidValueError(f"{where}: unknown switch '{switch}'")
    if port not in {p.name for p in found.ports}:
        raise InvalidValueError(f"{where}: switch '{switch}' has no port '{port}'")


def _unique(what: str, values: Iterable[str]) -> None:
    twice = sorted(v for v, n in Counter(values).items() if n > 1)
    if twice:
        raise InvalidValueError(f"duplicate {what}: {', '.join(twice)}")


def reconcile_roce_topology(
    tx: Tx, fabric: m.Fabric, inventory: RoceInventory
) -> TopologyImportResult:
    """Write a validated inventory to the fabric; returns counts, added, missing and moved NICs.

    Raises:
        PortMovedError: a known NIC is re-cabled, or a switch port claimed by another host,
            while a host involved guards its ports; checked before anything is written.
    """
    fabric_id = m.pk(fabric)
    moved = settle_moves(tx.session, fabric_id, roce_moves(tx.session, fabric_id, inventory))
    port_ids = _upsert_switches(tx.session, fabric_id, inventory)
    _replace_links(tx.session, fabric_id, inventory, port_ids)
    listed = [n.name for n in inventory.nodes]
    node_ids = _ensure_nodes(tx.session, fabric_id, listed)
    missing = _drop_vanished_nics(tx.session, fabric_id, inventory)
    added = _upsert_nics(tx.session, fabric_id, inventory, node_ids, port_ids)
    tx.session.flush()
    absent_nodes = mark_presence(tx.session, fabric_id, set(listed))
    return TopologyImportResult(
        switches=len(inventory.switches),
        nodes=count_listed_nodes(tx.session, fabric_id),
        ports=count_where(tx.session, m.Nic, fabric_id),
        added=added,
        missing=missing,
        moved=moved,
        absent_nodes=absent_nodes,
        absent_switches=_mark_absent_switches(tx.session, fabric_id, inventory),
    )


def _replace_links(
    session: Session, fabric_id: int, inventory: RoceInventory, port_ids: dict[str, int]
) -> None:
    session.connection().execute(delete(m.RoceLink).where(col(m.RoceLink.fabric_id) == fabric_id))
    for link in inventory.links:
        session.add(
            m.RoceLink(fabric_id=fabric_id, a_port_id=port_ids[link.a], b_port_id=port_ids[link.b])
        )


def _mark_absent_switches(
    session: Session, fabric_id: int, inventory: RoceInventory
) -> list[SwitchChange]:
    """Switches the document no longer lists: kept (their ports may hold kept NICs), absent."""
    listed = {s.name for s in inventory.switches}
    gone = [
        row
        for row in session.exec(select(m.RoceSwitch).where(m.RoceSwitch.fabric_id == fabric_id))
        if row.name not in listed
    ]
    for row in gone:
        row.absent = True
        session.add(row)
    session.flush()
    return [SwitchChange(name=row.name) for row in sorted(gone, key=lambda r: r.name)]


def _upsert_switches(session: Session, fabric_id: int, inventory: RoceInventory) -> dict[str, int]:
    known = {
        s.name: s
        for s in session.exec(select(m.RoceSwitch).where(m.RoceSwitch.fabric_id == fabric_id))
    }
    port_ids: dict[str, int] = {}
    for spec in inventory.switches:
        row = known.get(spec.name) or m.RoceSwitch(
            fabric_id=fabric_id, name=spec.name, role=spec.role, asn=spec.asn, loopback=""
        )
        row.role, row.asn, row.platform, row.absent = spec.role, spec.asn, spec.platform, False
        row.loopback, row.vtep = str(spec.loopback), str(spec.vtep) if spec.vtep else None
        session.add(row)
        session.flush()
        ports = {
            p.name: p
            for p in session.exec(
                select(m.RoceSwitchPort).where(m.RoceSwitchPort.switch_id == row.id)
            )
        }
        for port in spec.ports:
            prow = ports.get(port.name) or m.RoceSwitchPort(
                switch_id=m.pk(row), name=port.name, lanes="", speed=0
            )
            prow.lanes, prow.speed, prow.cable_length = port.lanes, port.speed, port.cable_length
            session.add(prow)
            session.flush()
            port_ids[f"{spec.name}:{port.name}"] = m.pk(prow)
    return port_ids


def _ensure_nodes(session: Session, fabric_id: int, names: list[str]) -> dict[str, int]:
    known = {n.name: n for n in session.exec(select(m.Node).where(m.Node.fabric_id == fabric_id))}
    for name in names:
        if name not in known:
            known[name] = m.Node(fabric_id=fabric_id, name=name, role="compute", state="free")
            session.add(known[name])
    session.flush()
    return {name: m.pk(node) for name, node in known.items()}


def _drop_vanished_nics(
    session: Session, fabric_id: int, inventory: RoceInventory
) -> list[NicChange]:
    """Remove NICs the document no longer lists, except those of held nodes (kept, reported).

    A kept NIC still occupies its switch port, so the document may not cable another NIC there.
    """
    wanted = {(n.name, nic.name) for n in inventory.nodes for nic in n.nics}
    cabled = {
        (f"{nic.switch}:{nic.port}"): (n.name, nic.name) for n in inventory.nodes for nic in n.nics
    }
    missing = []
    for nic_id, node, nic, state, switch, port in _nic_rows(session, fabric_id):
        if (node, nic) in wanted:
            continue
        held = keeps_ports(state)
        missing.append(
            NicChange(
                node=node,
                nic=nic,
                switch=switch,
                port=port,
                allocated=held,
                action="kept" if held else "removed",
            )
        )
        if not held:
            session.connection().execute(delete(m.Nic).where(col(m.Nic.id) == nic_id))
        elif f"{switch}:{port}" in cabled:
            other = cabled[f"{switch}:{port}"]
            raise InvalidValueError(
                f"switch port {switch}:{port} is cabled to node '{other[0]}' NIC '{other[1]}' in "
                f"the document but still holds NIC '{nic}' of allocated node '{node}'"
            )
    return sorted(missing, key=lambda c: (c.node, c.nic))


def _nic_rows(session: Session, fabric_id: int) -> list[tuple[Any, ...]]:
    return fetch_all(
        session,
        core_select(
            col(m.Nic.id),
            col(m.Node.name),
            col(m.Nic.name),
            col(m.Node.state),
            col(m.RoceSwitch.name),
            col(m.RoceSwitchPort.name),
        )
        .join(m.Node, col(m.Node.id) == col(m.Nic.node_id))
        .join(m.RoceSwitchPort, col(m.RoceSwitchPort.id) == col(m.Nic.switch_port_id))
        .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
        .where(col(m.Nic.fabric_id) == fabric_id),
    )


def _upsert_nics(
    session: Session,
    fabric_id: int,
    inventory: RoceInventory,
    node_ids: dict[str, int],
    port_ids: dict[str, int],
) -> list[NicChange]:
    """Insert new NICs and move re-cabled ones.

    Moved NICs are deleted and re-inserted, so two NICs may swap ports in one import without
    tripping the one-NIC-per-port constraint halfway.
    """
    existing = {
        (nic.node_id, nic.name): nic
        for nic in session.exec(select(m.Nic).where(m.Nic.fabric_id == fabric_id))
    }
    added, placed = [], []
    for node in inventory.nodes:
        for spec in node.nics:
            key, port_id = (node_ids[node.name], spec.name), port_ids[f"{spec.switch}:{spec.port}"]
            row = existing.get(key)
            if row is None:
                added.append(
                    NicChange(node=node.name, nic=spec.name, switch=spec.switch, port=spec.port)
                )
            elif row.switch_port_id != port_id:
                session.delete(row)
            else:
                continue
            placed.append(
                m.Nic(fabric_id=fabric_id, node_id=key[0], name=spec.name, switch_port_id=port_id)
            )
    session.flush()
    session.add_all(placed)
    return added
