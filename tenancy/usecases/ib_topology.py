"""InfiniBand topology reconcile: the fabric's switches, nodes and ports against a discovery.

The rules are tenancy/usecases/topology.py's; this module makes their cost proportional to what
changed. The file's ports are keyed as the records are (`Discovery`) before the write lock is
taken. Under it, one bulk read of the ports (plain tuples) is compared with them: an unchanged file
writes nothing. Otherwise only the differences are read further and written, each kind of
change in one executemany (tenancy/store/bulk.py), never through per-row ORM objects.

Nothing here sorts or compares tuples of 100,000 ports in one C call: such a call holds the GIL
for 100 ms or more and stops a server's event loop; loops in Python let it run every few ms.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import BindParameter, bindparam, delete, update
from sqlalchemy import select as core_select
from sqlmodel import Session, col

from policies.infiniband.model import format_guid
from policies.infiniband.parse_ibnetdiscover import DiscoveredTopology, is_reserved_guid
from policies.node_state import keeps_ports
from tenancy import models as m
from tenancy.record.node_states import count_listed_nodes, mark_presence
from tenancy.record.port_identity import ib_moves, settle_moves
from tenancy.schemas import PortMove, SwitchChange, TopologyImportResult, TopologyPortChange
from tenancy.store.bulk import execute_many, insert_rows
from tenancy.store.db import fetch_all
from tenancy.usecases.fabrics import count_where

# A port's place, recorded or discovered: (host, HCA, port number, switch GUID, switch name, switch
# port); the switch fields are None for a port that is not cabled to a switch.
Place = tuple[str, str, int, str | None, str | None, int | None]
# A switch's record: (name, ports, absent).
SwitchValues = tuple[str, int, bool]
# The API's TopologyPortChange as plain values: (guid, node, hca, port) of an added port, and
# (guid, node, hca, port, allocated, "kept" or "removed") of a missing one.
Added = tuple[str, str, str, int]
Missing = tuple[str, str, str, int, bool, Literal["kept", "removed"]]
# Port GUIDs per `IN (...)` query: well under SQLite's and PostgreSQL's limits of parameters.
GUIDS_PER_QUERY = 500


@dataclass(frozen=True, slots=True)
class Discovery:
    """What an ibnetdiscover file reports, keyed as the records are (GUIDs formatted)."""

    switches: dict[str, SwitchValues]
    ports: dict[str, Place]
    hostnames: frozenset[str]


def discovery_of(topology: DiscoveredTopology) -> Discovery:
    """Key the parsed file's ports (pure: run it before the write lock)."""
    guid = format_guid
    switches = {guid(s.guid): (s.name, s.ports, False) for s in topology.switches}
    # One comprehension, with no call per port but the GUIDs' formatting (a helper function
    # per port costs a third more).
    ports: dict[str, Place] = {
        guid(p.guid): (
            p.hostname,
            p.hca,
            p.port,
            None if p.switch_guid is None else guid(p.switch_guid),
            p.switch_name,
            p.switch_port,
        )
        for p in topology.ca_ports
    }
    return Discovery(switches, ports, frozenset(p.hostname for p in topology.ca_ports))


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the reconcile did, as plain values; `result` builds the API model (after commit).

    `ports_changed` is false when no port (and so no node) was added, changed or removed: the
    fabric's snapshot is then unchanged, as switch records and node presence are not in it.
    """

    switches: int
    nodes: int
    ports: int
    ports_changed: bool
    added: list[Added] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    moved: list[PortMove] = field(default_factory=list)
    absent_nodes: list[str] = field(default_factory=list)
    absent_switches: list[SwitchChange] = field(default_factory=list)

    def result(self) -> TopologyImportResult:
        """The API model of the import's outcome."""
        # Dict displays: twice as fast as dict(zip(...)) for 100k added ports.
        added: list[TopologyPortChange] = [
            {"guid": g, "node": n, "hca": h, "port": p, "allocated": False, "action": "added"}
            for g, n, h, p in self.added
        ]
        missing: list[TopologyPortChange] = [
            {"guid": g, "node": n, "hca": h, "port": p, "allocated": held, "action": action}
            for g, n, h, p, held, action in self.missing
        ]
        return TopologyImportResult(
            switches=self.switches,
            nodes=self.nodes,
            ports=self.ports,
            added=added,
            missing=missing,
            moved=self.moved,
            absent_nodes=self.absent_nodes,
            absent_switches=self.absent_switches,
        )


def reconcile(session: Session, fabric_id: int, discovery: Discovery) -> Outcome:
    """Write the difference between the fabric's records and `discovery`; report it.

    Raises:
        PortMovedError: a known port GUID appears on another host while either host guards its
            ports; checked before anything is written.
    """
    plan = _Plan.of(_recorded_ports(session, fabric_id), discovery.ports)
    moved = [] if plan is None else plan.settle_moves(session, fabric_id)
    switches = _known_switches(session, fabric_id)
    absent_switches = _upsert_switches(session, fabric_id, dict(switches), discovery.switches)
    impossible = switches.keys() | discovery.switches.keys()  # no port can have these GUIDs
    added, missing = ([], []) if plan is None else plan.apply(session, fabric_id, impossible)
    absent_nodes = mark_presence(session, fabric_id, set(discovery.hostnames))
    return Outcome(
        switches=len(discovery.switches),
        nodes=count_listed_nodes(session, fabric_id),
        ports=count_where(session, m.Port, fabric_id),
        ports_changed=plan is not None,
        added=added,
        missing=missing,
        moved=moved,
        absent_nodes=absent_nodes,
        absent_switches=absent_switches,
    )


