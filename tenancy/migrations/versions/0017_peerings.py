"""Consented peerings: the peering table and the P_Keys peerings hold.

peering holds each request between two tenants on a fabric and its fate (requested, accepted,
ended; the row stays for history); one open peering per fabric and ordered pair.
segment.peering_id names the peering an accepted InfiniBand peering's P_Key belongs to (null for
every existing row: tenants' and services' segments).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OPEN = "state != 'ended'"


def upgrade() -> None:
    _create_peering()
    with op.batch_alter_table("segment", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("peering_id", sqlmodel.sql.sqltypes.AutoString(length=36), nullable=True)
        )
        batch_op.create_index(batch_op.f("ix_segment_peering_id"), ["peering_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_segment_peering_id_peering"), "peering", ["peering_id"], ["id"]
        )


def _create_peering() -> None:
    who = sqlmodel.sql.sqltypes.AutoString(length=128)
    op.create_table(
        "peering",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=36), nullable=False),
        sa.Column("fabric_id", sa.Integer(), nullable=False),
        sa.Column("requester_id", sa.Integer(), nullable=False),
        sa.Column("peer_id", sa.Integer(), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("requested_by", who, nullable=False),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("accepted_by", who, nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_by", who, nullable=True),
        sa.ForeignKeyConstraint(["fabric_id"], ["fabric.id"]),
        sa.ForeignKeyConstraint(["peer_id"], ["tenant.id"]),
        sa.ForeignKeyConstraint(["requester_id"], ["tenant.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("peering", schema=None) as batch_op:
        for column in ("fabric_id", "peer_id", "requester_id"):
            batch_op.create_index(batch_op.f(f"ix_peering_{column}"), [column], unique=False)
        batch_op.create_index(
            "uq_peering_open",
            ["fabric_id", "requester_id", "peer_id"],
            unique=True,
            sqlite_where=sa.text(_OPEN),
            postgresql_where=sa.text(_OPEN),
        )


def downgrade() -> None:
    with op.batch_alter_table("segment", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_segment_peering_id_peering"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_segment_peering_id"))
        batch_op.drop_column("peering_id")
    op.drop_table("peering")
