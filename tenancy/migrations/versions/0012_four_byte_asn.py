"""4-byte ASNs: roce_switch.asn is a BIGINT on PostgreSQL.

A leaf's ASN may be any 4-byte ASN up to 4294967294 (RFC 6793, RFC 7300), e.g. the private
4200000000-4294967294 (RFC 6996), which PostgreSQL's INTEGER cannot hold. SQLite's INTEGER holds
64 bits already, so the column keeps its declaration there (no table copy).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-10 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_context().dialect.name != "sqlite":
        op.alter_column("roce_switch", "asn", existing_type=sa.Integer(), type_=sa.BigInteger())


def downgrade() -> None:
    # Fails while a stored ASN needs more than 31 bits: nothing is truncated silently.
    if op.get_context().dialect.name != "sqlite":
        op.alter_column("roce_switch", "asn", existing_type=sa.BigInteger(), type_=sa.Integer())
