"""Retained files that hold secrets are sealed: artifact_blob.sealed.

opensm.conf carries the subnet's M_Key, SM_Key and SA_Key; it was retained zlib-compressed
only, so a database reader (or a backup's) read the keys. From now on it is kept sealed
(tenancy/store/sealing.py) under a key that is not in the database. The clear copies retained
so far are deleted, with their rows: the key that would seal them is not at hand in a migration.
Nothing is lost: the next signed-manifest fetch retains the current snapshot's opensm.conf again,
sealed, and an older snapshot's answers 410 (not retained) for that one file. The downgrade keeps
the column's rows (the old code would serve a sealed blob as it is, so sealed blobs go too).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 13:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# policies/artifacts.py SECRET_PATHS, as of this revision.
_SECRET_PATHS = "('opensm/opensm.conf')"
_UNUSED = "sha256 NOT IN (SELECT sha256 FROM snapshot_file)"


def upgrade() -> None:
    # Not a batch: SQLite adds a column in place, and rebuilding artifact_blob (which
    # snapshot_file references) would fail its foreign key check.
    column = sa.Column("sealed", sa.Boolean(), nullable=False, server_default=sa.false())
    op.add_column("artifact_blob", column)
    op.execute(f"DELETE FROM snapshot_file WHERE path IN {_SECRET_PATHS}")
    op.execute(f"DELETE FROM artifact_blob WHERE {_UNUSED}")


def downgrade() -> None:
    sealed = "SELECT sha256 FROM artifact_blob WHERE sealed"
    op.execute(f"DELETE FROM snapshot_file WHERE sha256 IN ({sealed})")
    op.execute(f"DELETE FROM artifact_blob WHERE {_UNUSED}")
    op.drop_column("artifact_blob", "sealed")  # in place on SQLite too (3.35+)
