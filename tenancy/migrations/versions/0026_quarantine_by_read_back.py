"""Quarantine ends when deploy targets read back the release: the snapshots it needs.

segment.snapshot_id and segment.drain_snapshot_id: the first snapshot holding an identifier and
the one releasing it (the commit gate stamps both); snapshot_record.fetched_at: when a deploy
target could first have received a snapshot (its signed manifest fetched, or a report of it).

Existing rows take the cautious values: every identifier counts as held since the first
snapshot (0) and every recorded snapshot as fetched, so nothing taken before the upgrade is
taken for undeployed; a quarantined identifier waits for the fabric's newest snapshot (after its
release) to be read back everywhere, or, on a fabric without targets, for the quarantine period.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 0 for a fabric without history: its first read-back ends the quarantine.
_NEWEST_OF_FABRIC = (
    "(SELECT coalesce(max(snapshot_record.id), 0) FROM snapshot_record "
    "WHERE snapshot_record.fabric_id = segment.fabric_id)"
)


def upgrade() -> None:
    # In place (nullable columns): rebuilding segment or snapshot_record would trip the foreign
    # keys that reference them on SQLite.
    op.add_column("segment", sa.Column("snapshot_id", sa.Integer(), nullable=True))
    op.add_column("segment", sa.Column("drain_snapshot_id", sa.Integer(), nullable=True))
    fetched = sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=True)
    op.add_column("snapshot_record", fetched)
    op.execute("UPDATE segment SET snapshot_id = 0")
    op.execute(
        f"UPDATE segment SET drain_snapshot_id = {_NEWEST_OF_FABRIC} WHERE state = 'quarantined'"
    )
    op.execute("UPDATE snapshot_record SET fetched_at = created_at")


def downgrade() -> None:
    op.drop_column("snapshot_record", "fetched_at")
    op.drop_column("segment", "drain_snapshot_id")
    op.drop_column("segment", "snapshot_id")
