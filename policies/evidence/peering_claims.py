"""Accepted peerings in an isolation proof: intended edges to consenting peers.

Claim (a predicate member of ``…/isolation-proof/v1``, in both views): ``peerings``, the
tenant's accepted peerings on the fabric that are on the wire, sorted:
``[{"peer": "tenant:datapipe", "segment": "0x0106"}]``. The segment is the peering's shared
partition's P_Key on InfiniBand (`Partition.peering`) and the peer's L3VNI on RoCE (each VRF
imports the other's route target: `policies.roce.model.with_grant_imports`). A reachable entry
to a peer in that segment is an intended edge. A tenant view may name the claimed peers (they
consented to be known to the tenant) and still no other tenant (`names_in_tenant_view`).

What `proof verify` checks (`check_peering_claims`), after the reachability: every reachable
tenant other than the proof's own is a claimed peer in that segment. InfiniBand: each claimed
segment is a partition of partitions.conf named as that peering's (``peer_<a>_<b>``,
`peering_partition_name`), without special members, whose members are all full and are exactly
the tenant's and the peer's ports the proof states; and every ``peer_`` partition holding a
tenant port is claimed (a proof may not hide one). RoCE: the peer's stated VRF is ``Vrf<segment>``
with a route target of that VNI, and the tenant's VRF imports it on every frr.conf subject.

Version boundary: a predicate without ``peerings`` was issued before this claim existed and is
checked exactly as before. What the artifacts cannot say: which tenant a RoCE route target
belongs to (the VRF is named by its VNI), which rests on the signature, as for services.

Pure; every check failure raises `policies.errors.InvalidValueError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from policies.errors import InvalidValueError
from policies.infiniband.model import (
    PKEY_BASE_MASK,
    IbSnapshot,
    format_guid,
    format_pkey,
    peering_partition_name,
)
from policies.infiniband.parse_partitions import (
    memberships,
    parse_partitions_conf,
    special_members,
)
from policies.infiniband.render import PARTITIONS_PATH
from policies.model import Owner
from policies.policy import Peering
from policies.roce.model import RoceSnapshot
from policies.roce.parse_frr import parse_frr_conf

__all__ = ["check_peering_claims", "claimed_peers", "peering_claims"]

_PEER = re.compile(r"tenant:[^\s:]+")
_PEERING_NAME = "peer_"  # every peering partition's name starts so (`peering_partition_name`)

Edge = tuple[str, str]
"""(peer owner, segment label): ``("tenant:datapipe", "0x0106")``."""


def peering_claims(snapshot: IbSnapshot | RoceSnapshot, tenant: str) -> dict[str, Any]:
    """The ``peerings`` claim of `tenant`'s proof: its accepted peerings on the wire.

    Property: each entry is an accepted peering of the snapshot with its segment: InfiniBand,
    the shared partition's base P_Key; RoCE, the peer's L3VNI (a peering with no partition, or
    whose peer has no VRF on the fabric, connects nothing and is not listed).

    Returns:
        ``{"peerings": [{"peer": "tenant:<name>", "segment": <label>}, ...]}``, sorted.
    """
    mine = [p for p in snapshot.peerings if tenant in (p.a, p.b)]
    if isinstance(snapshot, RoceSnapshot):
        edges = list(_roce_edges(snapshot, tenant, mine))
    else:
        edges = list(_ib_edges(snapshot, mine))
    peers = [{"peer": _peer(p, tenant), "segment": segment} for p, segment in edges]
    return {"peerings": sorted(peers, key=lambda e: (e["peer"], e["segment"]))}


def _peer(peering: Peering, tenant: str) -> str:
    return str(Owner.tenant(peering.b if peering.a == tenant else peering.a))


def _ib_edges(snapshot: IbSnapshot, mine: list[Peering]) -> Iterator[tuple[Peering, str]]:
    for partition in snapshot.partitions:
        if partition.peering in mine:
            yield partition.peering, format_pkey(partition.pkey & PKEY_BASE_MASK)


def _roce_edges(
    snapshot: RoceSnapshot, tenant: str, mine: list[Peering]
) -> Iterator[tuple[Peering, str]]:
    vnis = {s.owner: s.l3vni for s in snapshot.segments}
    if Owner.tenant(tenant) not in vnis:
        return
    for peering in mine:
        vni = vnis.get(Owner.tenant(peering.b if peering.a == tenant else peering.a))
        if vni is not None:
            yield peering, str(vni)


def claimed_peers(predicate: Mapping[str, Any]) -> frozenset[str]:
    """The owners the predicate claims as peers (none when it has no ``peerings``).

    Raises:
        InvalidValueError: ``peerings`` is malformed (`claimed_edges`).
    """
    return frozenset(peer for peer, _ in claimed_edges(predicate))


def claimed_edges(predicate: Mapping[str, Any]) -> frozenset[Edge]:
    """The claimed (peer, segment) pairs, checked for shape.

    Raises:
        InvalidValueError: ``peerings`` is not a list of ``{"peer", "segment"}`` objects naming
            another tenant, or lists an entry twice.
    """
    entries = predicate.get("peerings", [])
    if not isinstance(entries, list):
        raise InvalidValueError("'peerings' is not a list")
    edges = [_edge(entry, f"tenant:{predicate.get('tenant')}") for entry in entries]
    if len(set(edges)) != len(edges):
        raise InvalidValueError("the proof lists a peering twice")
    return frozenset(edges)


def _edge(entry: Any, me: str) -> Edge:
    if not isinstance(entry, dict) or set(entry) != {"peer", "segment"}:
        raise InvalidValueError("a peering entry is not {'peer', 'segment'}")
    peer, segment = entry["peer"], entry["segment"]
    if not isinstance(peer, str) or not _PEER.fullmatch(peer) or peer == me:
        raise InvalidValueError(f"a peering's peer {peer!r} is not another tenant")
    if not isinstance(segment, str):
        raise InvalidValueError(f"peering with {peer}: the segment {segment!r} is not a string")
    return peer, segment


# --- checks -------------------------------------------------------------------------------------


def check_peering_claims(
    predicate: Mapping[str, Any], subjects: Mapping[str, bytes], reach: frozenset[Edge]
) -> None:
    """Check the ``peerings`` claim against the re-derived reach and the artifacts.

    Property: when this returns, the tenant reaches no other tenant but through a claimed
    peering, and every claimed peering is on the wire as the module docstring says (InfiniBand:
    no peering partition of the tenant is left unclaimed). A predicate without ``peerings``
    passes unchanged (issued before the claim existed).

    Args:
        predicate: The Statement's predicate.
        subjects: The subject files by name, their digests already checked.
        reach: The reachable set re-derived from them (equal to the claimed one).

    Raises:
        InvalidValueError: The claim is malformed, hides a reachable tenant or a peering
            partition, or claims a peering the artifacts do not show.
    """
    if "peerings" not in predicate:
        return
    edges = claimed_edges(predicate)
    me = f"tenant:{predicate.get('tenant')}"
    hidden = sorted(
        f"{o}@{s}" for o, s in reach if o.startswith("tenant:") and o != me and (o, s) not in edges
    )
    if hidden:
        raise InvalidValueError(
            f"the tenant reaches {', '.join(hidden)} through no claimed peering"
        )
    if predicate.get("kind") == "roce":
        _check_roce(predicate, subjects, edges)
    else:
        _check_ib(predicate, subjects, edges)


def _check_ib(
    predicate: Mapping[str, Any], subjects: Mapping[str, bytes], edges: frozenset[Edge]
) -> None:
    """Each claimed segment is its peering's partition; every peering partition is claimed."""
    if PARTITIONS_PATH not in subjects:
        raise InvalidValueError(f"the proof has no {PARTITIONS_PATH} subject")
    parsed = parse_partitions_conf(subjects[PARTITIONS_PATH].decode())
    names = {p.pkey: str(p.name) for p in parsed.partitions if p.pkey}
    members = memberships(parsed)
    owners = {str(g): str(o) for g, o in (predicate.get("ownership") or {}).items()}
    tenant = str(predicate.get("tenant"))
    _refuse_unclaimed(names, members, owners, tenant, {segment for _, segment in edges})
    specials = special_members(parsed)
    for peer, segment in sorted(edges):
        pkey = _pkey(segment)
        expected = peering_partition_name(Peering.between(tenant, peer.split(":", 1)[1]), pkey)
        if names.get(pkey) != expected or specials.get(pkey):
            raise InvalidValueError(
                f"{PARTITIONS_PATH} has no partition {expected}={segment} (without special "
                f"members) for the claimed peering with {peer}"
            )
        _check_peering_members(segment, members.get(pkey, {}), owners, {f"tenant:{tenant}", peer})


