"""Isolation proofs: what a proof claims, in which view, and how an auditor re-checks it offline.

The envelope and Statement format (DSSE, in-toto, RFC 8785) is `policies.evidence.dsse`,
re-exported here for callers that sign and verify proofs.

Views (``predicate.view``):

* ``"full"`` (operators, auditors; also a predicate without ``view``, issued before views):
  ``ownership`` and each segment's ``members`` name every member of each segment of the tenant.
* ``"tenant"`` (issued to a tenant role): only the tenant's ports and the shared services' ports
  are named. ``ownership`` holds only those; each segment lists only those ``members`` and adds
  ``"others": {"count": N, "membership": "limited" | "full"}`` for the rest (``full`` when any
  of them is full; ``count`` may be 0); a segment whose owner is neither the tenant nor a service
  has the owner ``"others"`` (`OTHERS`). The claims name no owner but the tenant, services, the
  peers its ``peerings`` claim and, as a segment owner, ``others`` (`names_in_tenant_view`).

A view adds to ``…/isolation-proof/v1`` without a new meaning: a verifier that predates views
rejects a tenant view (its unnamed members have no stated owner) rather than accepting it.

Offline re-derivation (`check_claims`): on InfiniBand the partitions.conf subject is parsed
(`policies.infiniband.parse_partitions.memberships`), member GUIDs are mapped to owners with the
ownership carried in the predicate, and the owners the tenant reaches (a shared partition with at
least one full member between the two ports) must equal the claimed reachable set exactly. For a
tenant view the file is first checked against the segments: they must be exactly the file's
partitions (the default excluded) holding a tenant port; in each, the named members and their
membership must be the file's members of stated owners, the file's other GUIDs must be exactly
``count`` many with the stated ``membership``, and no non-default partition may have a special
member (``ALL``, ``ALL_CAS``, ...: its ports cannot be counted). The other GUIDs are then owned by
``others`` and the reachable set is derived as for a full proof, so a tenant port that is full
where others are, or another member that is full, makes ``others`` reachable, which no claim
may contain: the count proves that the tenant reaches no one it cannot see. On RoCE the tenant
VRF's imported route targets in every frr.conf subject must be its own plus those of the claimed
services and peers, and its switch ports VLAN members in config_db.json; a RoCE proof names no
tenant but it and its peers in either view, so its tenant view differs only in ``view``. Peering
and policy claims (`policies.evidence.peering_claims`, `.policy_claims`) are checked
last; a proof issued before them carries none and is checked as before. Pure: keys and time
are passed in; every failure raises `policies.errors.InvalidValueError`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal, cast

from policies.errors import InvalidValueError
from policies.evidence.dsse import (
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    build_statement,
    canonical_json,
    check_subjects,
    key_id,
    pae,
    public_jwk,
    sign_envelope,
    verify_envelope,
)
from policies.evidence.peering_claims import check_peering_claims, claimed_peers
from policies.evidence.policy_claims import check_policy_claims
from policies.infiniband.model import DEFAULT_PKEY, format_guid, format_pkey
from policies.infiniband.parse_partitions import (
    ParsedPartitions,
    memberships,
    parse_partitions_conf,
    special_members,
)
from policies.infiniband.render import PARTITIONS_PATH
from policies.roce.parse_config_db import parse_config_db
from policies.roce.parse_frr import parse_frr_conf

__all__ = [
    "FULL_VIEW",
    "OTHERS",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "TENANT_VIEW",
    "VIEWS",
    "View",
    "build_statement",
    "canonical_json",
    "check_claims",
    "check_subjects",
    "ib_reachable",
    "key_id",
    "named_strangers",
    "names_in_tenant_view",
    "pae",
    "public_jwk",
    "rederive_ib_reachability",
    "rederive_roce_reachability",
    "sign_envelope",
    "verify_envelope",
    "view_of",
]

Reach = frozenset[tuple[str, str]]
"""(owner, segment label) pairs: ``("service:storage", "0x0201")``."""

View = Literal["full", "tenant"]
"""Who a proof is for: ``full`` names every member, ``tenant`` counts the unnamed ones."""
FULL_VIEW: View = "full"
TENANT_VIEW: View = "tenant"
VIEWS: tuple[View, ...] = (FULL_VIEW, TENANT_VIEW)
OTHERS = "others"
"""The owner a tenant view gives the members it does not name; no real owner (``kind:name``)."""


# --- views ------------------------------------------------------------------------------------


def view_of(predicate: Mapping[str, Any]) -> View:
    """The predicate's view; ``full`` when it has none (proofs issued before views existed).

    Raises:
        InvalidValueError: The view is neither ``full`` nor ``tenant``.
    """
    view = predicate.get("view", FULL_VIEW)
    if view not in VIEWS:
        raise InvalidValueError(f"unknown proof view {view!r}")
    return cast(View, view)


def names_in_tenant_view(owner: str, tenant: str, peers: Collection[str] = ()) -> bool:
    """Whether a tenant view may name `owner`: the tenant, a service or one of its `peers`.

    Accepted peers (``tenant:<name>``) consented to be known to the tenant; no other tenant is.
    """
    return owner == f"tenant:{tenant}" or owner.startswith("service:") or owner in peers


def named_strangers(predicate: Mapping[str, Any]) -> list[str]:
    """The owners a tenant view's claims name that it may not name (`names_in_tenant_view`).

    Looks at the ownership, the reachable set, the RoCE VRFs and the segment owners (which may
    also be `OTHERS`); the peers it claims (``peerings``) may be named.
    """
    tenant, peers = str(predicate.get("tenant")), claimed_peers(predicate)
    named = {str(owner) for owner in _ownership(predicate).values()}
    named |= {str(r.get("owner")) for r in _entries(predicate, "reachable")}
    named |= {str(owner) for owner in predicate.get("vrfs") or {}}
    named |= {str(s["owner"]) for s in _entries(predicate, "segments") if "owner" in s} - {OTHERS}
    return sorted(owner for owner in named if not names_in_tenant_view(owner, tenant, peers))


def _entries(document: Mapping[str, Any], member: str) -> list[Mapping[str, Any]]:
    """The objects of the list `member` of `document` (absent: none)."""
    entries = document.get(member, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise InvalidValueError(f"'{member}' is not a list of objects")
    return entries


# --- InfiniBand -------------------------------------------------------------------------------


def ib_reachable(
    tenant: str, members: Mapping[int, Mapping[int, str]], ownership: Mapping[str, str]
) -> Reach:
    """The (owner, P_Key) pairs tenant `tenant` reaches through `members`.

    A tenant port reaches another member of a partition when at least one of the two is a full
    member; the default partition (0x7fff, management traffic) is not counted. A tenant reaches
    itself in every partition where one of its ports is a full member.

    Args:
        tenant: The tenant's name.
        members: ``{base_pkey: {guid: "full" | "limited"}}`` (`memberships`).
        ownership: ``{"0x<guid>": "tenant:acme" | "service:storage" | ...}``.

    Raises:
        InvalidValueError: A member GUID of a partition involving the tenant has no stated owner.
    """
    me = f"tenant:{tenant}"
    reach: set[tuple[str, str]] = set()
    for pkey, guids in members.items():
        if pkey == DEFAULT_PKEY:
            continue
        owners = {guid: ownership.get(format_guid(guid)) for guid in guids}
        mine = [g for g, owner in owners.items() if owner == me]
        if not mine:
            continue
        label = format_pkey(pkey)
        for guid, owner in owners.items():
            if owner is None:
                raise InvalidValueError(f"partition {label}: GUID {format_guid(guid)} has no owner")
            if _linked(guid, mine, guids) or (owner == me and guids[guid] == "full"):
                reach.add((owner, label))
    return frozenset(reach)


def _linked(guid: int, mine: Iterable[int], guids: Mapping[int, str]) -> bool:
    """Whether `guid` shares the partition with one of `mine` with a full member between them."""
    return any(guids[g] == "full" or guids[guid] == "full" for g in mine if g != guid)


def rederive_ib_reachability(partitions_conf: str, predicate: Mapping[str, Any]) -> Reach:
    """Re-derive the tenant's reachable set from partitions.conf and the predicate's ownership.

    In a tenant view the members it does not name are first counted against its segments and
    then owned by `OTHERS` (module docstring, "Offline re-derivation").

    Raises:
        InvalidValueError: The file fails open in OpenSM, a member GUID has no stated owner, or a
            tenant view's segments or counts differ from the file.
    """
    parsed = parse_partitions_conf(partitions_conf)
    if parsed.fails_open:
        raise InvalidValueError("partitions.conf fails open: OpenSM would discard it")
    members = memberships(parsed)
    ownership = _ownership(predicate)
    mine = {g for g, o in ownership.items() if o == f"tenant:{predicate['tenant']}"}
    if any(
        format_guid(g) in mine and m == "full" for g, m in members.get(DEFAULT_PKEY, {}).items()
    ):
        raise InvalidValueError("a tenant port is a full member of the default partition")
    if view_of(predicate) == TENANT_VIEW:
        ownership |= _counted_others(parsed, members, predicate, mine)
    return ib_reachable(str(predicate["tenant"]), members, ownership)


def _counted_others(
    parsed: ParsedPartitions,
    members: Mapping[int, Mapping[int, str]],
    predicate: Mapping[str, Any],
    mine: set[str],
) -> dict[str, str]:
    """Check a tenant view's segments against the file; its unnamed GUIDs, owned by `OTHERS`.

    Raises:
        InvalidValueError: The segments are not the file's partitions holding a tenant port, one
            has a special member, or one's named members or others differ from the file's.
    """
    held = {
        format_pkey(pkey): guids
        for pkey, guids in members.items()
        if pkey != DEFAULT_PKEY and any(format_guid(g) in mine for g in guids)
    }
    segments = {str(s.get("segment")): s for s in _entries(predicate, "segments")}
    if set(segments) != set(held):
        raise InvalidValueError(
            f"the tenant's ports are in partitions {sorted(held) or 'none'} of the file, "
            f"the proof lists {sorted(segments) or 'none'}"
        )
    _refuse_specials(parsed)
    others: dict[str, str] = {}
    for label, guids in held.items():
        others |= _check_segment(label, guids, segments[label], _ownership(predicate))
    return others


def _refuse_specials(parsed: ParsedPartitions) -> None:
    """Special members stand for ports the file does not list, so they cannot be counted."""
    for pkey, specials in sorted(special_members(parsed).items()):
        if pkey != DEFAULT_PKEY:
            raise InvalidValueError(
                f"partition {format_pkey(pkey)} has special members ({', '.join(specials)}): "
                "a tenant view cannot count its members"
            )


def _check_segment(
    label: str, guids: Mapping[int, str], segment: Mapping[str, Any], ownership: Mapping[str, str]
) -> dict[str, str]:
    """Check one tenant-view segment against the file's members of its partition.

    Returns:
        Its unnamed member GUIDs, each owned by `OTHERS`.
    """
    named = {format_guid(g): m for g, m in guids.items() if format_guid(g) in ownership}
    listed = {
        str(m.get("endpoint")): str(m.get("membership")) for m in _entries(segment, "members")
    }
    if listed != named:
        raise InvalidValueError(f"partition {label}: the named members differ from the file's")
    unnamed = {format_guid(g): m for g, m in guids.items() if format_guid(g) not in ownership}
    actual = {
        "count": len(unnamed),
        "membership": "full" if "full" in unnamed.values() else "limited",
    }
    claimed = segment.get("others")
    if claimed != actual or isinstance(claimed.get("count"), bool):
        raise InvalidValueError(
            f"partition {label}: the file has {actual['count']} other member(s), "
            f"{actual['membership']}; the proof claims {json.dumps(claimed)}"
        )
    return dict.fromkeys(unnamed, OTHERS)


def _ownership(predicate: Mapping[str, Any]) -> dict[str, str]:
    ownership = predicate.get("ownership")
    if not isinstance(ownership, dict):
        raise InvalidValueError("the predicate carries no endpoint ownership")
    return {str(k): str(v) for k, v in ownership.items()}


# --- RoCE -------------------------------------------------------------------------------------


def rederive_roce_reachability(files: Mapping[str, bytes], predicate: Mapping[str, Any]) -> Reach:
    """Re-derive the tenant's reachable set from every leaf's frr.conf and config_db.json.

    The tenant VRF's imported route targets map back to owners through the predicate's ``vrfs``
    (owner -> vrf, l3vni, route_target); each leaf must import the same set. The tenant's switch
    ports (``leaf:port``) must be VLAN members on their leaf.

    Raises:
        InvalidValueError: A leaf lacks the tenant VRF, imports an RT of no stated owner, or leaves
            a tenant port out of every VLAN.
    """
    vrfs = predicate.get("vrfs")
    me = f"tenant:{predicate['tenant']}"
    if not isinstance(vrfs, dict) or me not in vrfs:
        raise InvalidValueError("the predicate carries no VRF of the tenant")
    by_rt = {str(v["route_target"]): (str(o), str(v["l3vni"])) for o, v in vrfs.items()}
    reach: set[tuple[str, str]] = set()
    for path, content in sorted(files.items()):
        if path.endswith("/frr.conf"):
            reach |= _leaf_imports(path, content.decode(), str(vrfs[me]["vrf"]), by_rt)
        elif path.endswith("/config_db.json"):
            _check_ports(path, content.decode(), predicate)
    return frozenset(reach)


def _leaf_imports(
    path: str, text: str, vrf: str, by_rt: Mapping[str, tuple[str, str]]
) -> set[tuple[str, str]]:
    instance = parse_frr_conf(text).instance(vrf)
    if instance is None:
        raise InvalidValueError(f"{path}: no BGP instance for VRF {vrf}")
    unknown = sorted(set(instance.rt_imports) - by_rt.keys())
    if unknown:
        raise InvalidValueError(
            f"{path}: VRF {vrf} imports {', '.join(unknown)} of no stated owner"
        )
    return {by_rt[rt] for rt in instance.rt_imports}


def _check_ports(path: str, text: str, predicate: Mapping[str, Any]) -> None:
    parsed = parse_config_db(text)
    leaf = path.split("/")[-2]
    members = {member.port for member in parsed.vlan_members}
    for endpoint in predicate.get("endpoints", []):
        switch, _, port = str(endpoint).partition(":")
        if switch == leaf and port not in members:
            raise InvalidValueError(f"{path}: tenant port {endpoint} is in no VLAN")


# --- claims -----------------------------------------------------------------------------------


def _claimed(predicate: Mapping[str, Any]) -> Reach:
    reachable = predicate.get("reachable")
    if not isinstance(reachable, list):
        raise InvalidValueError("the predicate carries no reachable set")
    return frozenset((str(r["owner"]), str(r["segment"])) for r in reachable)


def _rederive(predicate: Mapping[str, Any], subjects: Mapping[str, bytes]) -> Reach:
    if predicate.get("kind") == "roce":
        return rederive_roce_reachability(subjects, predicate)
    if PARTITIONS_PATH not in subjects:
        raise InvalidValueError(f"the proof has no {PARTITIONS_PATH} subject")
    return rederive_ib_reachability(subjects[PARTITIONS_PATH].decode(), predicate)


def check_claims(statement: Mapping[str, Any], files: Mapping[str, bytes]) -> Reach:
    """Check subjects against `files` and re-derive the claimed reachable set from them.

    Returns:
        The re-derived reachable set (equal to the claimed one).

    Raises:
        InvalidValueError: A digest differs, the verdict does not hold, a tenant view names an
            owner it may not name or counts members the artifacts do not have, the artifacts
            give another reachable set than the one claimed, or the peering or policy claims
            do not hold (`check_peering_claims`, `check_policy_claims`).
    """
    check_subjects(statement, files)
    predicate = statement["predicate"]
    if predicate.get("verdict", {}).get("holds") is not True:
        raise InvalidValueError("the proof does not state a holding verdict")
    if view_of(predicate) == TENANT_VIEW and (strangers := named_strangers(predicate)):
        raise InvalidValueError(f"a tenant view names other owners: {', '.join(strangers)}")
    subjects = {s["name"]: files[s["name"]] for s in statement["subject"]}
    derived = _rederive(predicate, subjects)
    claimed = _claimed(predicate)
    if derived != claimed:
        extra = sorted(f"{o}@{s}" for o, s in derived - claimed)
        absent = sorted(f"{o}@{s}" for o, s in claimed - derived)
        raise InvalidValueError(
            f"the artifacts do not support the reachability claim "
            f"(reachable but not claimed: {extra or 'none'}; claimed but not derived: "
            f"{absent or 'none'})"
        )
    check_peering_claims(predicate, subjects, derived)
    check_policy_claims(predicate, subjects)
    return derived
