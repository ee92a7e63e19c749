"""Migration 0020 (issue 16): RoCE fabrics' stored incremental digest state is dropped, since
their snapshots now hold every QoS class with RoCE parameters; InfiniBand fabrics keep theirs."""

from __future__ import annotations

from alembic import command
from sqlalchemy import text

from tenancy.store.db import alembic_config, make_engine
from tests.test_node_state_migration import url  # noqa: F401  (the SQLite/PostgreSQL fixture)

FABRIC = (
    "INSERT INTO fabric (id, name, kind, pkey_first, pkey_last, pkeys_per_port, created_at) "
    "VALUES (:id, :name, :kind, 0, 0, 128, '2026-12-01 12:00:00+00')"
)
DIGEST = (
    "INSERT INTO fabric_digest (fabric_id, digest, state, holds, updated_at) "
    "VALUES (:id, :digest, :state, true, '2026-12-01 12:00:00+00')"
)
GROUP = "INSERT INTO digest_group (fabric_id, key, hash) VALUES (:id, 'fabric', :hash)"


def test_0020_drops_the_stored_digest_state_of_roce_fabrics_only(url):  # noqa: F811
    engine = make_engine(url)
    config = alembic_config(url)
    try:
        command.upgrade(config, "0019")
        with engine.begin() as connection:
            for fabric_id, name, kind in ((1, "ib-east", "infiniband"), (2, "roce-west", "roce")):
                connection.execute(text(FABRIC), {"id": fabric_id, "name": name, "kind": kind})
                digest = "v2:" + str(fabric_id) * 64
                state = {"id": fabric_id, "digest": digest, "state": b"s"}
                connection.execute(text(DIGEST), state)
                connection.execute(text(GROUP), {"id": fabric_id, "hash": b"h"})

        command.upgrade(config, "0020")

        with engine.connect() as connection:
            for table in ("fabric_digest", "digest_group"):
                rows = connection.execute(text(f"SELECT fabric_id FROM {table}"))
                assert [r[0] for r in rows] == [1], table
        command.downgrade(config, "0019")
    finally:
        engine.dispose()
