"""Isolation proofs: signed DSSE envelopes over in-toto statements.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 13:05:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('proof',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
    sa.Column('tenant', sqlmodel.sql.sqltypes.AutoString(length=63), nullable=False),
    sa.Column('fabric', sqlmodel.sql.sqltypes.AutoString(length=63), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('envelope', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('proof', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_proof_fabric'), ['fabric'], unique=False)
        batch_op.create_index(batch_op.f('ix_proof_tenant'), ['tenant'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('proof', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_proof_tenant'))
        batch_op.drop_index(batch_op.f('ix_proof_fabric'))
    op.drop_table('proof')
