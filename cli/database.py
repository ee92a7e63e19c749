"""`isofabric db upgrade|backup|restore|restored`: migrate the database, copy it out and back in.

Backup and restore use SQLite's online backup API on a SQLite database file; PostgreSQL has
``pg_dump -Fc`` and ``pg_restore``. The key files are not in the database: back them up apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.options import DbOption, open_uow, settings_for

if TYPE_CHECKING:
    from tenancy.usecases.epochs import Declared

db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None) -> None:
    """Create the database if it is missing, apply every migration, seed the QoS classes."""
    open_uow(db, create=True)
    typer.echo("database is at the latest schema")


@db_app.command("backup")
def db_backup(
    file: Annotated[Path, typer.Argument(dir_okay=False, help="The backup file to create")],
    db: DbOption = None,
    force: Annotated[bool, typer.Option("--force", help="Replace FILE if it exists")] = False,
) -> None:
    """Copy the SQLite database into FILE (mode 0600), consistent even while the service runs.

    FILE is a whole database on its own. The signing key, the keyring and the OpenSM secret are
    not in it: back them up too, kept apart from it. PostgreSQL: use `pg_dump -Fc`.
    """
    from tenancy.store import backup

    settings = settings_for(db)
    copied = backup.backup(settings.database_url, file, replace=force)
    typer.echo(f"backed up the database (schema revision {copied.revision}) to {copied.path}")
    keys = (
        settings.signing_key_path,
        settings.keyring_path,
        settings.opensm_secret_path,
        settings.epoch_path,  # a new host restored from backups must not reuse an epoch
    )
    named = ", ".join(str(path) for path in keys if path is not None and path.exists())
    if named:
        typer.echo(f"not in the backup, back them up apart: {named}")


@db_app.command("restore")
def db_restore(
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="A backup file")
    ],
    db: DbOption = None,
) -> None:
    """Replace the SQLite database with the backup FILE; stop the service first.

    FILE must be an isofabric database this version knows; an older one needs
    `isofabric db upgrade` afterwards. The key files are not in it. PostgreSQL: `pg_restore`.
    """
    from tenancy.store import backup
    from tenancy.usecases import epochs

    settings = settings_for(db)
    backup.database_file(settings.database_url)  # PostgreSQL: refused, naming pg_restore
    epochs.epoch_file(settings)  # refused before anything is replaced when no file is named
    copied = backup.restore(settings.database_url, file)
    typer.echo(f"restored {copied.path} from {file} (schema revision {copied.revision})")
    declared = (
        epochs.declare_restore(open_uow(db)) if copied.current else epochs.advance_file(settings)
    )
    _say_epoch(declared)
    if not copied.current:
        typer.echo(
            f"the database is at schema revision {copied.revision}, older than this version's "
            f"{copied.head}: run `isofabric db upgrade`, then `isofabric db restored` (it "
            "brings the signing keys in line with the keyring)"
        )


@db_app.command("restored")
def db_restored(db: DbOption = None) -> None:
    """Declare that the database was restored from a backup (PostgreSQL: after `pg_restore`).

    Advances the manifest epoch (kept in ISOFABRIC_EPOCH_FILE, beside the key files): deploy
    agents then accept the restored service's manifests, whose sequences went back with the
    database, and still refuse replays of older ones. Run it once, on one host, before `serve`;
    `isofabric db restore` does it for SQLite.
    """
    from tenancy.usecases import epochs

    _say_epoch(epochs.declare_restore(open_uow(db)))


def _say_epoch(declared: Declared) -> None:
    typer.echo(
        f"manifest epoch {declared.epoch} (kept in {declared.file}): deploy agents accept the "
        "restored service's manifests"
    )
