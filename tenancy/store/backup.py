"""Back up and restore a SQLite database file with SQLite's online backup API.

A backup is one self-contained database file (mode 0600, rollback-journal mode: no -wal file
belongs to it), consistent as of one transaction even while the service writes. A restore
copies a checked backup over the configured database file and removes the old file's -wal and
-shm files, which would otherwise be replayed onto it. PostgreSQL has its own tools.

The signing key, the keyring and the OpenSM secret are files outside the database
(`tenancy.store.key_store`): a database backup does not hold them, and must not.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from alembic.script import ScriptDirectory

from policies.errors import ConflictError, InvalidValueError
from tenancy.store.db import MIGRATIONS_DIR, normalise_url, require_database_file
from tenancy.store.settings import sqlite_file

SQLITE_HEADER = b"SQLite format 3\x00"
# Files beside a SQLite database that belong to the one they were written for.
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")
POSTGRES_TOOLS = (
    "PostgreSQL: back up with `pg_dump -Fc` and restore with `pg_restore` "
    "(`isofabric db backup` and `db restore` copy SQLite files only)"
)


@dataclass(frozen=True, slots=True)
class Copied:
    """What a backup or a restore wrote: the file and the schema revision it holds."""

    path: Path
    revision: str
    head: str

    @property
    def current(self) -> bool:
        """Whether the copy is at this version's schema (else `isofabric db upgrade` it)."""
        return self.revision == self.head


def backup(url: str, target: Path, *, replace: bool = False) -> Copied:
    """Copy the SQLite database at `url` into the new file `target` (mode 0600), online.

    Raises:
        InvalidValueError: the database is PostgreSQL or in memory, or the copy is not an
            isofabric database.
        NotFoundError: the database file does not exist.
        ConflictError: `target` exists and `replace` is false.
    """
    source = database_file(url)
    require_database_file(source)
    _refuse_existing(target, replace)
    return _copy(source, target, replace=replace)


def restore(url: str, source: Path) -> Copied:
    """Replace the SQLite database at `url` with the backup `source` (mode 0600).

    The backup is checked first (an SQLite file whose isofabric schema revision this version
    knows), and the database must not be open in another process (a running service).

    Raises:
        InvalidValueError: the database is PostgreSQL or in memory, or `source` is not a
            backup this version can use.
        ConflictError: another process has the database open.
    """
    database = database_file(url)
    schema_revision(source)
    if database.exists() and database.resolve() == source.resolve():
        raise InvalidValueError(f"{source} is the database itself")
    _refuse_in_use(database)
    copied = _copy(source, database, replace=True)
    for suffix in COMPANION_SUFFIXES:
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    return copied


def database_file(url: str) -> Path:
    """The file of the SQLite database at `url`.

    Raises:
        InvalidValueError: the database is PostgreSQL (the message names its tools) or SQLite
            in memory.
    """
    path = sqlite_file(url)
    if path is not None:
        return path
    if normalise_url(url).startswith("postgresql"):
        raise InvalidValueError(POSTGRES_TOOLS)
    raise InvalidValueError("the database is not a SQLite file: there is no file to copy")


def schema_revision(path: Path) -> str:
    """The isofabric schema revision of the SQLite file `path`, checked page by page.

    Raises:
        InvalidValueError: `path` is not an SQLite database, is damaged, holds no isofabric
            schema, or holds a revision this version does not know (made by a newer one).
    """
    if not _has_sqlite_header(path):
        raise InvalidValueError(f"{path} is not an SQLite database")
    try:
        with closing(_connect(path)) as connection:
            damage = [row[0] for row in connection.execute("PRAGMA quick_check")]
            row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError as error:
        raise InvalidValueError(f"{path} is not an isofabric database ({error})") from error
    if damage != ["ok"]:
        raise InvalidValueError(f"{path} is damaged ({damage[0]})")
    if row is None or row[0] not in _known_revisions():
        revision = row[0] if row else "none"
        raise InvalidValueError(
            f"{path} is at schema revision {revision}, which this version does not know"
        )
    return str(row[0])


def head_revision() -> str:
    """The schema revision this version migrates databases to."""
    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    assert head is not None  # the migrations form one line
    return head


def _known_revisions() -> set[str]:
    return {script.revision for script in ScriptDirectory(str(MIGRATIONS_DIR)).walk_revisions()}


def _has_sqlite_header(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(len(SQLITE_HEADER)) == SQLITE_HEADER


def _connect(path: Path) -> sqlite3.Connection:
    """A connection to the existing file `path` (``mode=rw``: SQLite never creates it)."""
    uri = f"file:{quote(str(path.absolute()))}?mode=rw"
    return sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)


def _refuse_existing(target: Path, replace: bool) -> None:
    if target.exists() and not replace:
        raise ConflictError(f"{target} exists (pass --force to replace it)")


def _refuse_in_use(database: Path) -> None:
    """Refuse while another process has the database open: it would go on with the old one.

    The service's pooled connections keep the WAL index open, which makes an exclusive lock
    fail at once; a file that does not open as a database is in no one's use.
    """
    if not database.exists():
        return
    try:
        with closing(_connect(database)) as connection:
            connection.execute("PRAGMA locking_mode=EXCLUSIVE")
            connection.execute("PRAGMA busy_timeout=0")
            connection.execute("BEGIN EXCLUSIVE")
            connection.execute("ROLLBACK")
    except sqlite3.OperationalError as error:
        if "locked" in str(error):
            raise ConflictError(
                f"{database} is open in another process: stop the service first"
            ) from error
    except sqlite3.DatabaseError:
        return


def _copy(source: Path, target: Path, *, replace: bool) -> Copied:
    """Copy `source` to `target` through a private temporary file, checked before it moves.

    `target` is always the old file or the whole new one, never a part.

    Raises:
        InvalidValueError: `target`'s directory does not exist.
    """
    if not target.parent.is_dir():
        raise InvalidValueError(f"no directory {target.parent} to write {target.name} into")
    descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(descriptor)  # mkstemp made it 0600, which the copy keeps
    temporary = Path(name)
    try:
        with closing(_connect(source)) as origin, closing(_connect(temporary)) as copy:
            origin.backup(copy)  # one step: a consistent snapshot of the source
            # The copy's header says WAL, as its source's does: without a -wal file beside it
            # the copy is whole, and a rollback journal keeps it so when it is opened.
            copy.execute("PRAGMA journal_mode=DELETE")
        revision = schema_revision(temporary)
        _refuse_existing(target, replace)
        temporary.replace(target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return Copied(target, revision, head_revision())
