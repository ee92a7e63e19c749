"""The claims of an isolation proof: what a tenant's ports reach, stated so a file can confirm it.

`claims_for` dispatches on the snapshot's technology. Every reachability claim follows from the
artifacts named as subjects (docs/facts/evidence.md: in-toto statement in a DSSE envelope), so
`proof verify` can check it offline against those files. The policy in force and, on dedicated
leaves, the topology the tenant's leaves rest on are `policies.evidence.policy_claims` (which
says what of them the artifacts confirm). The view (`policies.evidence.proofs`, "Views") decides
what is named: everything (``full``), or only the tenant's and the services' ports with the
other members of each segment counted (``tenant``), because a tenant may not learn which other
tenants share a service with it. Its accepted peers consented to be known to it: both views name
them, and the ``peerings`` claim (`policies.evidence.peering_claims`) makes each edge intended.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from policies.artifacts import Artifact
from policies.errors import ConflictError, NotFoundError
from policies.evidence.peering_claims import claimed_peers, peering_claims
from policies.evidence.policy_claims import policy_claims
from policies.evidence.proofs import (
    FULL_VIEW,
    OTHERS,
    TENANT_VIEW,
    View,
    ib_reachable,
    named_strangers,
    names_in_tenant_view,
)
from policies.infiniband.model import (
    PKEY_BASE_MASK,
    IbSnapshot,
    Partition,
    format_guid,
    format_pkey,
)
from policies.infiniband.render import PARTITIONS_PATH
from policies.model import Owner
from policies.policy import TenantKind
from policies.roce.model import RoceSnapshot, route_target

Subjects = list[tuple[str, str]]


def claims_for(
    snapshot: IbSnapshot | RoceSnapshot,
    tenant: str,
    files: tuple[Artifact, ...],
    view: View = FULL_VIEW,
    kind: TenantKind | str | None = None,
) -> tuple[Subjects, dict[str, Any]]:
    """The subjects and claims of `tenant`'s proof on the fabric `snapshot` describes.

    Args:
        snapshot: The verified fabric.
        tenant: The tenant the proof is about.
        files: The artifacts rendered from `snapshot`.
        view: ``full`` names every member; ``tenant`` counts the ones it may not name.
        kind: The tenant's kind (None: from the snapshot's tenant facts), for the policy claim.

    Returns:
        The subjects and the claims, ``view``, ``peerings`` (`peering_claims`) and ``policy``
        among them (and the dedicated-leaf topology when the tenant's kind is on dedicated
        leaves: `policy_claims`).

    Raises:
        ConflictError: on RoCE, the tenant has no segment or no port on the fabric; in a tenant
            view, the tenant reaches an owner the view may not name: neither a service nor an
            accepted peer (an isolation violation).
        NotFoundError: an artifact the claims rest on was not rendered.
    """
    peerings = peering_claims(snapshot, tenant)
    if isinstance(snapshot, RoceSnapshot):
        subjects, claims = roce_claims(snapshot, tenant, files)
    else:
        peers = claimed_peers({"tenant": tenant} | peerings)
        subjects, claims = ib_claims(snapshot, tenant, files, view, peers)
    claims = {"view": view} | claims | peerings | policy_claims(snapshot, tenant, kind)
    if view == TENANT_VIEW and (strangers := named_strangers({"tenant": tenant} | claims)):
        # Unreachable for a verified fabric; refuse rather than name them to the tenant.
        raise ConflictError(f"tenant '{tenant}' reaches owners it may not see ({len(strangers)})")
    return subjects, claims


def _subject(files: tuple[Artifact, ...], path: str) -> tuple[str, str]:
    for artifact in files:
        if artifact.path == path:
            return artifact.path, artifact.sha256
    raise NotFoundError(f"no artifact '{path}' was rendered", resource="artifact")


def ib_claims(
    snapshot: IbSnapshot,
    tenant: str,
    files: tuple[Artifact, ...],
    view: View = FULL_VIEW,
    peers: Collection[str] = (),
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The InfiniBand claims of `tenant`'s proof: its ports, partitions, members and reach.

    In a tenant view, ownership and members name only the tenant's, its `peers`' (owners,
    ``tenant:<name>``) and the services' ports; each segment counts the rest in ``others``.

    Returns:
        The subjects (partitions.conf with its sha256) and the claims, which follow from that
        file alone: `proof verify` recomputes them from it.
    """
    me = Owner.tenant(tenant)
    owners = {node.name: node.owners for node in snapshot.nodes}
    mine = sorted(p.guid for p in snapshot.ports if me in owners.get(p.node, ()))
    held = {*mine, *(v.guid for v in snapshot.virtual_guids if v.tenant == tenant)}
    # Every partition the tenant owns (its default one and its additional ones) or is in.
    involved = [
        p
        for p in sorted(snapshot.partitions, key=lambda p: p.pkey)
        if p.owner == me or any(member.guid in held for member in p.members)
    ]
    ownership = _ib_ownership(snapshot, involved)
    members = {
        p.pkey & PKEY_BASE_MASK: {mm.guid: _membership(mm.full) for mm in p.members}
        for p in involved
    }
    reach = ib_reachable(tenant, members, ownership)
    named = _named_by(view, tenant, peers)
    claims = {
        "endpoints": [format_guid(guid) for guid in mine],
        "ownership": {guid: owner for guid, owner in ownership.items() if named(owner)},
        "segments": [_ib_segment(p, ownership, named, view) for p in involved],
        "reachable": [{"owner": o, "segment": s} for o, s in sorted(reach)],
    }
    return [_subject(files, PARTITIONS_PATH)], claims


