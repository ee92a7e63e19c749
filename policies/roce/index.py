"""Lookups the RoCE rules share: segments by owner and route target, node owners, first NICs."""

from __future__ import annotations

from collections import defaultdict

from policies.model import Owner, OwnerKind
from policies.policy_rules import allowed_peerings
from policies.roce.model import (
    Nic,
    RoceSnapshot,
    VrfSegment,
    route_target,
)
from policies.verdict import (
    Endpoint,
    ReachabilityEdge,
)

# An edge with the two endpoints that witness it and a sentence saying how they connect.
Witnessed = tuple[ReachabilityEdge, Endpoint, Endpoint, str]


class RoceIndex:
    """Lookups shared by the rules: segments by owner and route target, node owners, NICs."""

    def __init__(self, snapshot: RoceSnapshot) -> None:
        self.snapshot = snapshot
        self.settings = snapshot.fabric
        self.grants = frozenset(snapshot.grants)
        self.peerings = allowed_peerings(snapshot.policy, snapshot.tenants, snapshot.peerings)
        self.segment: dict[Owner, VrfSegment] = {}
        self.by_rt: dict[str, list[VrfSegment]] = defaultdict(list)
        for segment in snapshot.segments:
            self.segment.setdefault(segment.owner, segment)
            for vni in dict.fromkeys((segment.l3vni, segment.l2vni)):
                self.by_rt[route_target(self.settings.rt_asn, vni)].append(segment)
        self.owners = {node.name: node.owners for node in snapshot.nodes}
        self.first_nic: dict[str, Nic] = {}
        for nic in sorted(snapshot.nics, key=lambda n: (n.node, n.name)):
            self.first_nic.setdefault(nic.node, nic)
        self.home: dict[Owner, str] = {}
        for node in sorted(snapshot.nodes, key=lambda n: n.name):
            for owner in node.owners:
                self.home.setdefault(owner, node.name)

    def owners_of(self, node: str) -> tuple[Owner, ...]:
        """Owners of a host; a free (or unknown) host is its own unassigned owner."""
        return self.owners.get(node) or (Owner.unassigned(node),)

    def endpoint(self, owner: Owner) -> Endpoint:
        """The owner's first host (by name) and that host's first NIC's switch port."""
        node = owner.name if owner.kind is OwnerKind.UNASSIGNED else self.home.get(owner, "?")
        nic = self.first_nic.get(node)
        return Endpoint(0, node, owner, nic_port(nic) if nic else None)


def nic_port(nic: Nic) -> str:
    """The switch port a NIC is cabled to, as ``leaf01:Ethernet0``."""
    return f"{nic.switch}:{nic.port}"
