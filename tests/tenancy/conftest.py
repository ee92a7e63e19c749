"""Fixtures for tests where several processes or connections share one database."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["postgres", "sqlite-file"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database several processes can open: a fresh PostgreSQL database (skips when
    ISOFABRIC_TEST_POSTGRES_URL is unset) or a SQLite file (WAL, BEGIN IMMEDIATE)."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return f"sqlite:///{tmp_path / 'shared.db'}"
