"""What a verification returns: the rules, counterexamples, reachability edges and the verdict.

Shared by every technology: a `Counterexample` names the refuted `Rule`, the two endpoints and the
segment that links them (a P_Key on InfiniBand, a VNI on RoCE). Verdicts are data, never raised
(pybatfish's question/answer split); only a refused mutation raises.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from policies.model import Owner, OwnerKind

__all__ = [
    "IB_RULES",
    "MAX_COUNTEREXAMPLES_PER_RULE",
    "POLICY_RULES",
    "ROCE_RULES",
    "Counterexample",
    "Endpoint",
    "ReachabilityEdge",
    "Rule",
    "Verdict",
    "capped",
    "edge_rule",
]


# A wrong fabric can produce one counterexample per port pair; callers need a sample, not all.
MAX_COUNTEREXAMPLES_PER_RULE = 100


class Rule(StrEnum):
    """The properties `verify_isolation` evaluates; a counterexample names the one it refutes."""

    CROSS_TENANT = "cross-tenant-reachability"
    SERVICE_WITHOUT_GRANT = "service-without-grant"
    UNASSIGNED_MEMBER = "unassigned-port-reachable"
    CROSS_SERVICE = "cross-service-reachability"
    DEFAULT_PARTITION_FULL = "default-partition-full-member"
    NODE_SHARED = "node-shared"
    MANAGEMENT_ASSIGNED = "management-node-assigned"
    PKEY_BUDGET = "pkey-budget-exceeded"
    PKEY_INVALID = "pkey-invalid"
    PKEY_OUT_OF_RANGE = "pkey-out-of-range"
    PKEY_DUPLICATE = "pkey-duplicate"
    UNKNOWN_MEMBER = "unknown-member-port"
    FOREIGN_MEMBER = "partition-foreign-member"
    INDEX0_CONFLICT = "index0-conflict"
    # RoCE (EVPN-VXLAN) rules, evaluated by policies.roce.verify (docs/facts/roce.md §7).
    VNI_DUPLICATE = "vni-duplicate"
    VNI_OUT_OF_RANGE = "vni-out-of-range"
    VLAN_DUPLICATE = "vlan-duplicate"
    VLAN_OUT_OF_RANGE = "vlan-out-of-range"
    VRF_INVALID = "vrf-invalid"
    RD_INVALID = "rd-invalid"
    PORT_SHARED = "port-shared"
    ROUTE_LEAK = "route-leak"
    SUBNET_OVERLAP = "subnet-overlap"
    SUBNET_OUTSIDE_POOL = "subnet-outside-pool"
    NIC_UNKNOWN_PORT = "nic-unknown-port"
    QOS_PFC_ON_LOSSY = "qos-pfc-on-lossy"
    QOS_LOSSLESS_LIMIT = "qos-lossless-limit"
    QOS_ECN_MISSING = "qos-ecn-missing"
    QOS_CNP_CONFLICT = "qos-cnp-conflict"
    QOS_DSCP_DUPLICATE = "qos-dscp-duplicate"
    QOS_ETS_OVERCOMMIT = "qos-ets-overcommit"
    MTU_BUDGET = "mtu-budget"
    # Policy rules, evaluated on both technologies by policies.policy_rules.
    DEDICATED_LEAF = "policy-dedicated-leaf"
    POLICY_QOS_CLASS = "policy-qos-class"
    SERVICE_VISIBILITY = "policy-service-visibility"
    PEERING_NOT_ALLOWED = "policy-peering"
    QUOTA_EXCEEDED = "policy-quota"


# The rules a verdict evaluates, per fabric kind; the reachability and node rules are shared.
_SHARED_RULES = (
    Rule.CROSS_TENANT,
    Rule.SERVICE_WITHOUT_GRANT,
    Rule.UNASSIGNED_MEMBER,
    Rule.CROSS_SERVICE,
)


# The policy rules a per-fabric verdict evaluates. QUOTA_EXCEEDED is not one of them: quotas count
# nodes across every fabric, and a fabric's verdict depends on that fabric only
# (policies.policy_rules.quota_violations is called by the service with global counts).
POLICY_RULES: tuple[Rule, ...] = (
    Rule.DEDICATED_LEAF,
    Rule.POLICY_QOS_CLASS,
    Rule.SERVICE_VISIBILITY,
    Rule.PEERING_NOT_ALLOWED,
)


IB_RULES: tuple[Rule, ...] = (
    *_SHARED_RULES,
    Rule.DEFAULT_PARTITION_FULL,
    Rule.NODE_SHARED,
    Rule.MANAGEMENT_ASSIGNED,
    Rule.PKEY_BUDGET,
    Rule.PKEY_INVALID,
    Rule.PKEY_OUT_OF_RANGE,
    Rule.PKEY_DUPLICATE,
    Rule.UNKNOWN_MEMBER,
    Rule.FOREIGN_MEMBER,
    Rule.INDEX0_CONFLICT,
    *POLICY_RULES,
)


ROCE_RULES: tuple[Rule, ...] = (
    *_SHARED_RULES,
    Rule.NODE_SHARED,
    Rule.MANAGEMENT_ASSIGNED,
    *(rule for rule in Rule if rule not in IB_RULES and rule is not Rule.QUOTA_EXCEEDED),
    *POLICY_RULES,
)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One side of a counterexample: a port, the host it is on, and who owns it.

    On RoCE `guid` is 0 and `port` names the switch port the host is cabled to
    (``leaf01:Ethernet0``).
    """

    guid: int
    node: str
    owner: Owner
    port: str | None = None


@dataclass(frozen=True, slots=True)
class Counterexample:
    """A concrete refutation of `rule`: the endpoints involved and the segment that links them.

    `segment` is the partition's P_Key on InfiniBand and the VNI on RoCE.
    """

    rule: Rule
    message: str
    segment: int | None = None
    a: Endpoint | None = None
    b: Endpoint | None = None


@dataclass(frozen=True, slots=True)
class ReachabilityEdge:
    """`source` and `target` can communicate through `segment`; `allowed` is the intent.

    `segment` is a P_Key on InfiniBand and an L3VNI on RoCE.
    """

    source: Owner
    target: Owner
    segment: int
    allowed: bool


@dataclass(frozen=True, slots=True)
class Verdict:
    """Result of a verification: `holds` iff there is no counterexample for any rule."""

    holds: bool
    snapshot_digest: str
    counterexamples: tuple[Counterexample, ...]
    reachability: tuple[ReachabilityEdge, ...]
    rules: tuple[Rule, ...] = IB_RULES


def capped(counterexamples: Iterable[Counterexample]) -> list[Counterexample]:
    """At most `MAX_COUNTEREXAMPLES_PER_RULE` counterexamples per rule, in the order given."""
    per_rule: Counter[Rule] = Counter()
    kept = []
    for example in counterexamples:
        per_rule[example.rule] += 1
        if per_rule[example.rule] <= MAX_COUNTEREXAMPLES_PER_RULE:
            kept.append(example)
    return kept


def edge_rule(a: Owner, b: Owner) -> Rule:
    """The rule an unintended edge between `a` and `b` refutes, by the kinds of the owners."""
    kinds = {a.kind, b.kind}
    if OwnerKind.UNASSIGNED in kinds:
        return Rule.UNASSIGNED_MEMBER
    if kinds == {OwnerKind.TENANT}:
        return Rule.CROSS_TENANT
    if kinds == {OwnerKind.SERVICE}:
        return Rule.CROSS_SERVICE
    return Rule.SERVICE_WITHOUT_GRANT
