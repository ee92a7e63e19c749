"""The internal/external operation policy: what each kind of tenant may hold and reach.

A `Policy` says, per tenant kind (`internal`, `external`): the isolation level, the QoS classes a
tenant of the kind may hold, its node quota, the kinds it may peer with, the services granted
on its first allocation on a fabric and the share of each identifier pool its tenant roles may
take for it; and per shared service, which kinds may be granted it. The
verifiers evaluate it as rules with counterexamples (`policies.policy_rules`); the default policy
(`DEFAULT_POLICY`) reproduces the behaviour from before policies existed exactly: every kind on
its own segment, any class, no quota, every service visible to everyone, no default grants.

Values here are plain frozen data: snapshots carry the policy (its version and fingerprint are
part of the snapshot digest) and the facts about tenants the rules need (`TenantFacts`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "DEFAULT_MAX_PARTITIONS",
    "DEFAULT_POLICY",
    "DEFAULT_POOL_SHARE_PERCENT",
    "Isolation",
    "Peering",
    "Policy",
    "TenantFacts",
    "TenantKind",
    "TenantKindPolicy",
    "Visibility",
]


class TenantKind(StrEnum):
    """Who a tenant is: the operator's own team or a paying customer."""

    INTERNAL = "internal"
    EXTERNAL = "external"


class Isolation(StrEnum):
    """How far a tenant of a kind is kept from others.

    `segment`: its own partition (InfiniBand) or VRF (RoCE) on shared switches. `dedicated_leaf`:
    in addition, no port of another tenant on any leaf switch one of its ports is cabled to.
    """

    SEGMENT = "segment"
    DEDICATED_LEAF = "dedicated_leaf"


class Visibility(StrEnum):
    """Which kinds of tenant a shared service may be granted to."""

    INTERNAL = "internal"
    EXTERNAL = "external"
    ALL = "all"

    def admits(self, kind: TenantKind) -> bool:
        """Whether a tenant of `kind` may be granted a service of this visibility."""
        return self is Visibility.ALL or self.value == kind.value


# A quarter of each pool: two colluding tenants still leave half of it to everyone else.
DEFAULT_POOL_SHARE_PERCENT = 25
# NVIDIA's bare-metal controller (NICo) allows up to 31 InfiniBand partitions per tenant.
DEFAULT_MAX_PARTITIONS = 31
# The defaults a fingerprint leaves out: rules stored before they existed keep their fingerprint.
_OMITTED_DEFAULTS = {
    "max_pool_share_percent": DEFAULT_POOL_SHARE_PERCENT,
    "max_partitions": DEFAULT_MAX_PARTITIONS,
    "release_on_last_removal": False,
}


