"""What a tenant role may see of the fabric's rendered files: the lines about its own segments.

A tenant role may not read the fabric's files (api/access_rules.py), yet a what-if answer must
show it what a change does to them. It gets a projection: the lines that name an identifier of
its own or of a shared service, and no identifier of anyone else. Identifiers are whole tokens:

* InfiniBand: port GUIDs (by the owner of their node), virtual GUIDs (by the tenant they are
  bound to), and each partition's name and P_Key (shown when the tenant owns it or has a port or
  virtual GUID in it, as its header line is then about the tenant too).
* RoCE: each segment's VRF name, VLANs (``Vlan<id>``), VNIs, route target and subnet.

A line that names nobody (a comment, a brace, a global option) is not shown: it says nothing
about the tenant. Another tenant's identifier hides its line even beside the tenant's own, so a
consenting peer's ports stay out of view as in a tenant proof (policies/evidence/proofs.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from policies.infiniband.model import IbSnapshot, Partition, format_guid, format_pkey
from policies.model import Owner, OwnerKind
from policies.roce.model import RoceSnapshot, VrfSegment, route_target

_TOKEN = re.compile(r"[A-Za-z0-9_.:/-]+")


@dataclass(frozen=True, slots=True)
class TenantFileView:
    """The tokens a tenant's projection shows, and those that hide a line."""

    shown: frozenset[str]
    hidden: frozenset[str]

    def project(self, text: str) -> str:
        """The lines of `text` that name a shown token and no hidden one, in order."""
        return "".join(line for line in text.splitlines(keepends=True) if self._shows(line))

    def _shows(self, line: str) -> bool:
        tokens = set(_TOKEN.findall(line))
        return not tokens.isdisjoint(self.shown) and tokens.isdisjoint(self.hidden)


def tenant_file_view(snapshots: Iterable[IbSnapshot | RoceSnapshot], tenant: str) -> TenantFileView:
    """The view of `tenant` over the files of `snapshots` (e.g. a fabric before and after).

    A token shown in one snapshot and hidden in another (a port that changed hands) is hidden.
    """
    shown: set[str] = set()
    hidden: set[str] = set()
    for snapshot in snapshots:
        for token, visible in _tokens(snapshot, Owner.tenant(tenant)):
            (shown if visible else hidden).add(token)
    return TenantFileView(frozenset(shown - hidden), frozenset(hidden))


def _tokens(snapshot: IbSnapshot | RoceSnapshot, tenant: Owner) -> Iterable[tuple[str, bool]]:
    if isinstance(snapshot, IbSnapshot):
        return _ib_tokens(snapshot, tenant)
    return _roce_tokens(snapshot, tenant)


def _visible(owner: Owner, tenant: Owner) -> bool:
    return owner == tenant or owner.kind == OwnerKind.SERVICE


def _ib_tokens(snapshot: IbSnapshot, tenant: Owner) -> Iterable[tuple[str, bool]]:
    owners = {node.name: node.owners for node in snapshot.nodes}
    tenant_guids = set()
    for port in snapshot.ports:
        node_owners = owners.get(port.node, ())
        visible = bool(node_owners) and all(_visible(o, tenant) for o in node_owners)
        if tenant in node_owners:
            tenant_guids.add(port.guid)
        yield format_guid(port.guid), visible
    for virtual in snapshot.virtual_guids:  # bound to one tenant: shown to it alone
        if Owner.tenant(virtual.tenant) == tenant:
            tenant_guids.add(virtual.guid)
        yield format_guid(virtual.guid), Owner.tenant(virtual.tenant) == tenant
    for partition in snapshot.partitions:
        visible = _holds_a_port(partition, tenant_guids) or partition.owner == tenant
        yield partition.name, visible
        yield format_pkey(partition.pkey), visible


def _holds_a_port(partition: Partition, guids: set[int]) -> bool:
    return any(member.guid in guids for member in partition.members)


def _roce_tokens(snapshot: RoceSnapshot, tenant: Owner) -> Iterable[tuple[str, bool]]:
    for segment in snapshot.segments:
        visible = _visible(segment.owner, tenant)
        for token in _segment_tokens(segment, snapshot.fabric.rt_asn):
            yield token, visible


def _segment_tokens(segment: VrfSegment, rt_asn: int) -> tuple[str, ...]:
    return (
        segment.vrf,
        f"Vlan{segment.vlan}",
        f"Vlan{segment.l3vni_vlan}",
        str(segment.l2vni),
        str(segment.l3vni),
        route_target(rt_asn, segment.l3vni),
        str(segment.subnet),
        segment.gateway,
    )
