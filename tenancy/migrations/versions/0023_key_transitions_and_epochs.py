"""Key transitions and manifest epochs: signing_key.transition and the deploy_epoch table.

A rotation now signs a key transition statement with the retired key and its successor, kept on
the retired key's row, so that deploy agents can follow the rotation. A database restore
declares a new manifest epoch; the table records the declarations (the highest also lives in a
file beside the key files, which a restore does not move back).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06 18:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    text = sqlmodel.sql.sqltypes.AutoString
    op.add_column("signing_key", sa.Column("transition", text(), nullable=True))
    op.add_column("signing_key", sa.Column("retirement", text(), nullable=True))
    op.create_table(
        "deploy_epoch",
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("declared_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("epoch"),
    )


def downgrade() -> None:
    op.drop_table("deploy_epoch")
    op.drop_column("signing_key", "retirement")
    op.drop_column("signing_key", "transition")
