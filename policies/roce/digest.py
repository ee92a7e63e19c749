"""The groups of a RoCE snapshot's v2 digest (policies/digest).

``fabric``: settings, switches, links, the planner version and QoS classes no segment uses.
``node:<name>``: the host's role and NICs. ``owner:<owner>``: the nodes it holds, its grants, its
segment (VRF, VNIs, VLANs, subnet, RD) with its QoS class's definition, and route-target imports
that differ from those its grants call for (`with_grant_imports`). Grant imports are derived, so
a tenant's first segment changes its own group only, not the groups of the services it reaches.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, replace
from typing import Any

from policies.digest import FABRIC_GROUP, Groups, canonical, digest_of, node_key, owner_key
from policies.model import Owner
from policies.roce.model import RoceSnapshot, with_grant_imports

# Bump when with_grant_imports derives different imports from the same inputs.
PLANNER_VERSION = "roce-imports/1"


def roce_digest(snapshot: RoceSnapshot) -> str:
    """The v2 digest of the whole snapshot."""
    return digest_of(roce_groups(snapshot))


def roce_groups(
    snapshot: RoceSnapshot,
    *,
    owners: Iterable[Owner] | None = None,
    nodes: Iterable[str] | None = None,
) -> Groups:
    """The snapshot's digest groups, or only those of `owners` and `nodes` when either is given.

    Same contract as `policies.infiniband.digest.ib_groups`: absent means no group.
    """
    everything = owners is None and nodes is None
    groups: Groups = {}
    if everything:
        groups[FABRIC_GROUP] = _fabric_group(snapshot)
    wanted_nodes = None if nodes is None else set(nodes)
    if everything or wanted_nodes:
        groups.update(_node_groups(snapshot, wanted_nodes))
    wanted_owners = None if owners is None else set(owners)
    if everything or wanted_owners:
        groups.update(_owner_groups(snapshot, wanted_owners))
    return groups


def _fabric_group(snapshot: RoceSnapshot) -> bytes:
    used = {s.qos_class for s in snapshot.segments}
    return canonical(
        {
            "planner": PLANNER_VERSION,
            "settings": canonical(asdict(snapshot.fabric)).decode(),
            "switches": sorted(canonical(asdict(s)).decode() for s in snapshot.switches),
            "links": sorted(canonical(asdict(x)).decode() for x in snapshot.links),
            "unused_qos": sorted(
                canonical(asdict(q)).decode() for q in snapshot.qos_classes if q.name not in used
            ),
        }
    )


def _node_groups(snapshot: RoceSnapshot, wanted: set[str] | None) -> Groups:
    roles = {n.name: n.role.value for n in snapshot.nodes}
    nics: dict[str, list[list[str]]] = defaultdict(list)
    for nic in snapshot.nics:
        if wanted is None or nic.node in wanted:
            nics[nic.node].append([nic.name, nic.switch, nic.port])
    names = set(nics) | {n for n in roles if wanted is None or n in wanted}
    return {
        node_key(name): canonical({"role": roles.get(name), "nics": sorted(nics[name])})
        for name in names
    }


def _owner_groups(snapshot: RoceSnapshot, wanted: set[Owner] | None) -> Groups:
    facts: dict[Owner, dict[str, Any]] = defaultdict(lambda: defaultdict(list))

    def keep(owner: Owner) -> bool:
        return wanted is None or owner in wanted

    for node in snapshot.nodes:
        for owner in filter(keep, node.owners):
            facts[owner]["nodes"].append(node.name)
    for grant in snapshot.grants:
        if keep(Owner.tenant(grant.tenant)):
            facts[Owner.tenant(grant.tenant)]["grants"].append(grant.service)
    qos = {q.name: canonical(asdict(q)).decode() for q in snapshot.qos_classes}
    derived = _derived_imports(snapshot)
    for segment in snapshot.segments:
        if keep(segment.owner):
            found = facts[segment.owner]
            found["segments"].append(canonical(asdict(replace(segment, imports=()))).decode())
            found["qos"].append(qos.get(segment.qos_class or ""))
            expected = derived.get(segment.owner, set())
            found["imports"].extend(f"+{rt}" for rt in set(segment.imports) - expected)
            found["imports"].extend(f"-{rt}" for rt in expected - set(segment.imports))
    return {
        owner_key(owner): canonical({k: sorted(v, key=str) for k, v in sorted(found.items()) if v})
        for owner, found in facts.items()
    }


def _derived_imports(snapshot: RoceSnapshot) -> dict[Owner, set[str]]:
    bare = tuple(replace(s, imports=()) for s in snapshot.segments)
    planned = with_grant_imports(bare, snapshot.grants, snapshot.fabric.rt_asn)
    derived: dict[Owner, set[str]] = {}
    for segment in planned:
        derived.setdefault(segment.owner, set()).update(segment.imports)
    return derived
