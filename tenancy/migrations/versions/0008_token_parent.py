"""Token lineage: the token that minted each token.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-09 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Existing tokens have no known parent: they stay roots (null), as admin-minted ones are.
    with op.batch_alter_table("api_token", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("parent_id", sqlmodel.sql.sqltypes.AutoString(length=36), nullable=True)
        )
        batch_op.create_index(batch_op.f("ix_api_token_parent_id"), ["parent_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_api_token_parent_id_api_token"), "api_token", ["parent_id"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("api_token", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_api_token_parent_id_api_token"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_api_token_parent_id"))
        batch_op.drop_column("parent_id")
