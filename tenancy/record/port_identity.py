"""Port identity across topology imports: the one rule for a known port that moved.

A port is identified by its GUID on InfiniBand, and on RoCE by the (node, NIC) cabled to a switch
port; what an import says about it (a NodeDescription, an inventory line) is an assertion, which a
host's root or a careless operator can get wrong. A known port that now appears on another host, or
on RoCE a NIC re-cabled to another switch port, moves only when no host involved guards its
ports (`policies.node_state.guards_its_ports`: held, storage or management). Otherwise the whole
import is refused with `PortMovedError` naming each refused move; applied moves are reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select as core_select
from sqlmodel import Session, col

from policies.errors import PortMovedError
from policies.node_state import guards_its_ports
from tenancy import models as m
from tenancy.schemas import PortMove, RoceInventory
from tenancy.store.db import fetch_all


@dataclass(frozen=True, slots=True)
class Move:
    """`port` appears at `target` where the record has `source`; `hosts` are the hosts involved."""

    port: str
    source: str
    target: str
    hosts: tuple[str, ...]

    def view(self) -> PortMove:
        """The API shape: ``{"port", "from", "to"}``."""
        return PortMove(port=self.port, source=self.source, target=self.target)


def settle_moves(session: Session, fabric_id: int, moves: Iterable[Move]) -> list[PortMove]:
    """The moves to apply and report, in port order, once none touches a guarded host.

    Raises:
        PortMovedError: a move's old or new host is held, storage or management; the extension
            ``moved`` lists every such move, and nothing was written yet.
    """
    moves = sorted(moves, key=lambda move: (move.port, move.source))
    if not moves:
        return []  # the usual import: no need to read every node's role and state
    guarded = _guarded_hosts(session, fabric_id)
    refused = [move for move in moves if guarded.intersection(move.hosts)]
    if refused:
        # The detail names a few; the `moved` extension names them all.
        listed = ", ".join(f"{x.port} from {x.source} to {x.target}" for x in refused[:5])
        listed += f" and {len(refused) - 5} more" if len(refused) > 5 else ""
        raise PortMovedError(
            f"the import moves {len(refused)} known port(s) to another place while a host "
            f"involved is allocated, in a service, or a storage or management node: {listed}; "
            "nothing was changed (correct the document, or release the host first)",
            moved=[move.view().model_dump(mode="json", by_alias=True) for move in refused],
        )
    return [move.view() for move in moves]


def _guarded_hosts(session: Session, fabric_id: int) -> set[str]:
    rows = fetch_all(
        session,
        core_select(col(m.Node.name), col(m.Node.role), col(m.Node.state)).where(
            col(m.Node.fabric_id) == fabric_id
        ),
    )
    return {name for name, role, state in rows if guards_its_ports(role, state)}


def ib_moves(hosts: Iterable[tuple[str, str, str]]) -> list[Move]:
    """Known port GUIDs whose NodeDescription now names another host.

    `hosts` holds (port GUID, recorded host, host the import reports) for known ports.
    """
    return [Move(guid, was, now, (was, now)) for guid, was, now in hosts if was != now]


def roce_moves(session: Session, fabric_id: int, inventory: RoceInventory) -> list[Move]:
    """Known NICs re-cabled to another switch port, and switch ports another host now reports."""
    reported = {
        (n.name, nic.name): f"{nic.switch}:{nic.port}" for n in inventory.nodes for nic in n.nics
    }
    reporters = {end: node for (node, _), end in reported.items()}
    moves = []
    for node, nic, end in _cabled_nics(session, fabric_id):
        now = reported.get((node, nic))
        if now is not None and now != end:
            moves.append(Move(f"{node}/{nic}", end, now, (node,)))
        reporter = reporters.get(end)
        if reporter is not None and reporter != node:
            moves.append(Move(end, node, reporter, (node, reporter)))
    return moves


def _cabled_nics(session: Session, fabric_id: int) -> list[tuple[str, str, str]]:
    rows = fetch_all(
        session,
        core_select(
            col(m.Node.name), col(m.Nic.name), col(m.RoceSwitch.name), col(m.RoceSwitchPort.name)
        )
        .join(m.Node, col(m.Node.id) == col(m.Nic.node_id))
        .join(m.RoceSwitchPort, col(m.RoceSwitchPort.id) == col(m.Nic.switch_port_id))
        .join(m.RoceSwitch, col(m.RoceSwitch.id) == col(m.RoceSwitchPort.switch_id))
        .where(col(m.Nic.fabric_id) == fabric_id),
    )
    return [(node, nic, f"{switch}:{port}") for node, nic, switch, port in rows]
