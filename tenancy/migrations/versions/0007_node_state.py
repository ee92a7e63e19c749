"""Node state: free, allocated, absent or draining; absent switches.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-09 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN, never a batch table copy: on SQLite (foreign_keys=ON) copying `node` or
    # `switch` fails as soon as a port, NIC or assignment row refers to them. So the columns keep
    # their server defaults (the models set every value explicitly; no drift is reported).
    op.add_column(
        'node',
        sa.Column(
            'state',
            sqlmodel.sql.sqltypes.AutoString(length=16),
            nullable=False,
            server_default='free',
        ),
    )
    # A held node is allocated; every other node was listed by the last import (imports deleted
    # the nodes they no longer listed), so it is free.
    op.execute(
        "UPDATE node SET state = 'allocated' "
        "WHERE id IN (SELECT node_id FROM node_assignment)"
    )
    for table in ('switch', 'roce_switch'):
        op.add_column(
            table, sa.Column('absent', sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    # DROP COLUMN in place (SQLite 3.35+), for the same reason as above: no table copy.
    for table in ('roce_switch', 'switch'):
        op.drop_column(table, 'absent')
    op.drop_column('node', 'state')
