"""InfiniBand's rules on keys and memberships, and the per-port P_Key budget.

Keys must be valid, in the fabric's range and unique; members known (a port or a bound virtual
GUID) and, in a tenant's additional partition, held by the tenant; at most one ``indx0`` key per
member. Evaluated by `policies.infiniband.verify.verify_isolation` over one `VerifyIndex`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

from policies.infiniband.model import (
    DEFAULT_PKEY,
    PKEY_BASE_MASK,
    Partition,
    format_guid,
    format_pkey,
)
from policies.infiniband.verify_index import VerifyIndex
from policies.model import OwnerKind
from policies.verdict import Counterexample, Rule


def key_violations(index: VerifyIndex) -> Iterator[Counterexample]:
    """Keys invalid, outside the fabric's range or duplicated; members that are not known."""
    fabric = index.snapshot.fabric
    seen: dict[int, Partition] = {}
    for partition in index.snapshot.partitions:
        key, base = partition.pkey, partition.pkey & PKEY_BASE_MASK
        if key != base or base in (0, DEFAULT_PKEY):
            yield _key_example(Rule.PKEY_INVALID, partition, "is not a valid tenant P_Key")
        elif not fabric.pkey_first <= key <= fabric.pkey_last:
            yield _key_example(
                Rule.PKEY_OUT_OF_RANGE,
                partition,
                f"is outside the fabric range {format_pkey(fabric.pkey_first)}-"
                f"{format_pkey(fabric.pkey_last)}",
            )
        if base in seen:
            other = seen[base].owner
            yield _key_example(Rule.PKEY_DUPLICATE, partition, f"is also used by {other}")
        seen.setdefault(base, partition)
        yield from _unknown_members(index, partition)


def _key_example(rule: Rule, partition: Partition, problem: str) -> Counterexample:
    return Counterexample(
        rule, f"P_Key {format_pkey(partition.pkey)} of {partition.owner} {problem}", partition.pkey
    )


def _unknown_members(index: VerifyIndex, partition: Partition) -> Iterator[Counterexample]:
    for member in partition.members:
        if not index.is_member_known(member.guid):
            yield Counterexample(
                Rule.UNKNOWN_MEMBER,
                f"partition {format_pkey(partition.pkey)} of {partition.owner} lists port "
                f"{format_guid(member.guid)}, which is neither in the fabric nor a bound "
                "virtual GUID",
                partition.pkey,
            )


def foreign_member_violations(index: VerifyIndex) -> Iterator[Counterexample]:
    """Members of a tenant's additional partitions that the tenant does not hold.

    An additional partition (`Partition.label`) lists its members explicitly. A default
    partition's are derived from the tenant's nodes (`plan_partitions`), so a foreign member
    there comes only from a deployed or observed file, where it is drift and, when it connects
    two owners, a reachability counterexample; peerings' partitions hold both tenants' ports.
    """
    for partition in index.snapshot.partitions:
        owner = partition.owner
        if owner.kind is not OwnerKind.TENANT or partition.peering or partition.label is None:
            continue
        for member in partition.members:
            if index.is_member_known(member.guid) and not index.holds(owner, member.guid):
                endpoint = index.endpoint(member.guid)
                what = "port" if member.guid in index.port else "virtual GUID"
                yield Counterexample(
                    Rule.FOREIGN_MEMBER,
                    f"partition {partition.name} ({format_pkey(partition.pkey)}) of {owner} "
                    f"lists {what} {format_guid(member.guid)} of {endpoint.owner}, which "
                    f"{owner} does not hold",
                    partition.pkey,
                    endpoint,
                )


def index0_violations(index: VerifyIndex) -> Iterator[Counterexample]:
    """Ports and virtual GUIDs in more than one partition with ``indx0``: one key fits index 0."""
    keys: dict[int, list[int]] = defaultdict(list)
    for partition in index.snapshot.partitions:
        if partition.index0:
            for guid in {m.guid for m in partition.members}:
                keys[guid].append(partition.pkey)
    for guid, pkeys in sorted(keys.items()):
        if len(pkeys) > 1:
            listed = ", ".join(format_pkey(k) for k in sorted(pkeys))
            yield Counterexample(
                Rule.INDEX0_CONFLICT,
                f"{format_guid(guid)} is a member of {len(pkeys)} partitions that put their key "
                f"at P_Key index 0 ({listed}); only one key can sit there",
                min(pkeys),
                index.endpoint(guid),
            )


def budget_violations(index: VerifyIndex) -> Iterator[Counterexample]:
    """Ports whose partitions, with the default one, need more keys than the fabric allows.

    Every partition counts (the owner's, services', peerings', additional ones). A virtual GUID
    does not: isofabric does not know which physical port it sits on.
    """
    # OpenSM installs keys that do not fit the table in no defined order and logs only ERR 0512
    # (docs/facts/infiniband.md §2.3), so an over-budget port silently loses memberships.
    budget = index.snapshot.fabric.pkeys_per_port
    counts: Counter[int] = Counter()
    for partition in index.snapshot.partitions:
        counts.update({m.guid for m in partition.members})
    for guid, count in sorted(counts.items()):
        if guid in index.virtual and guid not in index.port:
            continue
        if count + 1 > budget:  # +1: every port also holds the default partition 0x7fff
            yield Counterexample(
                Rule.PKEY_BUDGET,
                f"port {format_guid(guid)} needs {count + 1} P_Keys (default partition included)"
                f" but the fabric allows {budget} per port",
                None,
                index.endpoint(guid),
            )
