"""Scheduled jobs across replicas: the scheduled_run table.

One row per job and period; the unique key (job, period_start) lets one replica claim a period.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scheduled_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("period_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("replica", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("detail", sqlmodel.sql.sqltypes.AutoString(length=1024), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job", "period_start"),
    )


def downgrade() -> None:
    op.drop_table("scheduled_run")
