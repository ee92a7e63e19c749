"""Migration 0026: identifiers and snapshots from before it take the cautious values.

Every existing identifier counts as held since the first snapshot and every recorded snapshot as
fetched, so none is taken for undeployed (free at its release); a quarantined one waits for its
fabric's newest snapshot to be read back. The migration downgrades cleanly.
"""

from __future__ import annotations

from alembic import command
from sqlalchemy import text

from tenancy.store.db import alembic_config, make_engine
from tests.test_node_state_migration import url  # noqa: F401  (the SQLite/PostgreSQL fixture)

AT = "'2026-03-01 12:00:00+00'"
ROWS_AT_0025 = [
    "INSERT INTO fabric (id, name, kind, pkey_first, pkey_last, pkeys_per_port, created_at) "
    f"VALUES (1, 'ib-east', 'infiniband', 256, 32766, 128, {AT})",
    *(
        "INSERT INTO snapshot_record (id, fabric_id, digest, audit_index, created_at) "
        f"VALUES ({row}, 1, 'v2:{row}', {row}, {AT})"
        for row in (1, 2, 3)
    ),
    "INSERT INTO segment (fabric_id, kind, value, purpose, state, created_at) "
    f"VALUES (1, 'pkey', 257, 'pkey', 'active', {AT})",
    "INSERT INTO segment (fabric_id, kind, value, purpose, state, created_at, released_at) "
    f"VALUES (1, 'pkey', 258, 'pkey', 'quarantined', {AT}, {AT})",
]


def test_0026_counts_what_existed_as_deployed_and_quarantined_until_the_newest_read_back(url):  # noqa: F811
    engine = make_engine(url)
    config = alembic_config(url)
    try:
        command.upgrade(config, "0025")
        with engine.begin() as connection:
            for statement in ROWS_AT_0025:
                connection.execute(text(statement))

        command.upgrade(config, "0026")

        with engine.connect() as connection:
            segments = connection.execute(
                text("SELECT value, snapshot_id, drain_snapshot_id FROM segment ORDER BY value")
            )
            unfetched = connection.execute(
                text("SELECT count(*) FROM snapshot_record WHERE fetched_at IS NULL")
            )
            assert [tuple(row) for row in segments] == [(257, 0, None), (258, 0, 3)]
            assert unfetched.scalar() == 0

        command.downgrade(config, "0025")

        with engine.connect() as connection:
            records = connection.execute(text("SELECT * FROM snapshot_record")).keys()
            segment = connection.execute(text("SELECT * FROM segment")).keys()
            assert "fetched_at" not in list(records) and "snapshot_id" not in list(segment)
    finally:
        engine.dispose()