def _recorded_ports(session: Session, fabric_id: int) -> dict[str, Place]:
    """The fabric's ports' places by GUID, as `Discovery` has them."""
    query = (
        core_select(
            col(m.Port.guid),
            col(m.Node.name),
            col(m.Port.hca),
            col(m.Port.port_num),
            col(m.Port.switch_guid),
            col(m.Port.switch_name),
            col(m.Port.switch_port),
        )
        .join(m.Node, col(m.Node.id) == col(m.Port.node_id))
        .where(col(m.Port.fabric_id) == fabric_id)
    )
    return {row[0]: row[1:] for row in fetch_all(session, query)}


@dataclass(frozen=True, slots=True)
class _Plan:
    """What differs, by port GUID: added (`new`), moved or re-cabled (`changed`), `gone`.

    Each list is sorted; `recorded` and `discovered` hold each side's places by GUID.
    """

    recorded: dict[str, Place]
    discovered: dict[str, Place]
    new: list[str]
    changed: list[str]
    gone: list[str]

    @classmethod
    def of(cls, recorded: dict[str, Place], discovered: dict[str, Place]) -> _Plan | None:
        """The plan from both sides' places by GUID; None when they are equal."""
        if _same(recorded, discovered):
            return None
        new = [guid for guid in discovered if guid not in recorded]
        changed = [g for g, place in discovered.items() if recorded.get(g, place) != place]
        gone = [guid for guid in recorded if guid not in discovered]
        for guids in (new, changed, gone):
            guids.sort()  # GUID strings alone: a first import's 100k sort in some 35 ms
        return cls(recorded, discovered, new, changed, gone)

    def settle_moves(self, session: Session, fabric_id: int) -> list[PortMove]:
        """The moves to apply (`tenancy.record.port_identity`'s rule); PortMovedError if refused."""
        hosts = [(guid, self.recorded[guid][0], self.discovered[guid][0]) for guid in self.changed]
        return settle_moves(session, fabric_id, ib_moves(hosts))

    def apply(
        self, session: Session, fabric_id: int, impossible: Collection[str]
    ) -> tuple[list[Added], list[Missing]]:
        """Write the plan; the added ports and the missing ones (`drop_missing`)."""
        return self.write(session, fabric_id), self.drop_missing(session, fabric_id, impossible)

    def write(self, session: Session, fabric_id: int) -> list[Added]:
        """Insert the new ports, update the changed ones; the added (guid, node, hca, port)."""
        places = [self.discovered[guid] for guid in self.new]
        node_ids = _ensure_nodes(session, fabric_id, {p[0] for p in places} | self._movers())
        inserts = [
            (fabric_id, guid, node_ids[p[0]], *p[1:])
            for guid, p in zip(self.new, places, strict=True)
        ]
        insert_rows(session, m.Port, ("fabric_id", "guid", *_PORT_FIELDS), inserts)
        ids = _port_ids(session, fabric_id, self.changed)
        updates = [
            (node_ids[p[0]], *p[1:], ids[guid][0])
            for guid, p in ((guid, self.discovered[guid]) for guid in self.changed)
        ]
        execute_many(session, _UPDATE_PORT, _UPDATE_PARAMS, updates)
        return [(guid, p[0], p[1], p[2]) for guid, p in zip(self.new, places, strict=True)]

    def _movers(self) -> set[str]:
        return {self.discovered[guid][0] for guid in self.changed}

    def drop_missing(
        self, session: Session, fabric_id: int, impossible: Collection[str]
    ) -> list[Missing]:
        """Remove the ports no longer listed, keep a held node's; report each (`_missing`)."""
        if not self.gone:
            return []
        ids = _port_ids(session, fabric_id, self.gone)
        corrected = {place[:3] for place in self.discovered.values()}
        missing, doomed = [], []
        for guid in self.gone:
            port_id, state = ids[guid]
            node, hca, port_num = self.recorded[guid][:3]
            change = _missing(guid, node, hca, port_num, state, corrected, impossible)
            missing.append(change)
            doomed += [(port_id,)] if change[5] == "removed" else []
        execute_many(session, _DELETE_PORT, ("port_id",), doomed)
        return missing


def _same(recorded: dict[str, Place], discovered: dict[str, Place]) -> bool:
    """``recorded == discovered``, compared in a Python loop.

    As one C call, the 100k lookups hold the GIL for up to 80 ms on a busy machine; a loop lets
    a server's event loop run meanwhile.
    """
    if len(recorded) != len(discovered):
        return False
    return all(recorded.get(guid) == place for guid, place in discovered.items())


