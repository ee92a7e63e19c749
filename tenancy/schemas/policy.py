"""The policy document: per tenant kind and per shared service, as PUT and GET show it.

A PUT may omit any kind, any field of a kind and the services: what it omits takes the built-in
default's value (`policies.policy.DEFAULT_POLICY`), so ``{}`` is the default policy. Responses
always carry every field, plus the version and who created it.

Service names (`services`, `default_grants`) need not exist yet, unlike QoS class names (global,
seeded): services are created per fabric, possibly after the policy, and a rule applies to any
service of that name on any fabric, now or later. A YAML document has no anchors, aliases, tags,
merge keys or repeated keys, and a JSON one no repeated member names (tenancy/store/documents.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, StrictBool, StrictInt

from policies.policy import DEFAULT_MAX_PARTITIONS, DEFAULT_POOL_SHARE_PERCENT
from tenancy.schemas.common import Slug, Strict

# Counts of names in one document: far above any real policy, small enough to validate at once.
MAX_NAMES = 256
# Bytes of one document: the largest the schema admits (256 services, 256 classes and 256 grants
# per kind, 63-character names, block style) is about 92 KB; PyYAML parses 256 KiB in about 2 s.
MAX_DOCUMENT_BYTES = 256 * 1024
# The columns holding quotas are 32-bit integers (PostgreSQL refuses more: a 500, not a 422).
MAX_QUOTA = 2**31 - 1

IsolationName = Literal["segment", "dedicated_leaf"]
KindName = Literal["internal", "external"]
VisibilityName = Literal["all", "internal", "external"]
Quota = StrictInt

# What each rule means, said once for the document (PUT) and the view (GET).
ISOLATION = (
    "'segment': own partition or VRF on shared switches; 'dedicated_leaf': no port of another "
    "tenant on a leaf switch one of the tenant's ports is cabled to"
)
QOS_CLASSES = "The QoS classes a tenant of this kind may hold (each must exist); null: any class"
MAX_NODES = (
    "Nodes a tenant of this kind may hold across all fabrics (a tenant's own max_nodes wins); "
    "null: no quota"
)
PEERING = "The kinds ('internal', 'external') a tenant of this kind may peer with"
DEFAULT_GRANTS = (
    "Services granted on a tenant's first allocation on a fabric (where the fabric has them and "
    "their visibility admits the kind; a name no fabric has yet is accepted)"
)
MAX_POOL_SHARE = (
    "Percent (1-100) of each identifier pool of a fabric (P_Keys; VLANs, VNIs, subnets, RDs) one "
    "tenant of this kind may hold, its peerings' P_Keys and its quarantined values included, "
    "when one of its own tenant roles takes; at least one value. Operators are not bound by it"
)
MAX_PARTITIONS = (
    "How many InfiniBand partitions (P_Keys) one tenant of this kind may hold per fabric, its "
    "default partition included (1-32767); operators are bound by it too"
)
RELEASE_ON_LAST_REMOVAL = (
    "Whether a node an orchestrator allocated through the UFM-compatible API is released when "
    "its last port leaves the tenant's last additional partition (a Slurm epilog's pattern); "
    "default false"
)
# The P_Key range holds at most 0x7ffe tenant keys.
MAX_PARTITIONS_LIMIT = 0x7FFE
SERVICES = (
    "Per shared service name: which kinds may be granted it ('all', 'internal', 'external'); a "
    "service not listed is visible to all"
)


class KindPolicyDocument(Strict):
    """The rules for every tenant of one kind; an omitted field keeps the default's value."""

    isolation: IsolationName = Field(
        default="segment",
        description=ISOLATION,
    )
    qos_classes: list[Slug] | None = Field(
        default=None,
        max_length=MAX_NAMES,
        description=QOS_CLASSES,
    )
    max_nodes: Quota | None = Field(
        default=None,
        ge=0,
        le=MAX_QUOTA,
        description=MAX_NODES,
    )
    peering: list[KindName] = Field(default_factory=list, max_length=2, description=PEERING)
    default_grants: list[Slug] = Field(
        default_factory=list,
        max_length=MAX_NAMES,
        description=DEFAULT_GRANTS,
    )
    max_pool_share_percent: StrictInt = Field(
        default=DEFAULT_POOL_SHARE_PERCENT, ge=1, le=100, description=MAX_POOL_SHARE
    )
    max_partitions: StrictInt = Field(
        default=DEFAULT_MAX_PARTITIONS, ge=1, le=MAX_PARTITIONS_LIMIT, description=MAX_PARTITIONS
    )
    release_on_last_removal: StrictBool = Field(default=False, description=RELEASE_ON_LAST_REMOVAL)


