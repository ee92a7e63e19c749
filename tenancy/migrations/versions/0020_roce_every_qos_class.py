"""Every RoCE leaf carries every QoS class with RoCE parameters.

A RoCE snapshot now holds those classes whether a segment uses them or not, and the v2 digest's
``fabric`` group holds every class (policies/roce/digest.py) instead of the unused ones. The
stored incremental state of a RoCE fabric was hashed the old way, so it is dropped: the fabric's
next change (or `isofabric verify --full`) verifies the whole fabric once and stores it again,
as after 0014. InfiniBand fabrics keep theirs. Nothing to undo on downgrade: the old code
rebuilds its own state the same way.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03 18:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ROCE = "SELECT id FROM fabric WHERE kind = 'roce'"


def upgrade() -> None:
    op.execute(f"DELETE FROM digest_group WHERE fabric_id IN ({_ROCE})")
    op.execute(f"DELETE FROM fabric_digest WHERE fabric_id IN ({_ROCE})")


def downgrade() -> None:
    op.execute(f"DELETE FROM digest_group WHERE fabric_id IN ({_ROCE})")
    op.execute(f"DELETE FROM fabric_digest WHERE fabric_id IN ({_ROCE})")
