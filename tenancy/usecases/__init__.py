"""Layer 5, use cases: what the routes, the console and the command line call.

What the routes, the console and the command line call: one module per resource. Each
use case runs in a unit of work (`tenancy.store.uow`) and writes through the commit
gate (`tenancy.gate`).

`__all__` names the modules of this layer; importing the package imports none of them.
"""

__all__ = [
    "allocations",
    "bootstrap",
    "changesets",
    "config_audits",
    "default_grants",
    "demo",
    "deploy",
    "deploy_sync",
    "drains",
    "fabric_map",
    "fabrics",
    "grant_records",
    "ib_topology",
    "leaf_patches",
    "monitoring",
    "nodes",
    "peerings",
    "placement",
    "policy",
    "proofs",
    "quotas",
    "readiness",
    "releases",
    "roce_observations",
    "roce_topology",
    "scheduler",
    "shared_services",
    "signing_keys",
    "snapshot_history",
    "tenant_patch",
    "tenants",
    "tokens",
    "topology",
    "usage",
]
