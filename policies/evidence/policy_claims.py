"""The policy in an isolation proof: its version, and the dedicated-leaf topology.

Claims (predicate members added to ``…/isolation-proof/v1``, in both views):

* ``policy``: ``{"version", "fingerprint", "tenant_kind", "isolation"}``: the version and
  fingerprint (`policies.policy.Policy`) of the policy the snapshot carries, the tenant's kind
  and the isolation its kind has under that policy (``tenant_kind`` and ``isolation`` are
  absent when the tenant's kind is not known; the service always states them).
* ``dedicated_leaf``, only when ``isolation`` is ``dedicated_leaf``: the topology the claim
  rests on, ``{"holds", "leaves", "uncabled"}``. ``leaves`` has one entry per leaf switch one of
  the tenant's ports is cabled to (InfiniBand: the switch an HCA port connects to; RoCE: a NIC's
  leaf), sorted by name: ``{"leaf", "endpoints", "others"}`` with the tenant's endpoints there
  (port GUIDs; ``leaf:port`` on RoCE) and the other owners' ports there as counts by kind,
  ``{"tenants", "services", "unassigned", "management"}``, never their names. ``uncabled``
  lists the tenant's InfiniBand ports ibnetdiscover saw no cable on (on no leaf). ``holds`` is
  true iff every leaf's ``tenants`` count is 0.

Version boundary: a predicate without ``policy`` was issued before policies existed and is
checked exactly as before (`check_policy_claims` does nothing); one with ``policy`` is checked
as below. A verifier that predates policies ignores both members: it still checks the
reachability, not the leaves.

What `proof verify` checks (`check_policy_claims`), on top of the reachability: the members are
well formed and consistent (``dedicated_leaf`` present iff the isolation is ``dedicated_leaf``;
no endpoint on two leaves; the leaves' endpoints plus ``uncabled`` are exactly ``endpoints``);
the claim follows from the topology (``holds`` iff no leaf counts another tenant's port, and a
holding proof must hold); and the tenant's ports agree with the artifacts. InfiniBand: the
partition partitions.conf names as the tenant's (``tenant_<name>``, `Partition.name`) has
exactly the listed GUIDs, all full, and no ``ALL``-style member. RoCE: on each leaf, the members
of the tenant's VLAN (the one whose SVI is in the tenant's VRF) in that leaf's config_db.json
are exactly the listed ports, the leaves are exactly the config_db.json subjects, and the ports
there in any other VLAN (other tenants' and services') number at most ``tenants + services``.

What it cannot check: the artifacts do not say which leaf an InfiniBand GUID is cabled to, nor
which other ports a leaf has, so the leaf of each port and the counts rest on the service's
signature over the topology it imported (ibnetdiscover, the RoCE inventory), as the snapshot
digest does. RoCE bounds the counts from below; free and management ports are in no VLAN.

Pure; every check failure raises `policies.errors.InvalidValueError`.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from policies.errors import InvalidValueError
from policies.infiniband.model import IbSnapshot, Partition, format_guid
from policies.infiniband.parse_partitions import (
    memberships,
    parse_partitions_conf,
    special_members,
)
from policies.infiniband.render import PARTITIONS_PATH
from policies.model import Node, NodeRole, Owner, OwnerKind
from policies.policy import Isolation, TenantKind
from policies.roce.model import RoceSnapshot
from policies.roce.parse_config_db import parse_config_db

__all__ = ["OTHER_KINDS", "check_policy_claims", "policy_claims"]

OTHER_KINDS = ("tenants", "services", "unassigned", "management")
"""The kinds of other owners a leaf counts, in the order ``others`` lists them."""

_FINGERPRINT = re.compile(r"sha256:[0-9a-f]{64}")
_CONFIG_DB = re.compile(r"sonic/[^/]+/config_db\.json")

# A host port as the topology sees it: (its leaf or None, its endpoint label, its node).
_Cabled = tuple[str | None, str, Node | None]


def policy_claims(
    snapshot: IbSnapshot | RoceSnapshot, tenant: str, kind: TenantKind | str | None = None
) -> dict[str, Any]:
    """The ``policy`` claim of `tenant`'s proof and, on dedicated leaves, its topology.

    Args:
        snapshot: The verified fabric; its `policy` is the one in force.
        tenant: The tenant the proof is about.
        kind: The tenant's kind; None takes it from the snapshot's tenant facts.

    Returns:
        ``{"policy": ...}``, plus ``{"dedicated_leaf": ...}`` when the tenant's kind is on
        dedicated leaves (module docstring). ``dedicated_leaf.holds`` is true iff no leaf the
        tenant is cabled to holds a port of another tenant.
    """
    policy = snapshot.policy
    claim: dict[str, Any] = {"version": policy.version, "fingerprint": policy.fingerprint}
    known = kind or next((t.kind for t in snapshot.tenants if t.name == tenant), None)
    if known is None:
        return {"policy": claim}
    isolation = policy.for_tenant_kind(known).isolation
    claim |= {"tenant_kind": TenantKind(known).value, "isolation": isolation.value}
    if isolation is not Isolation.DEDICATED_LEAF:
        return {"policy": claim}
    return {"policy": claim, "dedicated_leaf": leaf_topology(tenant, _cabled(snapshot))}


def _cabled(snapshot: IbSnapshot | RoceSnapshot) -> Iterator[_Cabled]:
    """Every host port with its leaf (None: uncabled), endpoint label and node."""
    nodes = {node.name: node for node in snapshot.nodes}
    if isinstance(snapshot, RoceSnapshot):
        for nic in snapshot.nics:
            yield nic.switch, f"{nic.switch}:{nic.port}", nodes.get(nic.node)
    else:
        for port in snapshot.ports:
            yield port.switch, format_guid(port.guid), nodes.get(port.node)


def leaf_topology(tenant: str, cabled: Iterable[_Cabled]) -> dict[str, Any]:
    """The ``dedicated_leaf`` claim: per leaf of `tenant`, its endpoints and the others counted.

    A port of a node that holds the tenant and another owner is listed and also counted as that
    owner's (a verified fabric has none: nodes are held by one owner).
    """
    me = Owner.tenant(tenant)
    mine: dict[str, list[str]] = defaultdict(list)
    others: dict[str, Counter[str]] = defaultdict(Counter)
    uncabled = []
    for leaf, endpoint, node in cabled:
        held = me in (node.owners if node else ())
        if leaf is None:
            uncabled += [endpoint] if held else []
            continue
        if held:
            mine[leaf].append(endpoint)
        if (other := _other_kind(node, me)) is not None:
            others[leaf][other] += 1
    leaves = [
        {
            "leaf": leaf,
            "endpoints": sorted(mine[leaf]),
            "others": {kind: others[leaf][kind] for kind in OTHER_KINDS},
        }
        for leaf in sorted(mine)
    ]
    holds = all(others[leaf]["tenants"] == 0 for leaf in mine)
    return {"holds": holds, "leaves": leaves, "uncabled": sorted(uncabled)}


def _other_kind(node: Node | None, me: Owner) -> str | None:
    """Which kind of other owner a port of `node` counts as; None when only the tenant's."""
    if node is None:
        return "unassigned"
    held = sorted(owner for owner in node.owners if owner != me)
    if held:
        return "tenants" if held[0].kind is OwnerKind.TENANT else "services"
    if node.owners:
        return None
    return "management" if node.role is NodeRole.MANAGEMENT else "unassigned"


