"""The groups of a RoCE snapshot's v2 digest (policies/digest).

``fabric``: settings, switches, links, the planner version and every defined QoS class with
RoCE parameters; which of them each leaf carries (`qos_classes`, verify_qos.deployable_classes)
follows from those and the classes the owners' segments use.
``node:<name>``: the host's role and NICs. ``owner:<owner>``: the nodes it holds, its grants, its
segment (VRF, VNIs, VLANs, subnet, RD) with its QoS class's definition, and route-target imports
that differ from those its grants call for (`with_grant_imports`). Grant imports are derived, so
a tenant's first segment changes its own group only, not the groups of the services it reaches.

Under a policy other than the default (version 0) the ``fabric`` group also holds the policy's
version and fingerprint and each tenant's group its facts; a peering is in both tenants' groups
(its imports are derived like a grant's). Snapshots without either hash exactly as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, replace

from policies.digest import (
    GroupMaker,
    Groups,
    add_policy_facts,
    canonical,
    digest_of,
    holder_facts,
    node_groups,
    owner_groups,
    policy_fields,
)
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
    """The snapshot's digest groups, or those of `owners` and `nodes` (`GroupMaker.groups`)."""
    return _MAKER.groups(snapshot, owners, nodes)


def _fabric_group(snapshot: RoceSnapshot) -> bytes:
    # Every defined class, used or not: the fabric group must not change when a tenant's segment
    # comes or goes (an incremental change replaces only the groups of the owners it touches,
    # tenancy/gate/change_check.py); the owner groups hold the classes in use.
    return canonical(
        {
            "planner": PLANNER_VERSION,
            "settings": canonical(asdict(snapshot.fabric)).decode(),
            "switches": sorted(canonical(asdict(s)).decode() for s in snapshot.switches),
            "links": sorted(canonical(asdict(x)).decode() for x in snapshot.links),
            "qos": sorted(canonical(asdict(q)).decode() for q in snapshot.defined_qos_classes),
            **policy_fields(snapshot.policy),
        }
    )


def _node_groups(snapshot: RoceSnapshot, wanted: set[str] | None) -> Groups:
    nics = ((n.node, [n.name, n.switch, n.port]) for n in snapshot.nics)
    return node_groups(snapshot.nodes, nics, wanted, "nics")


def _owner_groups(snapshot: RoceSnapshot, wanted: set[Owner] | None) -> Groups:
    facts = holder_facts(snapshot.nodes, snapshot.grants, wanted)
    add_policy_facts(facts, snapshot.policy, snapshot.tenants, snapshot.peerings, wanted)
    qos = {q.name: canonical(asdict(q)).decode() for q in snapshot.qos_classes}
    derived = _derived_imports(snapshot)
    for segment in snapshot.segments:
        if wanted is None or segment.owner in wanted:
            found = facts[segment.owner]
            found["segments"].append(canonical(asdict(replace(segment, imports=()))).decode())
            found["qos"].append(qos.get(segment.qos_class or ""))
            expected = derived.get(segment.owner, set())
            found["imports"].extend(f"+{rt}" for rt in set(segment.imports) - expected)
            found["imports"].extend(f"-{rt}" for rt in expected - set(segment.imports))
    return owner_groups(facts)


_MAKER = GroupMaker(_fabric_group, _node_groups, _owner_groups)


def _derived_imports(snapshot: RoceSnapshot) -> dict[Owner, set[str]]:
    bare = tuple(replace(s, imports=()) for s in snapshot.segments)
    planned = with_grant_imports(bare, snapshot.grants, snapshot.fabric.rt_asn, snapshot.peerings)
    derived: dict[Owner, set[str]] = {}
    for segment in planned:
        derived.setdefault(segment.owner, set()).update(segment.imports)
    return derived
