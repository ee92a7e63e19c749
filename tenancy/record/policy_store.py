"""The policy document in the database: the version in force and the facts its rules need.

No `policy_version` row means the built-in default (`DEFAULT_POLICY`, version 0), which
reproduces the behaviour from before policies existed; each stored version is the canonical
document of `Policy.document`. Read the policy after taking the fabric locks a use
case needs: a policy change holds every fabric's lock while it writes (tenancy/usecases/policy.py).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from sqlalchemy import bindparam
from sqlmodel import Session, col, select

from policies.policy import (
    DEFAULT_POLICY,
    Isolation,
    Policy,
    TenantFacts,
    TenantKind,
    TenantKindPolicy,
    Visibility,
)
from tenancy import models as m
from tenancy.store.tx_memo import memo

__all__ = [
    "current_policy",
    "newest_version",
    "policy_from_document",
    "policy_of_row",
    "remember_policy",
    "tenant_facts",
    "tenant_kind_policy",
]

# Tenant names per statement: far below SQLite's 32,766 bound parameters.
_NAMES_PER_STATEMENT = 500


def current_policy(session: Session) -> Policy:
    """The policy in force in this transaction: the newest stored version, or the default.

    Remembered for the transaction (a change set verifies thousands of operations against it);
    a policy change in the transaction replaces it (`remember_policy`).
    """
    known = memo(session, "policy")
    policy: Policy | None = known.get("current")
    if policy is None:
        row = newest_version(session)
        policy = DEFAULT_POLICY if row is None else policy_of_row(row)
        known["current"] = policy
    return policy


def remember_policy(session: Session, policy: Policy) -> None:
    """Make `policy` the one `current_policy` answers for the rest of the transaction."""
    memo(session, "policy")["current"] = policy


def newest_version(session: Session) -> m.PolicyVersion | None:
    """The newest stored version's row (None: the built-in default is in force)."""
    return session.exec(_NEWEST).first()


def policy_of_row(row: m.PolicyVersion) -> Policy:
    """The engine's value of a stored version."""
    return policy_from_document(json.loads(row.document), version=row.version)


def policy_from_document(document: Mapping[str, Any], *, version: int) -> Policy:
    """The engine's value of a policy document in `Policy.document`'s form.

    Omitted kinds and fields take the default policy's (validated documents carry them all).
    """
    kinds = document.get("kinds", {})
    services = document.get("services", {})
    return Policy(
        version=version,
        internal=tenant_kind_policy(kinds.get("internal", {}), DEFAULT_POLICY.internal),
        external=tenant_kind_policy(kinds.get("external", {}), DEFAULT_POLICY.external),
        services=tuple(sorted((name, Visibility(v)) for name, v in services.items())),
    )


def tenant_kind_policy(document: Mapping[str, Any], default: TenantKindPolicy) -> TenantKindPolicy:
    """One kind's rules from its document; a field it omits keeps `default`'s value."""
    classes = document.get("qos_classes", default.qos_classes)
    return TenantKindPolicy(
        isolation=Isolation(document.get("isolation", default.isolation)),
        qos_classes=None if classes is None else tuple(sorted(set(classes))),
        max_nodes=document.get("max_nodes", default.max_nodes),
        peering=tuple(sorted({TenantKind(k) for k in document.get("peering", default.peering)})),
        default_grants=tuple(sorted(set(document.get("default_grants", default.default_grants)))),
        max_pool_share_percent=document.get(
            "max_pool_share_percent", default.max_pool_share_percent
        ),
        max_partitions=document.get("max_partitions", default.max_partitions),
        release_on_last_removal=document.get(
            "release_on_last_removal", default.release_on_last_removal
        ),
    )


def tenant_facts(session: Session, names: Collection[str]) -> tuple[TenantFacts, ...]:
    """What the policy rules need about the named tenants (unknown names are skipped), sorted.

    Kind, QoS class name and own quota, by name in a few statements (a whole fabric's owners
    in chunks, so 10k tenants stay within every backend's parameter limit).
    """
    ordered = sorted(set(names))
    facts: list[TenantFacts] = []
    for start in range(0, len(ordered), _NAMES_PER_STATEMENT):
        chunk = ordered[start : start + _NAMES_PER_STATEMENT]
        rows = session.connection().execute(_FACTS, {"names": chunk})
        facts.extend(
            TenantFacts(name, TenantKind(kind), qos, max_nodes)
            for name, kind, qos, max_nodes in rows
        )
    return tuple(sorted(facts))


# Built once: every snapshot reads the facts of its tenants.
_NEWEST = select(m.PolicyVersion).order_by(col(m.PolicyVersion.version).desc()).limit(1)
_FACTS = (
    select(col(m.Tenant.name), col(m.Tenant.kind), col(m.QosClass.name), col(m.Tenant.max_nodes))
    .join(m.QosClass, col(m.QosClass.id) == col(m.Tenant.qos_class_id))
    .where(col(m.Tenant.name).in_(bindparam("names", expanding=True)))
)
