"""The signing key, keyring and OpenSM secret of the test suites.

The service never creates a key on its own, so the in-memory and PostgreSQL test databases (which
have no directory to keep key files beside) share one set of files, made once per test session in
a private temporary directory: `KEY_SETTINGS` points `Settings` at them, and `register_key`
records the key in a database as `isofabric keys create` would.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from tenancy.store import key_store
from tenancy.store.settings import Settings
from tenancy.store.uow import UnitOfWork
from tenancy.usecases import signing_keys


@cache
def key_directory() -> Path:
    """The session's directory of key files (removed when the test process exits)."""
    directory = Path(tempfile.mkdtemp(prefix="isofabric-test-keys-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    key_store.write_private_file(
        directory / "signing.key", key_store.private_pem(key_store.generate_signing_key())
    )
    key_store.write_private_file(directory / "opensm.secret", key_store.new_opensm_secret())
    return directory


def key_settings(settings: Settings, copy_to: Path | None = None) -> Settings:
    """`settings` pointed at the session's key files, or at copies of them in `copy_to`.

    A test that rotates the key must work on copies: rotation replaces the key file, which every
    other test's database does not know.
    """
    directory = key_directory()
    if copy_to is not None:
        copy_to.mkdir(exist_ok=True)
        for name in ("signing.key", "keyring.jsonl", "opensm.secret"):
            if (directory / name).exists():
                shutil.copy2(directory / name, copy_to / name)
        directory = copy_to
    return replace(
        settings,
        signing_key_file=str(directory / "signing.key"),
        keyring_file=str(directory / "keyring.jsonl"),
        opensm_secret_file=str(directory / "opensm.secret"),
    )


def register_key(engine: Engine) -> None:
    """Record the session's key as the database's active key (`isofabric keys create`)."""
    url = engine.url.render_as_string(hide_password=False)
    signing_keys.create(UnitOfWork(engine, key_settings(Settings(database_url=url))))


def keys_create(url: str) -> dict[str, Any]:
    """Run `isofabric keys create --db URL` as an operator would; its JSON output."""
    from typer.testing import CliRunner

    from cli import app

    result = CliRunner().invoke(app, ["keys", "create", "--db", url])
    assert result.exit_code == 0, result.output
    created: dict[str, Any] = json.loads(result.stdout)
    return created