@dataclass(frozen=True, slots=True)
class TenantKindPolicy:
    """The rules for every tenant of one kind.

    `qos_classes` None admits every class; `max_nodes` None is no quota (a tenant's own quota,
    `TenantFacts.max_nodes`, wins over it); `peering` lists the kinds a tenant of this kind may
    peer with (both sides' policies must allow it); `default_grants` names the services granted
    on the tenant's first allocation on a fabric (where the fabric has them);
    `max_pool_share_percent` is the percentage of each identifier pool of a fabric one tenant
    may hold when its own tenant roles take (`pool_share`); `max_partitions` is how many
    InfiniBand partitions one tenant of this kind may hold per fabric, its default one included;
    `release_on_last_removal` releases a node that an orchestrator allocated (through the
    UFM-compatible API) when its last port leaves the tenant's last additional partition, as a
    Slurm epilog expects: a job's nodes are not held, nor billed, after the job.
    """

    isolation: Isolation = Isolation.SEGMENT
    qos_classes: tuple[str, ...] | None = None
    max_nodes: int | None = None
    peering: tuple[TenantKind, ...] = ()
    default_grants: tuple[str, ...] = ()
    max_pool_share_percent: int = DEFAULT_POOL_SHARE_PERCENT
    max_partitions: int = DEFAULT_MAX_PARTITIONS
    release_on_last_removal: bool = False

    def admits_class(self, qos_class: str | None) -> bool:
        """Whether a tenant of this kind may hold `qos_class` (no class is always admitted)."""
        return qos_class is None or self.qos_classes is None or qos_class in self.qos_classes

    def pool_share(self, pool_size: int) -> int:
        """How many values of a pool of `pool_size` one tenant of this kind may hold (at least 1).

        Rounded down, so that four tenants at 25 % never hold more than the whole pool; but a
        tenant may always hold one value, however small the pool.
        """
        return max(1, pool_size * self.max_pool_share_percent // 100)


@dataclass(frozen=True, slots=True)
class Policy:
    """One version of the policy document; version 0 is the built-in default.

    `services` maps a shared service's name to its visibility; a service not listed is visible
    to every kind.
    """

    version: int = 0
    internal: TenantKindPolicy = field(
        default_factory=lambda: TenantKindPolicy(peering=(TenantKind.INTERNAL,))
    )
    external: TenantKindPolicy = field(default_factory=TenantKindPolicy)
    services: tuple[tuple[str, Visibility], ...] = ()

    def for_tenant_kind(self, kind: TenantKind | str) -> TenantKindPolicy:
        """The rules for tenants of `kind`."""
        return self.internal if TenantKind(kind) is TenantKind.INTERNAL else self.external

    def visibility(self, service: str) -> Visibility:
        """Which kinds may be granted `service` (every kind when the policy does not say)."""
        return dict(self.services).get(service, Visibility.ALL)

    def may_peer(self, a: TenantKind | str, b: TenantKind | str) -> bool:
        """Whether tenants of kinds `a` and `b` may peer: both kinds' policies must allow it."""
        kind_a, kind_b = TenantKind(a), TenantKind(b)
        return (
            kind_b in self.for_tenant_kind(kind_a).peering
            and kind_a in self.for_tenant_kind(kind_b).peering
        )

    @property
    def uses_dedicated_leaves(self) -> bool:
        """Whether any kind is on dedicated leaves (the leaf rule and placement matter)."""
        return Isolation.DEDICATED_LEAF in (self.internal.isolation, self.external.isolation)

    def document(self) -> dict[str, Any]:
        """The policy as a JSON-ready document (the API's and the digest's form, minus version)."""
        return {
            "kinds": {
                kind.value: _kind_document(self.for_tenant_kind(kind)) for kind in TenantKind
            },
            "services": {name: visibility.value for name, visibility in sorted(self.services)},
        }

    @property
    def fingerprint(self) -> str:
        """``sha256:<hex>`` of the canonical document: equal for equal rules, whatever version.

        The canonical document leaves out a pool share, a partition limit and a release rule
        equal to their defaults: the rules of a version stored before they existed, and the
        snapshot digests and proofs that name its fingerprint, stay what they were.
        """
        document = self.document()
        for rules in document["kinds"].values():
            for name, default in _OMITTED_DEFAULTS.items():
                if rules[name] == default:
                    del rules[name]
        body = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
        return f"sha256:{hashlib.sha256(body).hexdigest()}"


def _kind_document(rules: TenantKindPolicy) -> dict[str, Any]:
    return {
        "isolation": rules.isolation.value,
        "qos_classes": None if rules.qos_classes is None else sorted(rules.qos_classes),
        "max_nodes": rules.max_nodes,
        "peering": sorted(kind.value for kind in rules.peering),
        "default_grants": sorted(rules.default_grants),
        "max_pool_share_percent": rules.max_pool_share_percent,
        "max_partitions": rules.max_partitions,
        "release_on_last_removal": rules.release_on_last_removal,
    }


DEFAULT_POLICY = Policy()


@dataclass(frozen=True, slots=True, order=True)
class TenantFacts:
    """What the policy rules need to know about one tenant that holds something on a fabric.

    `max_nodes` is the tenant's own quota, set by an operator (None: its kind's quota applies).
    """

    name: str
    kind: TenantKind
    qos_class: str | None = None
    max_nodes: int | None = None


@dataclass(frozen=True, slots=True, order=True)
class Peering:
    """An accepted peering between tenants `a` and `b` on one fabric (`a` < `b`).

    Only accepted peerings are part of a snapshot; whether the policy allows them is a rule.
    """

    a: str
    b: str

    def __post_init__(self) -> None:
        if not self.a < self.b:
            raise ValueError(f"a peering names two different tenants in order: {self.a}, {self.b}")

    @classmethod
    def between(cls, x: str, y: str) -> Peering:
        """The peering of `x` and `y`, in either order."""
        return cls(*sorted((x, y)))
