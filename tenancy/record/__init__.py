"""Layer 2, what the system of record holds and appends to.

What the system of record holds and appends to: identifier pools, snapshots, the audit log,
idempotency keys, node states and the read cache's stored entries. It builds on
`tenancy.store` and knows no use case.

`__all__` names the modules of this layer; importing the package imports none of them.
"""

__all__ = [
    "audit_log",
    "audit_tail",
    "digest_state",
    "idempotency",
    "node_states",
    "policy_store",
    "pools",
    "port_identity",
    "read_cache_store",
    "snapshot",
    "snapshot_log",
    "subnet_manager",
    "vrf_segments",
]
