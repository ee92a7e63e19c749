"""Migration 0024: each stored proof gets the snapshot digest its signed predicate states (the
snapshot it pins); an envelope that states none keeps NULL; the downgrade is clean."""

from __future__ import annotations

import base64
import json

from alembic import command
from sqlalchemy import text

from tenancy.store.db import alembic_config, make_engine
from tests.test_node_state_migration import url  # noqa: F401  (the SQLite/PostgreSQL fixture)

DIGEST = "v2:" + "d" * 64
PROOF = (
    "INSERT INTO proof (id, tenant, fabric, created_at, envelope, view) "
    "VALUES (:id, 'acme', 'ib-east', '2026-12-01 12:00:00+00', :envelope, 'full')"
)


def envelope(statement: object) -> str:
    payload = base64.b64encode(json.dumps(statement).encode()).decode()
    document = {"payload": payload, "payloadType": "application/vnd.in-toto+json"}
    return json.dumps({**document, "signatures": []})


STORED = {
    "stated": envelope({"predicate": {"snapshot_digest": DIGEST}}),
    "no-digest": envelope({"predicate": {}}),
    "not-json": json.dumps({"payload": base64.b64encode(b"{").decode()}),
    "not-base64": json.dumps({"payload": "!"}),
}


def test_0024_stores_each_proofs_stated_snapshot_digest(url):  # noqa: F811
    engine = make_engine(url)
    config = alembic_config(url)
    try:
        command.upgrade(config, "0023")
        with engine.begin() as connection:
            for proof_id, stored in STORED.items():
                connection.execute(text(PROOF), {"id": proof_id, "envelope": stored})

        command.upgrade(config, "0024")

        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, snapshot_digest FROM proof")).all()
        assert dict(rows) == {
            "stated": DIGEST,
            "no-digest": None,
            "not-json": None,
            "not-base64": None,
        }
        command.downgrade(config, "0023")
        with engine.connect() as connection:
            columns = list(connection.execute(text("SELECT * FROM proof")).keys())
            assert "snapshot_digest" not in columns
    finally:
        engine.dispose()
