"""Proof views: whom each isolation proof was issued for.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-09 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Every proof issued so far names every member, whoever asked for it: all are full views,
    # so tenants no longer read them (they read the tenant views issued from now on).
    with op.batch_alter_table("proof", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "view",
                sqlmodel.sql.sqltypes.AutoString(length=8),
                nullable=False,
                server_default="full",
            )
        )
    with op.batch_alter_table("proof", schema=None) as batch_op:
        batch_op.alter_column("view", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("proof", schema=None) as batch_op:
        batch_op.drop_column("view")
