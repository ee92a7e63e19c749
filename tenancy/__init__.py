"""isofabric system of record: persistence, allocation and use cases, in layers.

Each layer imports only the layers below it (`make lint` checks it with import-linter, and that
no import cycle exists inside `tenancy`):

5. `usecases/`: what the routes, the console and the command line call, one module per resource.
4. `gate/`: verify-before-commit, incremental digests, what-if rehearsals, verdict caches.
3. `technology`: the one place that dispatches between InfiniBand and RoCE.
2. `record/`: identifier pools, snapshots, the audit log, idempotency keys, node states.
1. `store/`: engine and sessions, the unit of work, locks, settings, secrets, backups.
0. `models/` (database rows) and `schemas/` (API shapes).

docs/maintainers.md places every package of the repository and says what it may import.
"""