# --- checks -------------------------------------------------------------------------------------


def check_policy_claims(predicate: Mapping[str, Any], subjects: Mapping[str, bytes]) -> None:
    """Check the ``policy`` and ``dedicated_leaf`` claims against each other and the artifacts.

    Property: when this returns, the claims are well formed, ``dedicated_leaf.holds`` follows
    from the carried topology, and the tenant's ports in it are the artifacts' (module
    docstring). A predicate without ``policy`` (issued before policies) passes unchanged.

    Args:
        predicate: The Statement's predicate.
        subjects: The subject files by name, their digests already checked.

    Raises:
        InvalidValueError: A member is malformed or inconsistent, the claim does not follow, or
            the tenant's ports differ from the artifacts'.
    """
    policy = predicate.get("policy")
    topology = predicate.get("dedicated_leaf")
    if policy is None:
        if topology is not None:
            raise InvalidValueError("the proof carries a dedicated_leaf topology but no policy")
        return
    dedicated = _check_policy(policy)
    if dedicated != (topology is not None):
        raise InvalidValueError(
            f"the tenant's isolation is {policy.get('isolation')!r}, but the proof "
            f"{'carries no' if dedicated else 'carries a'} dedicated_leaf topology"
        )
    if topology is None:
        return
    leaves = _check_topology(topology, predicate.get("endpoints"))
    if predicate.get("kind") == "roce":
        if topology["uncabled"]:
            raise InvalidValueError("a RoCE topology lists uncabled ports (every NIC has a leaf)")
        _check_roce_leaves(leaves, predicate, subjects)
    else:
        listed = {e for entry in leaves.values() for e in entry["endpoints"]}
        _check_ib_partition(listed | set(topology["uncabled"]), str(predicate["tenant"]), subjects)


