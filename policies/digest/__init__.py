"""The v2 snapshot digest: a multiset hash over groups of facts that a change updates in place.

Version 1 (``sha256:<hex>``) hashed one canonical serialisation of the whole snapshot, so every
change paid for the whole fabric. Version 2 (``v2:<hex>``) splits a snapshot into *groups*, each
a canonical JSON document under a key: ``fabric`` (settings and what belongs to no one),
``node:<name>`` (a host and its ports or NICs) and ``owner:<owner>`` (what a tenant or service
holds: its nodes, its segment, its grants). The digest is the SHA-256 of the LtHash16 sum of the
groups' SHA-256s (policies/digest/lthash.py), so replacing one group's hash updates it in
time proportional to that group.

Groups hold the inputs of the system of record. What the planner derives from them (InfiniBand
memberships, RoCE grant imports) is named by a planner version in the ``fabric`` group, and any
deviation of a snapshot's derived data from the plan (possible only for snapshots read from
deployed configuration) is part of the group of the port's or segment's owner, so the digest
still tells every two different snapshots apart.

Version boundary: entries of the audit log, proofs and snapshot history written before keep
their ``sha256:`` digests and verify as before (a digest is an opaque name that signatures and
hash chains cover); the first change of a fabric after the upgrade is audited with the v1 digest
as `digest_before` and the v2 digest as `digest_after`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from policies.digest.lthash import MultisetHash, element_hash
from policies.model import Grant, Node, Owner
from policies.policy import Peering, Policy, TenantFacts

DIGEST_PREFIX = "v2:"
# A snapshot digest of either version, as stored and exchanged (audit log, manifests, reports).
SNAPSHOT_DIGEST_PATTERN = r"(sha256|v2):[0-9a-f]{64}"
FABRIC_GROUP = "fabric"

Groups = dict[str, bytes]


def canonical(document: Any) -> bytes:
    """Deterministic JSON: sorted keys, no whitespace (values must already be sorted lists)."""
    return _CANONICAL.encode(document).encode()


# What json.dumps builds on every call with these options, built once (a group per host).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)


def node_key(node: str) -> str:
    """The group key of a host."""
    return f"node:{node}"


def owner_key(owner: object) -> str:
    """The group key of an owner (``owner:tenant:acme``)."""
    return f"owner:{owner}"


def group_hash(key: str, body: bytes) -> bytes:
    """The element hash of one group: its key and canonical body."""
    return element_hash(key.encode() + b"\x00" + body)


def hashes_of(groups: Mapping[str, bytes]) -> dict[str, bytes]:
    """Each group's element hash, by key."""
    return {key: group_hash(key, body) for key, body in groups.items()}


def digest_of_hashes(hashes: Iterable[bytes]) -> str:
    """The v2 digest of a set of group hashes."""
    total = MultisetHash()
    for element in hashes:
        total.add(element)
    return DIGEST_PREFIX + total.digest()


def digest_of(groups: Mapping[str, bytes]) -> str:
    """The v2 digest of a snapshot's groups (see the module docstring)."""
    return digest_of_hashes(hashes_of(groups).values())


def is_v2(digest: str) -> bool:
    """Whether a digest string is a version 2 snapshot digest."""
    return digest.startswith(DIGEST_PREFIX)


S = TypeVar("S")
Facts = dict[Owner, dict[str, list[Any]]]


@dataclass(frozen=True, slots=True)
class GroupMaker(Generic[S]):
    """How one technology splits its snapshot into groups (see the module docstring)."""

    fabric: Callable[[S], bytes]
    nodes: Callable[[S, set[str] | None], Groups]
    owners: Callable[[S, set[Owner] | None], Groups]

    def groups(
        self, snapshot: S, owners: Iterable[Owner] | None, nodes: Iterable[str] | None
    ) -> Groups:
        """All groups, or only those of `owners` and `nodes` when either is given.

        An owner or node with nothing to say has no group (absent from the result), so a scoped
        call tells the caller which groups to drop. Groups of a sub-snapshot equal the whole
        snapshot's for every owner whose nodes, segment and grants it holds in full.
        """
        everything = owners is None and nodes is None
        found: Groups = {FABRIC_GROUP: self.fabric(snapshot)} if everything else {}
        wanted_nodes = None if nodes is None else set(nodes)
        if everything or wanted_nodes:
            found.update(self.nodes(snapshot, wanted_nodes))
        wanted_owners = None if owners is None else set(owners)
        if everything or wanted_owners:
            found.update(self.owners(snapshot, wanted_owners))
        return found


def node_groups(
    nodes: Iterable[Node],
    facts: Iterable[tuple[str, list[Any]]],
    wanted: set[str] | None,
    label: str,
) -> Groups:
    """One group per host: its role and its `label` facts (ports or NICs), sorted."""
    roles = {n.name: n.role.value for n in nodes}
    found: dict[str, list[Any]] = defaultdict(list)
    for node, fact in facts:
        if wanted is None or node in wanted:
            found[node].append(fact)
    names = set(found) | {n for n in roles if wanted is None or n in wanted}
    return {
        node_key(name): canonical({"role": roles.get(name), label: sorted(found[name])})
        for name in names
    }


def holder_facts(
    nodes: Iterable[Node], grants: Iterable[Grant], wanted: set[Owner] | None
) -> Facts:
    """What every owner (or each wanted one) holds and reaches: its nodes, a tenant's grants."""
    facts: Facts = defaultdict(lambda: defaultdict(list))
    for node in nodes:
        for owner in node.owners:
            if wanted is None or owner in wanted:
                facts[owner]["nodes"].append(node.name)
    for grant in grants:
        tenant = Owner.tenant(grant.tenant)
        if wanted is None or tenant in wanted:
            facts[tenant]["grants"].append(grant.service)
    return facts


def owner_groups(facts: Facts) -> Groups:
    """One group per owner from its facts, every list sorted, empty ones left out."""
    return {
        owner_key(owner): canonical({k: sorted(v, key=str) for k, v in sorted(found.items()) if v})
        for owner, found in facts.items()
    }


def policy_fields(policy: Policy) -> dict[str, Any]:
    """What the ``fabric`` group adds for the policy: nothing under the default (version 0).

    Version 0 adds nothing, so every digest from before policies existed stays the same.
    """
    return {} if policy.version == 0 else {"policy": [policy.version, policy.fingerprint]}


def add_policy_facts(
    facts: Facts,
    policy: Policy,
    tenants: Iterable[TenantFacts],
    peerings: Iterable[Peering],
    wanted: set[Owner] | None,
) -> None:
    """Add each tenant's peers (``peerings``) and, where they count, its facts (``tenant``).

    A tenant's facts (kind, QoS class, own quota) go into its group when the policy is not the
    default or the tenant is peered (whether a peering is allowed depends on the kinds even
    under the default policy); so nothing is added for snapshots from before policies.
    """
    peered: set[str] = set()
    for peering in peerings:
        for me, other in ((peering.a, peering.b), (peering.b, peering.a)):
            peered.add(me)
            if wanted is None or Owner.tenant(me) in wanted:
                facts[Owner.tenant(me)]["peerings"].append(other)
    for tenant in tenants:
        owner = Owner.tenant(tenant.name)
        if (policy.version != 0 or tenant.name in peered) and (wanted is None or owner in wanted):
            facts[owner]["tenant"].append([tenant.kind.value, tenant.qos_class, tenant.max_nodes])
