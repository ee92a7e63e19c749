"""isofabric policy engine: pure verification, rendering and parsing of fabric isolation.

Layers, top to bottom (import-linter enforces them, see pyproject.toml):

* `config_audit`, `evidence`: read deployed files and proofs of both technologies;
* `infiniband`, `roce`: one package per technology, independent of each other;
* `intent`, `verdict`, `findings`, `artifacts`: what every technology returns;
* `model`: owners, nodes, grants, fabric kinds;
* `errors`: the one domain error hierarchy.

`usage` (metering) and `authz` (casbin roles) use only the lower shared layers.
"""
