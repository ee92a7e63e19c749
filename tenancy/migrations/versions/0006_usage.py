"""Usage metering: tenants' billing accounts and usage intervals.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 13:20:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op



revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('tenant', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                'billing_account',
                sqlmodel.sql.sqltypes.AutoString(length=64),
                nullable=False,
                server_default='',
            )
        )
    # Existing tenants bill to an account named like themselves (the default for new ones).
    op.execute("UPDATE tenant SET billing_account = name WHERE billing_account = ''")
    with op.batch_alter_table('tenant', schema=None) as batch_op:
        batch_op.alter_column('billing_account', server_default=None)

    op.create_table('usage_interval',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('tenant_id', sa.Integer(), nullable=False),
    sa.Column('fabric_id', sa.Integer(), nullable=False),
    sa.Column('billing_account', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('qos_class', sqlmodel.sql.sqltypes.AutoString(length=63), nullable=False),
    sa.Column('resource_type', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('resource', sqlmodel.sql.sqltypes.AutoString(length=63), nullable=False),
    sa.Column('ports', sa.Integer(), nullable=False),
    sa.Column('allocation_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=True),
    sa.Column('grant_id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['allocation_id'], ['allocation.id'], ),
    sa.ForeignKeyConstraint(['fabric_id'], ['fabric.id'], ),
    sa.ForeignKeyConstraint(['grant_id'], ['grant.id'], ),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenant.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('usage_interval', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_usage_interval_allocation_id'), ['allocation_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_usage_interval_fabric_id'), ['fabric_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_usage_interval_grant_id'), ['grant_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_usage_interval_tenant_id'), ['tenant_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('usage_interval', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_usage_interval_tenant_id'))
        batch_op.drop_index(batch_op.f('ix_usage_interval_grant_id'))
        batch_op.drop_index(batch_op.f('ix_usage_interval_fabric_id'))
        batch_op.drop_index(batch_op.f('ix_usage_interval_allocation_id'))
    op.drop_table('usage_interval')
    with op.batch_alter_table('tenant', schema=None) as batch_op:
        batch_op.drop_column('billing_account')
