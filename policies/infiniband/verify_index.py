"""The lookups InfiniBand's rules share: ports and virtual GUIDs by GUID, and who holds each.

`policies.infiniband.verify` and `policies.infiniband.verify_keys` read one `VerifyIndex` per
verification.
"""

from __future__ import annotations

from functools import cached_property

from policies.infiniband.model import IbPort, IbSnapshot, VirtualGuid
from policies.model import Owner
from policies.policy import Peering
from policies.policy_rules import allowed_peerings
from policies.verdict import Endpoint

# The node of an endpoint that is not a port of the fabric: a virtual GUID or an unknown GUID.
NO_NODE = "?"


class VerifyIndex:
    """Port and virtual GUID by GUID, the owner each belongs to, keys by owner and peering."""

    def __init__(self, snapshot: IbSnapshot) -> None:
        self.snapshot = snapshot
        self.port = {p.guid: p for p in snapshot.ports}
        self.virtual: dict[int, VirtualGuid] = {v.guid: v for v in snapshot.virtual_guids}
        self.node_role = {n.name: n.role for n in snapshot.nodes}
        self.node_owners = {n.name: n.owners for n in snapshot.nodes}
        # One owner value per host, shared by its ports (a host has 8 HCAs on the benchmark).
        node_owner = {n.name: n.owners[0] for n in snapshot.nodes if n.owners}
        self.owner: dict[int, Owner] = {}
        for port in snapshot.ports:
            owner = node_owner.get(port.node)
            if owner is None:
                owner = node_owner[port.node] = Owner.unassigned(port.node)
            self.owner[port.guid] = owner
        for virtual in snapshot.virtual_guids:  # a port's GUID stays the port's
            self.owner.setdefault(virtual.guid, Owner.tenant(virtual.tenant))
        self.grants = frozenset(snapshot.grants)
        self.peerings = allowed_peerings(snapshot.policy, snapshot.tenants, snapshot.peerings)

    def endpoint(self, guid: int) -> Endpoint:
        """The port or virtual GUID `guid` (node ``?`` when it is not a port of the fabric)."""
        port = self.port.get(guid)
        node = port.node if port else NO_NODE
        return Endpoint(guid, node, self.owner.get(guid, Owner.unassigned(node)))

    def holds(self, owner: Owner, guid: int) -> bool:
        """Whether `owner` holds the port `guid` (its node) or the virtual GUID is bound to it."""
        port = self.port.get(guid)
        if port is not None:
            return owner in self.node_owners.get(port.node, ())
        virtual = self.virtual.get(guid)
        return virtual is not None and owner == Owner.tenant(virtual.tenant)

    def is_member_known(self, guid: int) -> bool:
        """Whether `guid` is a port of the fabric or a bound virtual GUID."""
        return guid in self.port or guid in self.virtual

    @cached_property
    def first_port(self) -> dict[Owner, IbPort]:
        """Each owner's first port: its first node by name, that node's lowest GUID."""
        first: dict[Owner, IbPort] = {}
        for port in sorted(self.snapshot.ports, key=lambda p: (p.node, p.guid)):
            for owner in self.node_owners.get(port.node, ()):
                first.setdefault(owner, port)
        return first

    def owner_endpoint(self, owner: Owner) -> Endpoint:
        """`owner`'s first port (``?`` when it holds none in the snapshot)."""
        port = self.first_port.get(owner)
        return Endpoint(port.guid, port.node, owner) if port else Endpoint(0, NO_NODE, owner)

    @cached_property
    def own_key(self) -> dict[Owner, int]:
        """The P_Key of each owner's own (default) partition: no peering, no label."""
        keys: dict[Owner, int] = {}
        for p in self.snapshot.partitions:
            if p.peering is None and p.label is None:
                keys.setdefault(p.owner, p.pkey)
        return keys

    @cached_property
    def peering_key(self) -> dict[Peering, int]:
        """The P_Key of each peering's shared partition."""
        return {p.peering: p.pkey for p in self.snapshot.partitions if p.peering is not None}
