"""The manifest epoch: the first half of every signed manifest's position ``(epoch, sequence)``.

A manifest's sequence is the audit index of its snapshot's change, and restoring an older
database moves the audit index back: without an epoch, agents would refuse every manifest after
a restore as a replay (and a revoked tenant would keep its access). The epoch must therefore
survive a restore of the database it protects, so its authority is a file beside the key files
(`Settings.epoch_path`, a decimal number; absent means epoch 0), which a restore does not touch.
The table ``deploy_epoch`` records each declaration too, so that every replica of a PostgreSQL
deployment signs with the epoch one of them declared: the epoch in force is the higher of the
two, and a replica that learns a higher one from the table writes it to its own file, so that a
later restore cannot take it back there either.

A new epoch is the larger of one more than the current one and the time in seconds
(`next_epoch`): a host whose epoch file lags (another host declared the last one, or it was
rebuilt from backups) still declares one that no agent has seen.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from datetime import datetime
from pathlib import Path

from sqlalchemy import func
from sqlmodel import Session, select

from policies.errors import KeyUnavailableError
from tenancy import models as m
from tenancy.store.settings import Settings
from tenancy.store.uow import Tx

_LOG = logging.getLogger(__name__)
_DIGITS = re.compile(r"[0-9]{1,18}")


def file_epoch(path: Path | None) -> int:
    """The epoch the file holds; 0 when there is no file.

    Raises:
        KeyUnavailableError: the file is unreadable or holds something other than a whole
            number (503: the service cannot sign manifests until an operator fixes it).
    """
    if path is None or not path.exists():
        return 0
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        text = ""
    if not _DIGITS.fullmatch(text):
        raise KeyUnavailableError(
            "the manifest epoch file (ISOFABRIC_EPOCH_FILE) does not hold a whole number",
            missing=["ISOFABRIC_EPOCH_FILE"],
        )
    return int(text)


def next_epoch(current: int, now: datetime) -> int:
    """The epoch to declare after `current`: one more, or the time in seconds if larger."""
    return max(current + 1, int(now.timestamp()))


def database_epoch(session: Session) -> int:
    """The highest epoch the database records (0 when none was declared)."""
    return session.exec(select(func.max(m.DeployEpoch.epoch))).one() or 0


def current_epoch(session: Session, settings: Settings) -> int:
    """The epoch manifests are signed with now: the higher of the file's and the database's."""
    path = settings.epoch_path
    on_file, recorded = file_epoch(path), database_epoch(session)
    if recorded > on_file and path is not None:
        try:
            write_epoch(path, recorded)
        except OSError as error:  # e.g. the key directory is mounted read-only: sign anyway
            _LOG.warning("the epoch file could not be updated to %d: %s", recorded, error)
    return max(on_file, recorded)


def write_epoch(path: Path, epoch: int) -> None:
    """Replace the epoch file atomically (a scratch file renamed over it)."""
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(4)}.new")
    scratch.write_text(f"{epoch}\n")
    os.replace(scratch, path)


def declare(tx: Tx, path: Path) -> int:
    """Declare the next epoch (`next_epoch`) in the file and the database; returns it.

    The file is written before the database commits: if the commit fails, the file is ahead,
    which only skips numbers (epochs need to grow, not to be consecutive).
    """
    new = next_epoch(current_epoch(tx.session, tx.settings), tx.now)
    write_epoch(path, new)
    tx.session.add(m.DeployEpoch(epoch=new, declared_at=tx.now))
    return new
