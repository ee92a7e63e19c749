"""Keys out of the database: no private signing key, no OpenSM keys.

The signing key's private half now lives in a key file (mode 0600) and the OpenSM keys derive
from a secret file; the database keeps public keys only. A key whose private half sat in the
database (a file created 0644) must be presumed exposed, and its private half is dropped here,
so the active key is retired: it stays published, and `isofabric keys create` makes the new one.
The per-fabric OpenSM keys go with their table; opensm.conf then carries the derived keys (set
ISOFABRIC_OPENSM_*_KEY to keep the old values).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-09 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("UPDATE signing_key SET status = 'retired' WHERE status = 'active'")
    with op.batch_alter_table("signing_key", schema=None) as batch_op:
        batch_op.drop_column("private_pem")
    op.drop_table("sm_secret")


def downgrade() -> None:
    # Schema only: the dropped secrets are gone. An older version would create new ones.
    op.create_table(
        "sm_secret",
        sa.Column("fabric_id", sa.Integer(), nullable=False),
        sa.Column("m_key", sqlmodel.sql.sqltypes.AutoString(length=18), nullable=False),
        sa.Column("sm_key", sqlmodel.sql.sqltypes.AutoString(length=18), nullable=False),
        sa.Column("sa_key", sqlmodel.sql.sqltypes.AutoString(length=18), nullable=False),
        sa.ForeignKeyConstraint(["fabric_id"], ["fabric.id"]),
        sa.PrimaryKeyConstraint("fabric_id"),
    )
    with op.batch_alter_table("signing_key", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "private_pem",
                sqlmodel.sql.sqltypes.AutoString(),
                nullable=False,
                server_default="",
            )
        )
