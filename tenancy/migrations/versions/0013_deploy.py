"""Deployment: snapshot history, retained artifacts, deploy targets and reports.

Also the agent token's fabric and target, and a draining node's snapshot. The history is
backfilled from the audit log: every entry whose fabric digest differs from that fabric's
previous one is a snapshot (the same rule `tenancy.usecases.snapshot_history.record` applies from now on).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 06:38:14
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "artifact_blob",
        sa.Column("sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("sha256"),
    )
    op.create_table(
        "deploy_target",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fabric_id", sa.Integer(), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=63), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=24), nullable=True),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True),
        sa.Column("digest", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=True),
        sa.Column("deployed", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=True),
        sa.Column("applied_snapshot_id", sa.Integer(), nullable=True),
        sa.Column("observed_snapshot_id", sa.Integer(), nullable=True),
        sa.Column("observed_digest", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=True),
        sa.Column("mismatches", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("detail", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["fabric_id"],
            ["fabric.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("fabric_id", "name"),
    )
    with op.batch_alter_table("deploy_target", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_deploy_target_fabric_id"), ["fabric_id"], unique=False)

    op.create_table(
        "snapshot_file",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fabric_id", sa.Integer(), nullable=False),
        sa.Column("digest", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=False),
        sa.Column("path", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("retained_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["fabric_id"],
            ["fabric.id"],
        ),
        sa.ForeignKeyConstraint(
            ["sha256"],
            ["artifact_blob.sha256"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("fabric_id", "digest", "path"),
    )
    with op.batch_alter_table("snapshot_file", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_snapshot_file_fabric_id"), ["fabric_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_snapshot_file_sha256"), ["sha256"], unique=False)

    op.create_table(
        "snapshot_record",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fabric_id", sa.Integer(), nullable=False),
        sa.Column("digest", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=False),
        sa.Column("audit_index", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["fabric_id"],
            ["fabric.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("snapshot_record", schema=None) as batch_op:
        batch_op.create_index(
            "ix_snapshot_record_fabric_digest", ["fabric_id", "digest"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_snapshot_record_fabric_id"), ["fabric_id"], unique=False
        )

    op.create_table(
        "deployment_report",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fabric_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=True),
        sa.Column("target", sqlmodel.sql.sqltypes.AutoString(length=63), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("principal", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=24), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("digest", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=True),
        sa.Column("observed_digest", sqlmodel.sql.sqltypes.AutoString(length=71), nullable=True),
        sa.Column("mismatches", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("detail", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("durations", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("ports_read", sa.Integer(), nullable=False),
        sa.Column("audit_index", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["fabric_id"],
            ["fabric.id"],
        ),
        sa.ForeignKeyConstraint(
            ["target_id"],
            ["deploy_target.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("deployment_report", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_deployment_report_fabric_id"), ["fabric_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_deployment_report_target_id"), ["target_id"], unique=False
        )

    with op.batch_alter_table("api_token", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("fabric", sqlmodel.sql.sqltypes.AutoString(length=63), nullable=True)
        )
        batch_op.add_column(
            sa.Column("target", sqlmodel.sql.sqltypes.AutoString(length=63), nullable=True)
        )

    with op.batch_alter_table("node", schema=None) as batch_op:
        batch_op.add_column(sa.Column("drain_snapshot_id", sa.Integer(), nullable=True))

    _backfill_history()


def _backfill_history() -> None:
    connection = op.get_bind()
    fabric_ids = dict(connection.execute(sa.text("SELECT name, id FROM fabric")).all())
    entries = connection.execute(
        sa.text(
            'SELECT "index", time, fabric, digest_after FROM audit_entry '
            'WHERE fabric IS NOT NULL AND digest_after IS NOT NULL ORDER BY "index"'
        )
    ).all()
    last: dict[str, str] = {}
    rows = []
    for index, time, fabric, digest in entries:
        if fabric in fabric_ids and last.get(fabric) != digest:
            last[fabric] = digest
            rows.append(
                {"fabric_id": fabric_ids[fabric], "digest": digest, "audit_index": index, "t": time}
            )
    if rows:
        connection.execute(
            sa.text(
                "INSERT INTO snapshot_record (fabric_id, digest, audit_index, created_at) "
                "VALUES (:fabric_id, :digest, :audit_index, :t)"
            ),
            rows,
        )


def downgrade() -> None:
    with op.batch_alter_table("node", schema=None) as batch_op:
        batch_op.drop_column("drain_snapshot_id")

    with op.batch_alter_table("api_token", schema=None) as batch_op:
        batch_op.drop_column("target")
        batch_op.drop_column("fabric")

    with op.batch_alter_table("deployment_report", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_deployment_report_target_id"))
        batch_op.drop_index(batch_op.f("ix_deployment_report_fabric_id"))

    op.drop_table("deployment_report")
    with op.batch_alter_table("snapshot_record", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshot_record_fabric_id"))
        batch_op.drop_index("ix_snapshot_record_fabric_digest")

    op.drop_table("snapshot_record")
    with op.batch_alter_table("snapshot_file", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshot_file_sha256"))
        batch_op.drop_index(batch_op.f("ix_snapshot_file_fabric_id"))

    op.drop_table("snapshot_file")
    with op.batch_alter_table("deploy_target", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_deploy_target_fabric_id"))

    op.drop_table("deploy_target")
    op.drop_table("artifact_blob")
