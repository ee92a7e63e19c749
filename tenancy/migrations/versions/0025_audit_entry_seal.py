"""Each audit entry's seal: audit_entry.seal.

The service signs each new entry's index and leaf hash with the active key when it appends it
(tenancy/record/audit_seal.py), so that `audit verify` can name an entry edited together with its
leaf hash. Entries appended before carry none.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06 18:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "audit_entry", sa.Column("seal", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("audit_entry", "seal")