def _refuse_unclaimed(
    names: Mapping[int, str],
    members: Mapping[int, Mapping[int, str]],
    owners: Mapping[str, str],
    tenant: str,
    claimed: set[str],
) -> None:
    """Every peering partition (``peer_…``) holding one of the tenant's ports is claimed."""
    mine = {g for g, o in owners.items() if o == f"tenant:{tenant}"}
    for pkey, name in sorted(names.items()):
        held = {format_guid(g) for g in members.get(pkey, {})}
        if name.startswith(_PEERING_NAME) and held & mine and format_pkey(pkey) not in claimed:
            raise InvalidValueError(
                f"{PARTITIONS_PATH}: the tenant's ports are in the peering partition {name} "
                f"({format_pkey(pkey)}), which the proof does not claim"
            )


def _pkey(segment: str) -> int:
    try:
        pkey = int(segment, 16)
    except ValueError:
        pkey = -1
    if not 0 < pkey <= PKEY_BASE_MASK or format_pkey(pkey) != segment:
        raise InvalidValueError(f"a peering's segment {segment!r} is not a P_Key (0x0001-0x7fff)")
    return pkey


def _check_peering_members(
    segment: str, guids: Mapping[int, str], owners: Mapping[str, str], pair: set[str]
) -> None:
    """The partition's members are full and exactly the stated ports of the two tenants."""
    held = {format_guid(g): m for g, m in guids.items()}
    stated = {g for g, o in owners.items() if o in pair}
    if set(held) != stated or "limited" in held.values():
        raise InvalidValueError(
            f"{PARTITIONS_PATH}: the peering partition {segment}'s members are not exactly the "
            f"full ports of {' and '.join(sorted(pair))} (only in the file: "
            f"{sorted(set(held) - stated) or 'none'}; only in the proof: "
            f"{sorted(stated - set(held)) or 'none'}; limited: "
            f"{sorted(g for g, m in held.items() if m == 'limited') or 'none'})"
        )


