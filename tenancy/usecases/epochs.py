"""Declaring a database restore: the next manifest epoch (tenancy/store/epoch.py says why).

`isofabric db restore` declares one after it replaced a SQLite database; `isofabric db restored`
after a PostgreSQL restore, which happens outside isofabric (`pg_restore`). From then on every
manifest is signed with the new epoch, so deploy agents accept the restored service's manifests
although their sequences went back, and still refuse replays of older manifests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from policies.errors import InvalidValueError
from tenancy.record import audit_log
from tenancy.store import epoch
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import key_retirement


@dataclass(frozen=True, slots=True)
class Declared:
    """The epoch now in force and the file that keeps it."""

    epoch: int
    file: str


def declare_restore(uow: UnitOfWork) -> Declared:
    """Advance the epoch past every one the file or the database knows; record it in both.

    Raises:
        InvalidValueError: no epoch file can be named (set ISOFABRIC_EPOCH_FILE).
    """
    path = epoch_file(uow.settings)
    with uow.transaction() as tx:
        new = epoch.declare(tx, path)
        key_retirement.reconcile_with_keyring(tx)
        audit_log.record(tx, "db.restored", f"epochs/{new}")
    return Declared(new, str(path))


def advance_file(settings: Settings) -> Declared:
    """Advance the epoch in the file alone (a restored database too old to record it yet)."""
    path = epoch_file(settings)
    new = epoch.next_epoch(epoch.file_epoch(path), datetime.now(UTC))
    epoch.write_epoch(path, new)
    return Declared(new, str(path))


def epoch_file(settings: Settings) -> Path:
    """The epoch file; `InvalidValueError` when none can be named."""
    path = settings.epoch_path
    if path is None:
        raise InvalidValueError(
            "set ISOFABRIC_EPOCH_FILE (or ISOFABRIC_KEYRING_FILE, beside which it is kept): the "
            "manifest epoch lives beside the key files, where a restore cannot take it back"
        )
    return path