def _missing(
    guid: str,
    node: str,
    hca: str,
    port_num: int,
    state: str,
    corrected: Collection[tuple[str, str, int]],
    impossible: Collection[str],
) -> Missing:
    """A port the import no longer lists: removed, or kept if its node is held.

    A held node's port is removed all the same when it cannot be right: the import lists another
    GUID in its place (same host, HCA and port number), or its GUID can identify no port
    (reserved, or a switch's). So a corrected import always replaces a bad record.
    """
    held = keeps_ports(state)
    wrong = (node, hca, port_num) in corrected or guid in impossible
    kept = held and not (wrong or is_reserved_guid(int(guid, 16)))
    return (guid, node, hca, port_num, held, "kept" if kept else "removed")


def _port_ids(session: Session, fabric_id: int, guids: Sequence[str]) -> dict[str, tuple[int, str]]:
    """(port id, node state) of the given recorded port GUIDs, a few hundred per query."""
    found: dict[str, tuple[int, str]] = {}
    for start in range(0, len(guids), GUIDS_PER_QUERY):
        query = (
            core_select(col(m.Port.guid), col(m.Port.id), col(m.Node.state))
            .join(m.Node, col(m.Node.id) == col(m.Port.node_id))
            .where(
                col(m.Port.fabric_id) == fabric_id,
                col(m.Port.guid).in_(guids[start : start + GUIDS_PER_QUERY]),
            )
        )
        found.update((guid, (port_id, state)) for guid, port_id, state in fetch_all(session, query))
    return found


def _new(names: Sequence[str]) -> dict[str, BindParameter[Any]]:
    # A bind parameter may not share its column's name in an INSERT or UPDATE (SQLAlchemy
    # reserves that name for itself).
    return {name: bindparam(f"new_{name}") for name in names}


def _params(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(f"new_{name}" for name in names)


_PORT_FIELDS = ("node_id", "hca", "port_num", "switch_guid", "switch_name", "switch_port")
_UPDATE_PORT = (
    update(m.Port).where(col(m.Port.id) == bindparam("port_id")).values(_new(_PORT_FIELDS))
)
_UPDATE_PARAMS = (*_params(_PORT_FIELDS), "port_id")
_DELETE_PORT = delete(m.Port).where(col(m.Port.id) == bindparam("port_id"))


def _ensure_nodes(session: Session, fabric_id: int, hostnames: set[str]) -> dict[str, int]:
    """Node ids by name, after adding the given hosts the fabric does not know (free compute)."""
    query = core_select(col(m.Node.name), col(m.Node.id)).where(col(m.Node.fabric_id) == fabric_id)
    known: dict[str, int] = dict(fetch_all(session, query))
    rows = [(fabric_id, name, "compute", "free") for name in sorted(hostnames - known.keys())]
    if rows:
        insert_rows(session, m.Node, ("fabric_id", "name", "role", "state"), rows)
        known = dict(fetch_all(session, query))
    return known


def _known_switches(session: Session, fabric_id: int) -> dict[str, SwitchValues]:
    """The fabric's switches by GUID: (name, ports, absent)."""
    rows = fetch_all(
        session,
        core_select(
            col(m.Switch.guid), col(m.Switch.name), col(m.Switch.ports), col(m.Switch.absent)
        ).where(col(m.Switch.fabric_id) == fabric_id),
    )
    return {guid: (name, ports, bool(absent)) for guid, name, ports, absent in rows}


def _upsert_switches(
    session: Session,
    fabric_id: int,
    existing: dict[str, SwitchValues],
    listed: dict[str, SwitchValues],
) -> list[SwitchChange]:
    """Insert new switches, update listed ones; those not listed are kept, marked absent.

    `existing` (the records) is consumed. Returns the switches not listed, by GUID.
    """
    new_rows, updates = [], []
    for guid, values in listed.items():
        if guid not in existing:
            new_rows.append((fabric_id, guid, *values))
        elif existing.pop(guid) != values:
            updates.append((*values, fabric_id, guid))
    # What is left was not listed.
    updates += [
        (name, ports, True, fabric_id, guid)
        for guid, (name, ports, absent) in existing.items()
        if not absent
    ]
    insert_rows(session, m.Switch, ("fabric_id", "guid", *_SWITCH_FIELDS), new_rows)
    execute_many(session, _UPDATE_SWITCH, _UPDATE_SWITCH_PARAMS, updates)
    return [SwitchChange(name=name, guid=guid) for guid, (name, *_) in sorted(existing.items())]


_SWITCH_FIELDS = ("name", "ports", "absent")
_UPDATE_SWITCH = (
    update(m.Switch)
    .where(
        col(m.Switch.fabric_id) == bindparam("switch_fabric"),
        col(m.Switch.guid) == bindparam("switch_guid"),
    )
    .values(_new(_SWITCH_FIELDS))
)
_UPDATE_SWITCH_PARAMS = (*_params(_SWITCH_FIELDS), "switch_fabric", "switch_guid")