def _check_policy(policy: Any) -> bool:
    """Check the ``policy`` member's shape; whether it puts the tenant on dedicated leaves."""
    if not isinstance(policy, dict):
        raise InvalidValueError("'policy' is not an object")
    version = policy.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise InvalidValueError(f"the policy version {version!r} is not a whole number")
    if not isinstance(policy.get("fingerprint"), str) or not _FINGERPRINT.fullmatch(
        policy["fingerprint"]
    ):
        raise InvalidValueError("the policy fingerprint is not sha256:<64 hex digits>")
    kind, isolation = policy.get("tenant_kind"), policy.get("isolation")
    if (kind is None) != (isolation is None):
        raise InvalidValueError("the policy states the tenant's kind or isolation, not both")
    if kind is not None and kind not in {k.value for k in TenantKind}:
        raise InvalidValueError(f"unknown tenant kind {kind!r}")
    if isolation is not None and isolation not in {i.value for i in Isolation}:
        raise InvalidValueError(f"unknown isolation {isolation!r}")
    return bool(isolation == Isolation.DEDICATED_LEAF.value)


def _check_topology(topology: Any, endpoints: Any) -> dict[str, dict[str, Any]]:
    """Check the topology's shape, that the claim follows and that it covers `endpoints`.

    Returns:
        Its leaves by name.
    """
    if not isinstance(topology, dict) or not isinstance(topology.get("leaves"), list):
        raise InvalidValueError("'dedicated_leaf' carries no list of leaves")
    leaves = {_leaf_name(entry): entry for entry in topology["leaves"]}
    if len(leaves) != len(topology["leaves"]):
        raise InvalidValueError("the topology lists a leaf twice")
    uncabled = _strings(topology.get("uncabled"), "uncabled")
    listed = [e for entry in leaves.values() for e in _strings(entry.get("endpoints"), "endpoints")]
    if len(set(listed + uncabled)) != len(listed) + len(uncabled):
        raise InvalidValueError("the topology lists an endpoint on two leaves")
    if set(listed + uncabled) != set(_strings(endpoints, "endpoints")):
        raise InvalidValueError("the topology's endpoints are not the tenant's endpoints")
    shared = {leaf: _others(entry)["tenants"] for leaf, entry in leaves.items()}
    holds = all(count == 0 for count in shared.values())
    if topology.get("holds") is not holds:
        raise InvalidValueError(
            f"the topology counts other tenants' ports on {_shared(shared)}, so dedicated_leaf "
            f"{'holds' if holds else 'does not hold'}; the proof claims {topology.get('holds')!r}"
        )
    if not holds:
        raise InvalidValueError(f"dedicated_leaf does not hold: other tenants on {_shared(shared)}")
    return leaves


def _shared(shared: Mapping[str, int]) -> str:
    found = [f"{leaf} ({count})" for leaf, count in sorted(shared.items()) if count]
    return ", ".join(found) or "no leaf"


def _leaf_name(entry: Any) -> str:
    if not isinstance(entry, dict) or not isinstance(entry.get("leaf"), str):
        raise InvalidValueError("a topology entry names no leaf")
    return str(entry["leaf"])


