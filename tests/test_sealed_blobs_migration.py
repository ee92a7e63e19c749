"""Migration 0021: opensm.conf retained in clear before it (its subnet keys readable by anyone
who reads the database) is deleted; the other retained files stay; the downgrade is clean."""

from __future__ import annotations

import zlib

from alembic import command
from sqlalchemy import text

from tenancy.store.db import alembic_config, make_engine
from tests.test_node_state_migration import url  # noqa: F401  (the SQLite/PostgreSQL fixture)
from tests.test_snapshot_history_migration import FABRIC

DIGEST = "sha256:" + "c" * 64
BLOB = "INSERT INTO artifact_blob (sha256, size, content) VALUES (:sha, :size, :content)"
FILE = (
    "INSERT INTO snapshot_file (fabric_id, digest, path, sha256, retained_at) "
    "VALUES (1, :digest, :path, :sha, '2026-12-01 12:00:00+00')"
)
FILES_AT_0020 = {
    "opensm/opensm.conf": b"m_key 0x8000000000000abc\nsm_key 0x8000000000000def\n",
    "opensm/partitions.conf": b"Default=0x7fff, ipoib : ALL=limited;\n",
}


def test_0021_deletes_opensm_conf_kept_in_clear_and_keeps_the_other_files(url):  # noqa: F811
    engine = make_engine(url)
    config = alembic_config(url)
    try:
        command.upgrade(config, "0020")
        with engine.begin() as connection:
            connection.execute(text(FABRIC))
            for number, (path, content) in enumerate(FILES_AT_0020.items()):
                blob = {"sha": f"{number:064x}", "size": len(content)}
                connection.execute(text(BLOB), {**blob, "content": zlib.compress(content)})
                connection.execute(text(FILE), {"digest": DIGEST, "path": path, **blob})

        command.upgrade(config, "0021")

        with engine.connect() as connection:
            kept = connection.execute(text("SELECT path FROM snapshot_file")).scalars().all()
            blobs = connection.execute(text("SELECT content, sealed FROM artifact_blob")).all()
        assert kept == ["opensm/partitions.conf"]
        assert [(zlib.decompress(c), s) for c, s in blobs] == [
            (FILES_AT_0020["opensm/partitions.conf"], False)
        ]
        command.downgrade(config, "0020")
        with engine.connect() as connection:
            columns = list(connection.execute(text("SELECT * FROM artifact_blob")).keys())
            assert "sealed" not in columns
    finally:
        engine.dispose()
