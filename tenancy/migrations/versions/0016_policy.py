"""Policies for internal and external operation: the policy document's versions.

policy_version holds each version of the document (none at upgrade: the built-in default,
version 0, is in force); tenant.max_nodes is a tenant's own node quota (null: its kind's);
snapshot_record.policy_version says which version held at each snapshot (0 for the existing
history, which was taken under the default); ix_port_fabric_switch_name finds the ports on a leaf.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "policy_version",
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("document", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("fingerprint", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.PrimaryKeyConstraint("version"),
    )
    with op.batch_alter_table("tenant", schema=None) as batch_op:
        batch_op.add_column(sa.Column("max_nodes", sa.Integer(), nullable=True))
    with op.batch_alter_table("snapshot_record", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("policy_version", sa.Integer(), nullable=False, server_default="0")
        )
    # The ports on a leaf: a change under a dedicated-leaf policy reads its leaves' neighbours.
    op.create_index("ix_port_fabric_switch_name", "port", ["fabric_id", "switch_name"])


def downgrade() -> None:
    op.drop_index("ix_port_fabric_switch_name", table_name="port")
    with op.batch_alter_table("snapshot_record", schema=None) as batch_op:
        batch_op.drop_column("policy_version")
    with op.batch_alter_table("tenant", schema=None) as batch_op:
        batch_op.drop_column("max_nodes")
    op.drop_table("policy_version")
