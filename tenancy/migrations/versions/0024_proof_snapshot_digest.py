"""The snapshot an isolation proof names: proof.snapshot_digest, which pins its files.

A proof's subjects are files of the snapshot it was issued at; a verifier fetches them by digest
after the fabric moved on, so the proof's row now keeps that snapshot's files from being pruned.
Proofs issued so far get the digest their signed predicate states (an envelope that states none
keeps NULL and pins nothing); their files are pinned from now on if they were still retained,
and answer 410 otherwise, as before.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 10:00:00
"""

import base64
import binascii
import json
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEX = "ix_proof_fabric_snapshot_digest"
_DIGEST_LENGTH = 71
# Envelopes are read a batch at a time: a large proof table need not fit in memory.
_BATCH = 500
_PROOF = sa.table(
    "proof",
    sa.column("id", sa.String),
    sa.column("envelope", sa.String),
    sa.column("snapshot_digest", sa.String),
)


def upgrade() -> None:
    # In place (a nullable column): SQLite adds it without rebuilding the table.
    text = sqlmodel.sql.sqltypes.AutoString
    column = sa.Column("snapshot_digest", text(length=_DIGEST_LENGTH), nullable=True)
    op.add_column("proof", column)
    op.create_index(_INDEX, "proof", ["fabric", "snapshot_digest"], unique=False)
    connection = op.get_bind()
    after = ""
    while batch := _envelopes_after(connection, after):
        for proof_id, envelope in batch:
            digest = _stated_digest(envelope)
            if digest is not None:
                where = _PROOF.c.id == proof_id
                connection.execute(_PROOF.update().where(where).values(snapshot_digest=digest))
        after = batch[-1][0]


def downgrade() -> None:
    op.drop_index(_INDEX, table_name="proof")
    op.drop_column("proof", "snapshot_digest")  # in place on SQLite too (3.35+)


def _envelopes_after(connection: sa.Connection, after: str) -> list[tuple[str, str]]:
    query = (
        sa.select(_PROOF.c.id, _PROOF.c.envelope)
        .where(_PROOF.c.id > after)
        .order_by(_PROOF.c.id)
        .limit(_BATCH)
    )
    return [(str(proof_id), str(envelope)) for proof_id, envelope in connection.execute(query)]


def _stated_digest(envelope: str) -> str | None:
    """The predicate's snapshot_digest of a stored DSSE envelope; None if it states none."""
    try:
        payload = base64.b64decode(json.loads(envelope)["payload"], validate=True)
        digest = json.loads(payload)["predicate"]["snapshot_digest"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None
    return digest if isinstance(digest, str) and len(digest) <= _DIGEST_LENGTH else None
