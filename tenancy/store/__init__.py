"""Layer 1, plumbing: sessions, transactions, locks, settings, secrets; no isolation rule.

Plumbing of the system of record: engine and sessions, the unit of work, locks, settings,
secrets, backups and caches. No isolation rule lives here; it imports only rows
(`tenancy.models`), API shapes (`tenancy.schemas`) and the engine (`policies`).

`__all__` names the modules of this layer; importing the package imports none of them.
"""

__all__ = [
    "backup",
    "bulk",
    "db",
    "documents",
    "history",
    "key_store",
    "locks",
    "lookups",
    "observers",
    "pagination",
    "read_cache",
    "settings",
    "tx_memo",
    "uow",
]