def _check_roce(
    predicate: Mapping[str, Any], subjects: Mapping[str, bytes], edges: frozenset[Edge]
) -> None:
    """Each claimed peer's VRF is its VNI's, and the tenant's VRF imports its RT on every leaf."""
    vrfs = predicate.get("vrfs")
    me = f"tenant:{predicate.get('tenant')}"
    if not isinstance(vrfs, dict) or not isinstance(vrfs.get(me), dict):
        raise InvalidValueError("the predicate carries no VRF of the tenant")
    imports = {
        path: _imports(path, content.decode(), str(vrfs[me].get("vrf")))
        for path, content in sorted(subjects.items())
        if path.endswith("/frr.conf")
    }
    for peer, segment in sorted(edges):
        stated = vrfs.get(peer)
        if not isinstance(stated, dict) or not _names_vni(stated, segment):
            raise InvalidValueError(
                f"the proof states no VRF Vrf{segment} (L3VNI {segment}) of its peer {peer}"
            )
        for path, imported in imports.items():
            if str(stated["route_target"]) not in imported:
                raise InvalidValueError(
                    f"{path}: the tenant's VRF does not import {stated['route_target']}, the RT "
                    f"of its claimed peer {peer}"
                )


def _imports(path: str, text: str, vrf: str) -> frozenset[str]:
    instance = parse_frr_conf(text).instance(vrf)
    if instance is None:
        raise InvalidValueError(f"{path}: no BGP instance for VRF {vrf}")
    return frozenset(instance.rt_imports)


def _names_vni(vrf: Mapping[str, Any], segment: str) -> bool:
    """Whether a stated VRF is the one of L3VNI `segment` (name and route target say so)."""
    rt = str(vrf.get("route_target"))
    return (
        str(vrf.get("l3vni")) == segment
        and vrf.get("vrf") == f"Vrf{segment}"
        and rt.rpartition(":")[2] == segment
    )
