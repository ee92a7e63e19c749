"""API tokens: hashed secrets with role, tenant scope, expiry and revocation.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 12:50:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('api_token',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=63), nullable=False),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('tenant', sqlmodel.sql.sqltypes.AutoString(length=63), nullable=True),
    sa.Column('secret_sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_token_secret_sha256'), ['secret_sha256'], unique=True)
        batch_op.create_index(batch_op.f('ix_api_token_tenant'), ['tenant'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_token_tenant'))
        batch_op.drop_index(batch_op.f('ix_api_token_secret_sha256'))
    op.drop_table('api_token')