class KindsDocument(Strict):
    """The rules per tenant kind; an omitted kind keeps the default's rules."""

    internal: KindPolicyDocument = Field(
        default_factory=KindPolicyDocument,
        description="Rules for internal tenants (the operator's own teams); omitted: the default's",
    )
    external: KindPolicyDocument = Field(
        default_factory=KindPolicyDocument,
        description="Rules for external tenants (customers); omitted: the default's",
    )


class PolicyDocument(Strict):
    """Body of PUT /v1/policy (JSON or YAML): the rules per tenant kind and per shared service."""

    kinds: KindsDocument = Field(
        default_factory=KindsDocument,
        description="The rules per tenant kind; an omitted kind keeps the default's rules",
    )
    services: dict[Slug, VisibilityName] = Field(
        default_factory=dict,
        max_length=MAX_NAMES,
        description=SERVICES + "; a name no fabric has yet is accepted and applies to services "
        "created later",
    )
    # What GET answers besides the rules, so that a document read, edited and put back is
    # accepted as it is: `version` is a precondition, the rest must be what that version says.
    version: StrictInt | None = Field(
        default=None,
        ge=0,
        le=MAX_QUOTA,
        description="Optional precondition (like If-Match): the version this document was read "
        "as; refused (409) when the policy in force has another version",
    )
    fingerprint: str | None = Field(
        default=None,
        max_length=80,
        description="Read-only: accepted unchanged from GET (that version's), else 422",
    )
    created_at: datetime | None = Field(
        default=None, description="Read-only: accepted unchanged from GET, else 422"
    )
    created_by: str | None = Field(
        default=None,
        max_length=200,
        description="Read-only: accepted unchanged from GET, else 422",
    )


# The members of a policy document that describe a stored version, not the rules.
VERSION_MEMBERS = frozenset({"version", "fingerprint", "created_at", "created_by"})


class KindPolicyView(BaseModel):
    """One kind's rules as in force: every field present."""

    isolation: IsolationName = Field(description=ISOLATION)
    qos_classes: list[str] | None = Field(description=QOS_CLASSES)
    max_nodes: int | None = Field(description=MAX_NODES)
    peering: list[KindName] = Field(description=PEERING)
    default_grants: list[str] = Field(description=DEFAULT_GRANTS)
    max_pool_share_percent: int = Field(description=MAX_POOL_SHARE)
    max_partitions: int = Field(description=MAX_PARTITIONS)
    release_on_last_removal: bool = Field(description=RELEASE_ON_LAST_REMOVAL)


class KindsView(BaseModel):
    """The rules per tenant kind."""

    internal: KindPolicyView = Field(description="Rules for internal tenants")
    external: KindPolicyView = Field(description="Rules for external tenants")


class PolicyView(BaseModel):
    """A version of the policy: the document and where it came from.

    Version 0 is the built-in default (no `created_at`, no `created_by`); versions count from 1.
    Equal fingerprints mean equal rules.
    """

    version: int = Field(description="0 for the built-in default, then 1, 2, ... as stored")
    fingerprint: str = Field(
        description="'sha256:' and the hex SHA-256 of the canonical rules: equal for equal rules"
    )
    created_at: datetime | None = Field(
        description="When this version was stored, RFC 3339 UTC; null for version 0"
    )
    created_by: str | None = Field(
        description="The principal that stored it ('token:<name>:<id>', ...); null for version 0"
    )
    kinds: KindsView = Field(description="The rules per tenant kind")
    services: dict[str, VisibilityName] = Field(description=SERVICES)
