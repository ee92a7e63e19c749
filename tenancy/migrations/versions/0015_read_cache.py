"""Cached reads: the shared read cache and an index for the newest snapshot.

cached_read holds verdicts and rendered files for the other replicas (PostgreSQL; empty at
upgrade, filled by the first read of each state). ix_snapshot_record_fabric_newest makes a
fabric's current digest, which every cached read looks up, one index probe.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cached_read",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fabric_id", sa.Integer(), nullable=False),
        sa.Column("digest", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("inputs", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("sealed", sa.Boolean(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["fabric_id"], ["fabric.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("fabric_id", "digest", "inputs", "name"),
    )
    op.create_index("ix_snapshot_record_fabric_newest", "snapshot_record", ["fabric_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_snapshot_record_fabric_newest", table_name="snapshot_record")
    op.drop_table("cached_read")
