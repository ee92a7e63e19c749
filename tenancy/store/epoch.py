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
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from sqlalchemy import func
from sqlmodel import Session, select

from policies.errors import InvalidValueError
from tenancy import models as m
from tenancy.store.settings import Settings


def file_epoch(path: Path | None) -> int:
    """The epoch the file holds; 0 when there is no file.

    Raises:
        InvalidValueError: the file holds something other than a whole number.
    """
    if path is None or not path.exists():
        return 0
    text = path.read_text().strip()
    if not text.isdigit():
        raise InvalidValueError(f"the epoch file {path} does not hold a whole number")
    return int(text)


def database_epoch(session: Session) -> int:
    """The highest epoch the database records (0 when none was declared)."""
    return session.exec(select(func.max(m.DeployEpoch.epoch))).one() or 0


def current_epoch(session: Session, settings: Settings) -> int:
    """The epoch manifests are signed with now: the higher of the file's and the database's."""
    path = settings.epoch_path
    on_file, recorded = file_epoch(path), database_epoch(session)
    if recorded > on_file and path is not None:
        write_epoch(path, recorded)
    return max(on_file, recorded)


def write_epoch(path: Path, epoch: int) -> None:
    """Replace the epoch file atomically (a scratch file renamed over it)."""
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(4)}.new")
    scratch.write_text(f"{epoch}\n")
    os.replace(scratch, path)