def _ib_ownership(snapshot: IbSnapshot, involved: list[Partition]) -> dict[str, str]:
    """``{"0x<guid>": owner}`` of every member of `involved`; a free node's is unassigned.

    A virtual GUID (not a port's) is owned by the tenant it is bound to.
    """
    owners = {node.name: node.owners for node in snapshot.nodes}
    node_of = {port.guid: port.node for port in snapshot.ports}
    bound = {v.guid: str(Owner.tenant(v.tenant)) for v in snapshot.virtual_guids}

    def owner_of(guid: int) -> str:
        if guid not in node_of and guid in bound:
            return bound[guid]
        node = node_of.get(guid, "?")
        held = owners.get(node, ())
        return str(held[0] if held else Owner.unassigned(node))

    return {
        format_guid(member.guid): owner_of(member.guid) for p in involved for member in p.members
    }


def _named_by(view: View, tenant: str, peers: Collection[str]) -> Callable[[str], bool]:
    """Which owners the view names: all of them, or the tenant, its peers and the services."""
    if view == TENANT_VIEW:
        return lambda owner: names_in_tenant_view(owner, tenant, peers)
    return lambda owner: True


def _ib_segment(
    partition: Partition, ownership: dict[str, str], named: Callable[[str], bool], view: View
) -> dict[str, Any]:
    """One segment claim: its key, owner and named members; a tenant view counts the others."""
    members = sorted(partition.members, key=lambda mm: mm.guid)
    shown = [mm for mm in members if named(ownership[format_guid(mm.guid)])]
    segment: dict[str, Any] = {
        "segment": format_pkey(partition.pkey & PKEY_BASE_MASK),
        "owner": str(partition.owner) if named(str(partition.owner)) else OTHERS,
        "members": [
            {"endpoint": format_guid(mm.guid), "membership": _membership(mm.full)} for mm in shown
        ],
    }
    if view == TENANT_VIEW:
        hidden = [mm for mm in members if not named(ownership[format_guid(mm.guid)])]
        segment["others"] = {
            "count": len(hidden),
            "membership": _membership(any(mm.full for mm in hidden)),
        }
    return segment


def _membership(full: bool) -> str:
    return "full" if full else "limited"


def roce_claims(
    snapshot: RoceSnapshot, tenant: str, files: tuple[Artifact, ...]
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The RoCE claims of `tenant`'s proof: its switch ports, VRF, imported VRFs and reach.

    Returns:
        The subjects (frr.conf and config_db.json of each leaf the tenant is cabled to) and the
        claims.

    Raises:
        ConflictError: the tenant has no segment or no port on the fabric.
    """
    me = Owner.tenant(tenant)
    owners = {node.name: node.owners for node in snapshot.nodes}
    nics = sorted(
        (nic for nic in snapshot.nics if me in owners.get(nic.node, ())),
        key=lambda nic: (nic.switch, nic.port),
    )
    segment = next((s for s in snapshot.segments if s.owner == me), None)
    if segment is None or not nics:
        raise ConflictError(f"tenant '{tenant}' has no segment or ports on this fabric")
    asn = snapshot.fabric.rt_asn
    by_rt = {route_target(asn, s.l3vni): s for s in snapshot.segments}
    imported = [by_rt[rt] for rt in sorted({route_target(asn, segment.l3vni), *segment.imports})]
    leaves = sorted({nic.switch for nic in nics})
    subjects = [
        _subject(files, path)
        for leaf in leaves
        for path in (f"frr/{leaf}/frr.conf", f"sonic/{leaf}/config_db.json")
    ]
    claims = {
        "endpoints": [f"{nic.switch}:{nic.port}" for nic in nics],
        "ownership": {f"{nic.switch}:{nic.port}": str(me) for nic in nics},
        "vrfs": {
            str(s.owner): {
                "vrf": s.vrf,
                "l3vni": str(s.l3vni),
                "route_target": route_target(asn, s.l3vni),
            }
            for s in imported
        },
        "segments": [
            {
                "segment": str(segment.l3vni),
                "vrf": segment.vrf,
                "vlan": str(segment.vlan),
                "l2vni": str(segment.l2vni),
                "subnet": str(segment.subnet),
                "members": [f"{nic.switch}:{nic.port}" for nic in nics],
            }
        ],
        "reachable": [
            {"owner": str(s.owner), "segment": str(s.l3vni)}
            for s in sorted(imported, key=lambda s: s.owner)
        ],
    }
    return subjects, claims