def _strings(value: Any, member: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidValueError(f"'{member}' is not a list of strings")
    return value


def _others(entry: Mapping[str, Any]) -> dict[str, int]:
    """A leaf's ``others``: a whole, non-negative count of every kind, nothing else."""
    others = entry.get("others")
    if not isinstance(others, dict) or set(others) != set(OTHER_KINDS):
        raise InvalidValueError(f"leaf {entry['leaf']}: 'others' does not count {OTHER_KINDS}")
    for kind, count in others.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InvalidValueError(f"leaf {entry['leaf']}: others.{kind} is not a count")
    return others


def _check_ib_partition(guids: set[str], tenant: str, subjects: Mapping[str, bytes]) -> None:
    """The partition the file names as the tenant's has exactly `guids`, all full members."""
    if PARTITIONS_PATH not in subjects:
        raise InvalidValueError(f"the proof has no {PARTITIONS_PATH} subject")
    parsed = parse_partitions_conf(subjects[PARTITIONS_PATH].decode())
    me = Owner.tenant(tenant)
    keys = {
        p.pkey for p in parsed.partitions if p.pkey and p.name == Partition(p.pkey, me, ()).name
    }
    if not keys and not guids:
        return  # a tenant with no port on the fabric has no partition either
    if len(keys) != 1:
        raise InvalidValueError(f"{PARTITIONS_PATH} has {len(keys)} partitions of {me}, not one")
    (pkey,) = keys
    if special_members(parsed).get(pkey):
        raise InvalidValueError(f"{PARTITIONS_PATH}: {me}'s partition has special members")
    members = {format_guid(g): m for g, m in memberships(parsed).get(pkey, {}).items()}
    if set(members) != guids or "limited" in members.values():
        raise InvalidValueError(
            f"the topology's ports of {me} are not its partition's full members in "
            f"{PARTITIONS_PATH} (only in the topology: {sorted(guids - set(members)) or 'none'}; "
            f"only in the file: {sorted(set(members) - guids) or 'none'})"
        )


def _check_roce_leaves(
    leaves: Mapping[str, Mapping[str, Any]],
    predicate: Mapping[str, Any],
    subjects: Mapping[str, bytes],
) -> None:
    """Each leaf's tenant VLAN members are its listed ports; other VLANs' ports are counted."""
    configs = {p.split("/")[1]: p for p in subjects if _CONFIG_DB.fullmatch(p)}
    if set(configs) != set(leaves):
        raise InvalidValueError(
            f"the topology's leaves {sorted(leaves)} are not the proof's config_db.json "
            f"subjects {sorted(configs)}"
        )
    vrf, vlan = _tenant_vlan(predicate)
    for leaf, entry in sorted(leaves.items()):
        parsed = parse_config_db(subjects[configs[leaf]].decode())
        if not any(i.vlan == vlan and i.vrf == vrf for i in parsed.vlan_interfaces):
            raise InvalidValueError(f"{configs[leaf]}: VLAN {vlan} is not in the tenant's {vrf}")
        ports = {m.port for m in parsed.vlan_members if m.vlan == vlan}
        listed = {e.partition(":")[2] for e in entry["endpoints"] if e.startswith(f"{leaf}:")}
        if ports != listed or len(listed) != len(entry["endpoints"]):
            raise InvalidValueError(
                f"{configs[leaf]}: VLAN {vlan} has the ports {sorted(ports)}, the topology "
                f"lists {sorted(entry['endpoints'])}"
            )
        others = {m.port for m in parsed.vlan_members if m.vlan != vlan}
        counted = entry["others"]["tenants"] + entry["others"]["services"]
        if len(others) > counted:
            raise InvalidValueError(
                f"{configs[leaf]}: {len(others)} port(s) in other owners' VLANs, the topology "
                f"counts {counted} other tenants' and services' ports on {leaf}"
            )


def _tenant_vlan(predicate: Mapping[str, Any]) -> tuple[str, int]:
    """The tenant's VRF and the VLAN of its segment in that VRF, from the claims."""
    vrfs = predicate.get("vrfs")
    me = f"tenant:{predicate.get('tenant')}"
    if not isinstance(vrfs, dict) or not isinstance(vrfs.get(me), dict):
        raise InvalidValueError("the predicate carries no VRF of the tenant")
    vrf = str(vrfs[me].get("vrf"))
    segments = predicate.get("segments")
    found = [s for s in segments if s.get("vrf") == vrf] if isinstance(segments, list) else []
    if len(found) != 1 or not str(found[0].get("vlan")).isdigit():
        raise InvalidValueError(f"the predicate states no one VLAN of the tenant's {vrf}")
    return vrf, int(found[0]["vlan"])
