"""Several partitions per tenant: partition, partition_member, virtual_guid; fabric.virtual_guids.

A tenant's active P_Key segment (purpose ``pkey``) is its partition named ``default`` as it
is (same key, same members, same files): no row of it moves. The additional partitions are new
``partition`` rows, each holding a segment of purpose ``partition``; the partial unique index on
segment keeps one active value per purpose and tenant except those, of which a tenant may hold
several.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-08 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEX = "uq_segment_active_tenant"
_OLD_WHERE = "state = 'active' AND tenant_id IS NOT NULL"
_NEW_WHERE = "state = 'active' AND tenant_id IS NOT NULL AND purpose <> 'partition'"


def upgrade() -> None:
    text = sqlmodel.sql.sqltypes.AutoString
    op.add_column("fabric", sa.Column("virtual_guids", text(length=4096), nullable=True))
    _create_tables(text)
    _replace_index(_NEW_WHERE)


def _create_tables(text: type[sqlmodel.sql.sqltypes.AutoString]) -> None:
    stamp = sa.DateTime(timezone=True)
    op.create_table(
        "partition",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fabric_id", sa.Integer(), sa.ForeignKey("fabric.id"), nullable=False),
        sa.Column("tenant_id", sa.Integer(), sa.ForeignKey("tenant.id"), nullable=False),
        sa.Column("name", text(length=63), nullable=False),
        sa.Column("segment_id", sa.Integer(), sa.ForeignKey("segment.id"), nullable=False),
        sa.Column("ipoib", sa.Boolean(), nullable=False),
        sa.Column("index0", sa.Boolean(), nullable=False),
        sa.Column("qos_class_id", sa.Integer(), sa.ForeignKey("qos_class.id"), nullable=True),
        sa.Column("created_at", stamp, nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("fabric_id", "tenant_id", "name"),
        sa.UniqueConstraint("segment_id"),
    )
    op.create_index("ix_partition_fabric_id", "partition", ["fabric_id"])
    op.create_index("ix_partition_tenant_id", "partition", ["tenant_id"])
    op.create_table(
        "partition_member",
        sa.Column("partition_id", sa.Integer(), sa.ForeignKey("partition.id"), nullable=False),
        sa.Column("guid", text(length=18), nullable=False),
        sa.Column("full", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("partition_id", "guid"),
    )
    op.create_index("ix_partition_member_guid", "partition_member", ["guid"])
    op.create_table(
        "virtual_guid",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fabric_id", sa.Integer(), sa.ForeignKey("fabric.id"), nullable=False),
        sa.Column("guid", text(length=18), nullable=False),
        sa.Column("tenant_id", sa.Integer(), sa.ForeignKey("tenant.id"), nullable=False),
        sa.Column("state", text(length=16), nullable=False),
        sa.Column("bound_at", stamp, nullable=False),
        sa.Column("released_at", stamp, nullable=True),
        sa.Column("snapshot_id", sa.Integer(), nullable=True),
        sa.Column("drain_snapshot_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("fabric_id", "guid"),
    )
    op.create_index("ix_virtual_guid_fabric_id", "virtual_guid", ["fabric_id"])
    op.create_index("ix_virtual_guid_tenant_id", "virtual_guid", ["tenant_id"])


def _replace_index(where: str) -> None:
    op.drop_index(_INDEX, table_name="segment")
    op.create_index(
        _INDEX,
        "segment",
        ["fabric_id", "tenant_id", "purpose"],
        unique=True,
        sqlite_where=sa.text(where),
        postgresql_where=sa.text(where),
    )


def downgrade() -> None:
    op.drop_table("virtual_guid")
    op.drop_table("partition_member")
    op.drop_table("partition")
    op.execute("DELETE FROM segment WHERE purpose = 'partition'")
    _replace_index(_OLD_WHERE)
    op.drop_column("fabric", "virtual_guids")
