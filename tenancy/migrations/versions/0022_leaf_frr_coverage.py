"""What a RoCE leaf's agent covers: deploy_target.covers and deploy_target.frr_digest.

A leaf agent without --frr-conf leaves frr.conf alone; it now says so in its reports
(`covers`), and the service remembers the last snapshot whose frr.conf an agent read back on the
leaf (`frr_digest`), so that sync never counts the leaf as holding a snapshot whose frr.conf
differs. Existing targets start with neither: their next report fills them in.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06 13:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # In place (nullable columns): rebuilding deploy_target would trip the foreign keys of
    # deployment_report on SQLite.
    text = sqlmodel.sql.sqltypes.AutoString
    op.add_column("deploy_target", sa.Column("covers", text(length=32), nullable=True))
    op.add_column("deploy_target", sa.Column("frr_digest", text(length=71), nullable=True))


def downgrade() -> None:
    op.drop_column("deploy_target", "frr_digest")
    op.drop_column("deploy_target", "covers")
