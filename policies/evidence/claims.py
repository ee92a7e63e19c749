"""The claims of an isolation proof: what a tenant's ports reach, stated so a file can confirm it.

`claims_for` dispatches on the snapshot's technology. Every claim follows from the artifacts named
as subjects (reference/ecosystem.md: in-toto statement in a DSSE envelope), so `proof verify` can
check it offline against those files.
"""

from __future__ import annotations

from typing import Any

from policies.artifacts import Artifact
from policies.errors import ConflictError, NotFoundError
from policies.evidence.proofs import ib_reachable
from policies.infiniband.model import PKEY_BASE_MASK, IbSnapshot, format_guid, format_pkey
from policies.infiniband.render import PARTITIONS_PATH
from policies.model import Owner
from policies.roce.model import RoceSnapshot, route_target

Subjects = list[tuple[str, str]]


def claims_for(
    snapshot: IbSnapshot | RoceSnapshot, tenant: str, files: tuple[Artifact, ...]
) -> tuple[Subjects, dict[str, Any]]:
    """The subjects and claims of `tenant`'s proof on the fabric `snapshot` describes.

    Raises:
        ConflictError: on RoCE, the tenant has no segment or no port on the fabric.
        NotFoundError: an artifact the claims rest on was not rendered.
    """
    if isinstance(snapshot, RoceSnapshot):
        return roce_claims(snapshot, tenant, files)
    return ib_claims(snapshot, tenant, files)


def _subject(files: tuple[Artifact, ...], path: str) -> tuple[str, str]:
    for artifact in files:
        if artifact.path == path:
            return artifact.path, artifact.sha256
    raise NotFoundError(f"no artifact '{path}' was rendered", resource="artifact")


def ib_claims(
    snapshot: IbSnapshot, tenant: str, files: tuple[Artifact, ...]
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The InfiniBand claims of `tenant`'s proof: its ports, partitions, members and reach.

    Returns:
        The subjects (partitions.conf with its sha256) and the claims, which follow from that
        file alone: `proof verify` recomputes them from it.
    """
    me = Owner.tenant(tenant)
    owners = {node.name: node.owners for node in snapshot.nodes}

    def owner_of(guid: int, node: str) -> str:
        held = owners.get(node, ())
        return str(held[0] if held else Owner.unassigned(node))

    node_of = {port.guid: port.node for port in snapshot.ports}
    mine = sorted(p.guid for p in snapshot.ports if me in owners.get(p.node, ()))
    involved = [
        p
        for p in sorted(snapshot.partitions, key=lambda p: p.pkey)
        if p.owner == me or any(member.guid in mine for member in p.members)
    ]
    ownership = {
        format_guid(member.guid): owner_of(member.guid, node_of.get(member.guid, "?"))
        for p in involved
        for member in p.members
    }
    members = {
        p.pkey & PKEY_BASE_MASK: {mm.guid: _membership(mm.full) for mm in p.members}
        for p in involved
    }
    reach = ib_reachable(tenant, members, ownership)
    claims = {
        "endpoints": [format_guid(guid) for guid in mine],
        "ownership": ownership,
        "segments": [
            {
                "segment": format_pkey(p.pkey & PKEY_BASE_MASK),
                "owner": str(p.owner),
                "members": [
                    {"endpoint": format_guid(mm.guid), "membership": _membership(mm.full)}
                    for mm in sorted(p.members, key=lambda mm: mm.guid)
                ],
            }
            for p in involved
        ],
        "reachable": [{"owner": o, "segment": s} for o, s in sorted(reach)],
    }
    return [_subject(files, PARTITIONS_PATH)], claims


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
