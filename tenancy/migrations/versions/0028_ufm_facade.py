"""The UFM-compatible API: facade sessions, partition labels, allocation origins, drain P_Keys.

``facade_session`` holds ``/dologin`` sessions by the SHA-256 of their cookie;
``partition.label`` a UFM client's ``partition_name`` and ``partition.origin`` whether an
orchestrator created it; ``allocation.origin`` marks allocations an orchestrator made;
``virtual_guid.pkey`` the P_Key a draining virtual GUID left. Every new column is nullable:
existing rows mean what they meant.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    text = sqlmodel.sql.sqltypes.AutoString
    stamp = sa.DateTime(timezone=True)
    op.create_table(
        "facade_session",
        sa.Column("id", text(length=64), nullable=False),
        sa.Column("credential_sha256", text(length=64), nullable=False),
        sa.Column("created_at", stamp, nullable=False),
        sa.Column("expires_at", stamp, nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.add_column("partition", sa.Column("label", text(length=64), nullable=True))
    op.add_column("partition", sa.Column("origin", text(length=16), nullable=True))
    op.add_column("allocation", sa.Column("origin", text(length=16), nullable=True))
    op.add_column("virtual_guid", sa.Column("pkey", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("virtual_guid", "pkey")
    op.drop_column("allocation", "origin")
    op.drop_column("partition", "origin")
    op.drop_column("partition", "label")
    op.drop_table("facade_session")
