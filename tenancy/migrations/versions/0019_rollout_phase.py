"""RoCE phased rollout: the phase of a deploy report and of its target.

A report's `phase` (1: access removals only, 2: the whole snapshot; null for a whole
deployment) and, on the target, the phase it last applied and of which snapshot.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03 18:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("deploy_target", schema=None) as batch_op:
        batch_op.add_column(sa.Column("phase", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column("phase_digest", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=True)
        )
    with op.batch_alter_table("deployment_report", schema=None) as batch_op:
        batch_op.add_column(sa.Column("phase", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deployment_report", schema=None) as batch_op:
        batch_op.drop_column("phase")
    with op.batch_alter_table("deploy_target", schema=None) as batch_op:
        batch_op.drop_column("phase_digest")
        batch_op.drop_column("phase")
