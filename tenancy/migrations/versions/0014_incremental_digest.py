"""Incremental v2 snapshot digest: the fabric's LtHash state and its group hashes.

Empty at upgrade: the first change of each fabric after it (or `isofabric verify --full`)
verifies the whole fabric once and fills both tables; from then on changes update them.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 10:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fabric_digest",
        sa.Column("fabric_id", sa.Integer(), nullable=False),
        sa.Column("digest", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.Column("holds", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("checked_digest", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=True),
        sa.Column("alarm", sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=True),
        sa.ForeignKeyConstraint(["fabric_id"], ["fabric.id"]),
        sa.PrimaryKeyConstraint("fabric_id"),
    )
    op.create_table(
        "digest_group",
        sa.Column("fabric_id", sa.Integer(), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("hash", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["fabric_id"], ["fabric.id"]),
        sa.PrimaryKeyConstraint("fabric_id", "key"),
    )
    # A change must not scan the fabric: free-node picks, drains, the fabric's previous
    # audit digest.
    op.create_index(
        "ix_node_fabric_state_role_name", "node", ["fabric_id", "state", "role", "name"]
    )
    op.create_index("ix_audit_entry_fabric_index", "audit_entry", ["fabric", "index"])


def downgrade() -> None:
    op.drop_index("ix_audit_entry_fabric_index", table_name="audit_entry")
    op.drop_index("ix_node_fabric_state_role_name", table_name="node")
    op.drop_table("digest_group")
    op.drop_table("fabric_digest")
