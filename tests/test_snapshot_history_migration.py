"""Migration 0013 (issue 11): the snapshot history is backfilled from the audit log's digest
chain (one row per change of a fabric's digest), and the migration downgrades cleanly."""

from __future__ import annotations

from alembic import command
from sqlalchemy import text

from tenancy.store.db import alembic_config, make_engine
from tests.test_node_state_migration import url  # noqa: F401  (the SQLite/PostgreSQL fixture)

A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
FABRIC = (
    "INSERT INTO fabric (id, name, kind, pkey_first, pkey_last, pkeys_per_port, created_at) "
    "VALUES (1, 'ib-east', 'infiniband', 256, 32766, 128, '2026-03-01 12:00:00+00')"
)
ENTRY = (
    'INSERT INTO audit_entry ("index", time, principal, role, action, target, fabric, '
    "digest_after, leaf_hash) VALUES (:i, :t, 'system', 'operator', :a, 'x', :f, :d, '')"
)
# index, action, fabric, digest_after: a repeat of A, a token (no fabric) and a grant back to A
ENTRIES_AT_0012 = [
    (0, "fabric.create", "ib-east", A),
    (1, "token.create", None, None),
    (2, "node.patch", "ib-east", A),
    (3, "allocation.create", "ib-east", B),
    (4, "allocation.release", "ib-east", A),
]


def test_0013_backfills_one_snapshot_per_change_of_digest(url):  # noqa: F811
    engine = make_engine(url)
    config = alembic_config(url)
    try:
        command.upgrade(config, "0012")
        with engine.begin() as connection:
            connection.execute(text(FABRIC))
            for index, action, fabric, digest in ENTRIES_AT_0012:
                values = {"i": index, "t": f"2026-03-01 12:00:0{index}+00", "a": action}
                connection.execute(text(ENTRY), {**values, "f": fabric, "d": digest})

        command.upgrade(config, "0013")

        with engine.connect() as connection:
            history = connection.execute(
                text("SELECT fabric_id, digest, audit_index FROM snapshot_record ORDER BY id")
            )
            assert [tuple(r) for r in history] == [(1, A, 0), (1, B, 3), (1, A, 4)]
        command.downgrade(config, "0012")
        with engine.connect() as connection:
            columns = connection.execute(text("SELECT * FROM node")).keys()
            assert "drain_snapshot_id" not in columns
    finally:
        engine.dispose()
